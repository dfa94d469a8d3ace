"""A small Confluent-compatible schema registry client: fetch by id, register.

Only the calls the framed codecs need (`GET /schemas/ids/{id}`, `GET
/schemas/guids/{guid}`, `POST /subjects/{subject}/versions`, and `GET
/subjects/{subject}/versions/{version}` for the schemas one references), over the standard
library's HTTP client with basic auth and a CA file. Each call is bounded: a timeout
per attempt, a few attempts with a short back-off, so a registry that is down costs
at most `budget_s` for the first message of a new id; after that the client answers
"unavailable" at once for `cooldown_s` instead of waiting again on every message.

GUIDs (magic 1 frames, confluent-kafka 2.x's `__value_schema_id` header) are looked
up at `/schemas/guids/{guid}`, the Confluent Schema Registry 8 endpoint. A registry
that does not serve it answers 404 with no Confluent error body (Apicurio Registry
3.0.9 has no schema GUIDs at all: neither its ccompat API nor its core API, whose
ids are integer globalIds and contentIds, can map one): `GuidsUnsupported`, which
dead-letters the message with reason `guid_unsupported`. An unknown GUID on a
registry that serves the endpoint is a 404 with `error_code` 40403 (`SchemaNotFound`).

Only a 404 says anything about the message's schema id. Every other failure is the
registry's or this client's: a refused login (401, 403: `RegistryRefused`), a CA
file it cannot read, a certificate it does not trust, no answer, a 5xx, any other
4xx answer to a lookup (`RegistryUnavailable`, the cause kept in `cause`). The
client never raises for its settings when built: a CA file that cannot be read is
reported by every call (and named by `codec.registry.access_check` at start).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Final, Protocol

from schemas.errors import DecodeError

_CONTENT: Final = "application/vnd.schemaregistry.v1+json"
UNAVAILABLE: Final = "registry_unavailable"
"""The `DecodeError` reason of a lookup the registry could not answer: the worker
holds the message's partition back (never a dead letter)."""
_MAX_REFERENCES: Final = 64
"""More schemas referenced than any real one: a reference loop or junk stops here."""


class RegistryUnavailable(Exception):
    """The registry could not be used: no answer within the bounded attempts, a
    TLS failure, a 5xx or another answer that is not about the schema asked for.

    Args:
        text: the one line.
        cause: the last failure (an `OSError`, `ssl.SSLError`, `HTTPError`...), for
            the start-up check to name the setting at fault.
    """

    def __init__(self, text: str, cause: BaseException | None = None) -> None:
        super().__init__(text)
        self.cause = cause


class CaFileUnusable(RegistryUnavailable):
    """The configured CA file is missing, unreadable or holds no certificate."""


class RegistryRefused(RegistryUnavailable):
    """The registry refused this client's credentials (HTTP 401, 403 or 407)."""

    def __init__(self, text: str, status: int) -> None:
        super().__init__(text)
        self.status = status


class SchemaNotFound(Exception):
    """The registry answered that the id or GUID is unknown (HTTP 404)."""


class GuidsUnsupported(SchemaNotFound):
    """The registry does not serve `/schemas/guids/{guid}` (a 404 with no
    Confluent error body): it cannot resolve any GUID."""


