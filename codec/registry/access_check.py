"""Whether the schema registry takes this client, asked once at start.

A registry that refuses the client's credentials, a CA file that cannot be read or
a certificate the CA does not vouch for never heals by retrying. Found while
messages flow, each would turn a whole topic into dead letters (a refused lookup
looks like any other failed one), so every tool that reaches a registry asks first
(`check_registry`), as it asks Kafka (`service.kafka.security_check`): one request
with the configured URL, credentials and CA, and a failure becomes one line naming
the registry, the user and the setting to check (`RegistryAccessError`, exit status
1 in every tool). A setting that is wrong on its face (a URL that is not http or
https, credentials given twice) is refused before, with the other settings (exit 2).

The request is `GET /schemas/types`: every Confluent-compatible API serves it
(Confluent Schema Registry 5.5+, Apicurio Registry's ccompat API), it needs the
same login as a lookup, and it answers a few bytes whatever the registry holds.
A 404 there means the URL is not such an API (a path missing, e.g. Apicurio's
`/apis/ccompat/v7`).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.error
from typing import Final

from codec.registry.client import (
    CaFileUnusable,
    RegistryAccess,
    RegistryClient,
    RegistryRefused,
    RegistryUnavailable,
    SchemaNotFound,
    describe,
)

PROBE_PATH: Final = "/schemas/types"
URL_SETTING: Final = "registry.url / REGISTRY_URL"
CA_SETTING: Final = "registry.ca_file / REGISTRY_CA_FILE"
LOGIN_SETTING: Final = (
    "registry.username and registry.password / REGISTRY_USERNAME, REGISTRY_PASSWORD"
)


class RegistryAccessError(Exception):
    """The registry cannot be used with these settings (the one line)."""


def check_registry(access: RegistryAccess) -> None:
    """One request to the registry at ``access``; raise if it cannot be used.

    Waits at most ``access.budget_s`` (every attempt of an unanswered request).

    Raises:
        RegistryAccessError: one line: the registry, the user, the cause, and the
            setting to check (URL, CA file, username and password).
    """
    client = RegistryClient(access)
    try:
        types = client.get(PROBE_PATH)
    except RegistryRefused as exc:
        raise RegistryAccessError(_line(access, _refusal(access, exc))) from None
    except SchemaNotFound:
        raise RegistryAccessError(
            _line(
                access,
                f"no Confluent-compatible API at this URL (GET {PROBE_PATH}: "
                f"HTTP 404); check {URL_SETTING}: Apicurio Registry's ends in "
                "/apis/ccompat/v7",
            )
        ) from None
    except RegistryUnavailable as exc:
        raise RegistryAccessError(_line(access, _unusable(access, exc))) from None
    if not isinstance(types, list):
        raise RegistryAccessError(_line(access, _not_the_api(f"{str(types)[:60]}")))


def _not_the_api(answer: str) -> str:
    return (
        "it does not answer as a Confluent-compatible API (GET /schemas/types "
        f"answered {answer}, not a list of schema types); check {URL_SETTING}"
    )


def _refusal(access: RegistryAccess, exc: RegistryRefused) -> str:
    if exc.status == 403:
        return (
            f"HTTP 403: the registry knows user {access.username!r} but does not let "
            f"it read schemas (its role or ACLs); check {LOGIN_SETTING}"
        )
    if access.username is None:
        return (
            f"HTTP {exc.status}: the registry asks for a login and none is set; "
            f"set {LOGIN_SETTING}"
        )
    return f"HTTP {exc.status}: unknown user or wrong password; check {LOGIN_SETTING}"


def _unusable(access: RegistryAccess, exc: RegistryUnavailable) -> str:
    """The cause of a failed request, and the setting that can mend it."""
    cause = exc.cause
    if isinstance(exc, CaFileUnusable):
        return f"{CA_SETTING} = {access.ca_file!r}: {_ca_file_fault(cause)}"
    reason = cause.reason if isinstance(cause, urllib.error.URLError) else cause
    if isinstance(reason, ssl.SSLCertVerificationError):
        return _untrusted(access, reason)
    if isinstance(reason, ssl.SSLError):
        if "WRONG_VERSION_NUMBER" in str(reason):
            return (
                "it does not speak TLS on this port (an https URL for an http "
                f"registry?); check {URL_SETTING}"
            )
        return f"TLS handshake failed ({describe(reason)}); check {URL_SETTING}"
    if isinstance(reason, http.client.RemoteDisconnected | ConnectionResetError):
        hint = " (not an HTTP server, or an http URL for an https one?)"
        hint = hint if _plain(access) else ""
        return f"it closed the connection without an answer{hint}; check {URL_SETTING}"
    if isinstance(reason, socket.gaierror):
        return (
            f"its host name does not resolve ({describe(reason)}); check {URL_SETTING}"
        )
    if isinstance(cause, urllib.error.HTTPError):
        return f"{exc}; check {URL_SETTING}"
    if isinstance(cause, ValueError):  # an answer, not JSON: a web page?
        return _not_the_api("what is not JSON")
    if isinstance(cause, http.client.HTTPException):
        return f"it does not answer HTTP ({describe(cause)}); check {URL_SETTING}"
    return (
        f"no answer ({describe(cause)}; {access.attempts} attempts of "
        f"{access.timeout_s:g} s); check {URL_SETTING}"
    )


def _ca_file_fault(cause: BaseException | None) -> str:
    if isinstance(cause, ssl.SSLError):  # read, but not a CA bundle
        return f"it holds no PEM certificate (OpenSSL: {cause.reason or cause})"
    if isinstance(cause, OSError) and cause.strerror:
        return f"it cannot be read ({cause.strerror.lower()})"
    return f"it cannot be read ({describe(cause)})"


def _plain(access: RegistryAccess) -> bool:
    return access.url.lower().startswith("http:")


def _untrusted(access: RegistryAccess, err: ssl.SSLCertVerificationError) -> str:
    why = str(err.verify_message)
    if "mismatch" in why.lower() or "doesn't match" in str(err):
        return (
            f"its certificate is not valid for the URL's host ({why}); connect by a "
            f"name or address the certificate holds ({URL_SETTING})"
        )
    if "expired" in why:
        return f"its certificate has expired ({why})"
    where = f"the CA file {access.ca_file!r}" if access.ca_file else "the system's CAs"
    return (
        f"its certificate is not trusted ({why}): it is not signed by a CA in "
        f"{where}; check {CA_SETTING}"
    )


def _line(access: RegistryAccess, cause: str) -> str:
    who = f" (user {access.username!r})" if access.username is not None else ""
    line = f"schema registry at {access.url} cannot be used{who}: {cause}"
    return " ".join(line.split())  # one line, whatever a server sent