class SchemaSource(Protocol):
    """What a framed codec asks of a registry: `RegistryClient`, or an in-memory
    one (`codec.registry.memory`) for benchmarks and tests."""

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        """The schema registered under id or GUID ``ref``."""
        ...

    def register(self, subject: str, schema_type: str, text: str) -> int:
        """Registers ``text`` under ``subject``; returns its id."""
        ...

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        """The id of ``text`` if it is registered under ``subject``, else None."""
        ...


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry returns it."""

    schema_type: str
    """AVRO, PROTOBUF or JSON (a missing `schemaType` means AVRO)."""
    text: str
    references: tuple[str, ...] = ()
    """The texts of the schemas it references (its `references`, theirs too),
    each after the ones it references: Avro reads its named types from them."""


@dataclass(frozen=True, slots=True)
class RegistryAccess:
    """Where the registry is and how to reach it (no secret in ``repr``)."""

    url: str
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    timeout_s: float = 2.0
    attempts: int = 3
    backoff_s: float = 0.2
    cooldown_s: float = 5.0

    def __repr__(self) -> str:
        return f"RegistryAccess(url={self.url!r}, username={self.username!r})"

    @property
    def budget_s(self) -> float:
        """The longest one lookup can take: every attempt and back-off."""
        pauses = sum(self.backoff_s * 2.0**i for i in range(self.attempts - 1))
        return self.attempts * self.timeout_s + pauses


class RegistryClient:
    """Fetches schemas by id or GUID and registers them, each call bounded."""

    def __init__(self, access: RegistryAccess) -> None:
        self.access = access
        self._base = access.url.rstrip("/")
        self._headers = {"Accept": _CONTENT}
        if access.username is not None:
            pair = f"{access.username}:{access.password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self._tls: ssl.SSLContext | None = None
        self._tls_error: OSError | None = None
        if access.ca_file:
            try:
                self._tls = ssl.create_default_context(cafile=access.ca_file)
            except OSError as exc:  # missing, unreadable, no certificate in it
                self._tls_error = exc
        self._down_until = 0.0
        self._failure = ""

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        """The schema registered under id ``ref`` (an int) or GUID (hex text).

        Raises:
            SchemaNotFound: the registry does not know it.
            RegistryUnavailable: no answer within the budget, or in the cooldown
                after such a failure.
        """
        if isinstance(ref, int):
            path = f"/schemas/ids/{ref}"
        else:
            path = f"/schemas/guids/{ref[:8]}-{ref[8:12]}-{ref[12:16]}-{ref[16:20]}-{ref[20:]}"
        body = dict(self._call("GET", path, None))
        texts: dict[tuple[str, int], str] = {}
        self._referenced(body, texts)
        return RegisteredSchema(
            str(body.get("schemaType") or "AVRO"),
            str(body["schema"]),
            tuple(texts.values()),
        )

    def _referenced(
        self, body: dict[str, Any], texts: dict[tuple[str, int], str]
    ) -> None:
        """Fetches the schemas ``body`` references (depth first, each once) into
        ``texts``, each after its own references."""
        for ref in body.get("references") or ():
            key = (str(ref["subject"]), int(ref["version"]))
            if key in texts:
                continue
            if len(texts) >= _MAX_REFERENCES:
                raise ValueError(f"more than {_MAX_REFERENCES} schema references")
            subject = urllib.parse.quote(key[0], safe="")
            found = dict(
                self._call("GET", f"/subjects/{subject}/versions/{key[1]}", None)
            )
            texts[key] = ""  # taken: a cycle ends here
            self._referenced(found, texts)
            texts[key] = str(found["schema"])

    def register(self, subject: str, schema_type: str, text: str) -> int:
        """Registers ``text`` under ``subject`` (an existing equal one keeps its id).

        Raises:
            RegistryUnavailable: no answer within the budget (`RegistryRefused`:
                the credentials were refused).
            ValueError: the registry refused it (the text says why).
        """
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        return int(self._call("POST", path, _payload(schema_type, text))["id"])

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        """The id ``text`` has under ``subject`` if it is registered there, else
        None (`POST /subjects/{subject}`): a writer whose key may read but not
        register writes with the id of a schema registered by someone else.

        Raises:
            RegistryUnavailable: as `register`.
            ValueError: the registry refused the request.
        """
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}"
        try:
            return int(self._call("POST", path, _payload(schema_type, text))["id"])
        except SchemaNotFound:  # no such subject, or not this schema in it
            return None

    def get(self, path: str) -> Any:
        """``GET path`` under the base URL, bounded like every call (the start-up
        check's probe, `codec.registry.access_check`)."""
        return self._call("GET", path, None)

    def _call(self, method: str, path: str, payload: Any) -> Any:
        if self._tls_error is not None:
            raise CaFileUnusable(
                f"registry CA file {self.access.ca_file!r} cannot be used: "
                f"{describe(self._tls_error)}",
                self._tls_error,
            )
        if time.monotonic() < self._down_until:
            raise RegistryUnavailable(f"{self._failure} (not asked again yet)")
        data = None if payload is None else json.dumps(payload).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = _CONTENT
        request = urllib.request.Request(  # noqa: S310 (a configured http(s) URL)
            self._base + path, data=data, headers=headers, method=method
        )
        last: BaseException | None = None
        for attempt in range(self.access.attempts):
            if attempt:
                time.sleep(self.access.backoff_s * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(  # noqa: S310 (a configured http(s) URL)
                    request, timeout=self.access.timeout_s, context=self._tls
                ) as reply:
                    return json.loads(reply.read())
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    raise _not_found(path, exc) from None
                exc.close()  # its socket, now
                if exc.code in _REFUSED:
                    text = f"registry refused {method} {path}: HTTP {exc.code}"
                    raise RegistryRefused(self._cool_down(text), exc.code) from None
                if exc.code < 500 and exc.code != 429:
                    if method == "POST":  # the schema itself refused (409, 422)
                        raise ValueError(
                            f"registry refused {method} {path}: HTTP {exc.code}"
                        ) from None
                    # not an answer about the id: the registry's fault, asked later
                    text = f"registry answered {method} {path} with HTTP {exc.code}"
                    raise RegistryUnavailable(self._cool_down(text), exc) from None
                last = exc
            # refused, timed out, not HTTP (another service's port), not JSON
            except (OSError, http.client.HTTPException, ValueError) as exc:
                last = exc
        text = f"registry unavailable after {self.access.attempts} attempts"
        raise RegistryUnavailable(self._cool_down(f"{text} ({describe(last)})"), last)

    def _cool_down(self, failure: str) -> str:
        """No request for `cooldown_s` after ``failure`` (returned)."""
        self._down_until = time.monotonic() + self.access.cooldown_s
        self._failure = failure
        return failure


def _payload(schema_type: str, text: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":  # the API's default type
        payload["schemaType"] = schema_type
    return payload


_REFUSED: Final = (401, 403, 407)
"""Answers that refuse this client's credentials: retrying cannot help."""


def describe(exc: BaseException | None) -> str:
    """A failure in a few words: an HTTP status, OpenSSL's reason, the OS's."""
    if exc is None:
        return "no attempt"
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    reason: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {reason.verify_message}"
    if isinstance(reason, ssl.SSLError):
        return f"TLS: {reason.reason or reason.strerror or reason}"
    if isinstance(reason, OSError) and reason.strerror:
        return f"{type(reason).__name__}: {reason.strerror}"
    text = " ".join(str(reason).split())[:120] or type(reason).__name__
    return f"{type(reason).__name__}: {text}" if text != type(reason).__name__ else text


def _not_found(path: str, exc: urllib.error.HTTPError) -> SchemaNotFound:
    """A 404: an unknown id or GUID, or (a GUID path without the Confluent error
    body, `error_code`) a registry that has no GUID endpoint."""
    try:
        text = exc.read() if path.startswith("/schemas/guids/") else b""
    except OSError:
        text = b""
    finally:
        exc.close()  # its socket, now, not at garbage collection
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {}
    if not path.startswith("/schemas/guids/"):
        return SchemaNotFound(f"HTTP 404 for {path}")
    if isinstance(body, dict) and "error_code" in body:
        return SchemaNotFound(f"HTTP 404 for {path}")
    return GuidsUnsupported(
        "the registry does not serve GET /schemas/guids/{guid} (Apicurio 3.0.9 has"
        " no schema GUIDs): write magic-0 ids (prefix_schema_id_serializer)"
    )


def lookup_error(codec: str, ref: int | str, exc: Exception) -> DecodeError:
    """The `DecodeError` for a failed lookup of schema ``ref``, naming it: reason
    `registry_unavailable` (the worker waits) only for the registry's failures."""
    if isinstance(exc, GuidsUnsupported):
        return DecodeError(
            f"schema GUID {ref}: {exc}", codec=codec, reason="guid_unsupported"
        )
    if isinstance(exc, SchemaNotFound):
        return DecodeError(
            f"schema id {ref}: not in the registry",
            codec=codec,
            reason="schema_unknown",
        )
    if isinstance(exc, RegistryUnavailable):
        return DecodeError(f"schema id {ref}: {exc}", codec=codec, reason=UNAVAILABLE)
    # an answer that cannot be read: junk, a reference loop
    return DecodeError(f"schema id {ref}: {exc}", codec=codec, reason="schema_mismatch")
