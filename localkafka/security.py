"""A secured client listener for the local broker: throw-away CA, keystores, users.

`codec-kafka start --security MODE` runs the broker with one client listener of that
mode; the controller and an internal plaintext listener (the broker's own traffic,
the readiness probe, the SCRAM users' creation) stay on 127.0.0.1. At every start a
new CA and a broker certificate (subject alternative name IP:127.0.0.1) are made with
the JDK's keytool (no network, no Python dependency); `mtls` adds a client
certificate. Passwords go to keytool through its environment, never its arguments.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

from schemas.errors import LocalKafkaError

Security = Literal["plaintext", "ssl", "sasl_plaintext", "sasl_ssl", "mtls"]
SECURITY_MODES: Final[tuple[str, ...]] = get_args(Security)
PROTOCOLS: Final[dict[str, str]] = {
    "plaintext": "PLAINTEXT",
    "ssl": "SSL",
    "sasl_plaintext": "SASL_PLAINTEXT",
    "sasl_ssl": "SASL_SSL",
    "mtls": "SSL",
}
"""Each mode's client-side `security.protocol`."""
MECHANISM: Final = "SCRAM-SHA-512"
USER: Final = "codec-ab"
CLIENT_FILE: Final = "client.toml"
_PASS_ENV: Final = "CODEC_KAFKA_STOREPASS"  # noqa: S105  # a variable name
_VALIDITY_DAYS: Final = "30"
HOST: Final = "127.0.0.1"


def uses_tls(mode: str) -> bool:
    """Whether the client listener of `mode` speaks TLS."""
    return mode in ("ssl", "sasl_ssl", "mtls")


def uses_sasl(mode: str) -> bool:
    """Whether the client listener of `mode` asks for SASL (SCRAM-SHA-512)."""
    return mode.startswith("sasl_")


def keytool() -> str:
    """The JDK's keytool (next to `java_executable()`, else on PATH)."""
    from localkafka.classpath import java_executable

    beside = Path(java_executable()).resolve().parent / "keytool"
    found = str(beside) if beside.is_file() else shutil.which("keytool")
    if found is None:
        raise LocalKafkaError("'keytool' not found (a JDK's bin/): install a JDK 17+")
    return found


def _keytool(password: str, *args: str) -> None:
    env = {**os.environ, _PASS_ENV: password}
    done = subprocess.run(  # noqa: S603  # the JDK's own tool
        [keytool(), *_FAST_JVM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if done.returncode != 0:
        text = (done.stdout + done.stderr).strip().splitlines()
        raise LocalKafkaError(f"keytool {args[0]} failed: {' '.join(text)[:300]}")


_FAST_JVM: Final = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")
"""keytool runs for a second: a JVM that starts fast, not one that runs fast."""
_STORE: Final = ("-storetype", "PKCS12", "-storepass:env", _PASS_ENV)
_KEY: Final = ("-keyalg", "EC", "-groupname", "secp256r1")


@dataclass(frozen=True)
class Material:
    """The files of one start's TLS material, all in one directory (mode 0700)."""

    directory: Path
    password: str
    """The password of every keystore here (also each key's)."""

    @property
    def ca_pem(self) -> Path:
        """The CA certificate, PEM: the clients' `ssl.ca.location`."""
        return self.directory / "ca.pem"

    @property
    def broker_p12(self) -> Path:
        """The broker's key and certificate chain (PKCS12)."""
        return self.directory / "broker.p12"

    @property
    def truststore_p12(self) -> Path:
        """The CA as a PKCS12 truststore: what the broker checks client certificates
        against (mtls)."""
        return self.directory / "truststore.p12"

    def client_p12(self, name: str = "client") -> Path:
        """A client's key and certificate chain (PKCS12): `ssl.keystore.location`."""
        return self.directory / f"{name}.p12"

    def signed(
        self,
        store: Path,
        alias: str,
        subject: str,
        *,
        san: str | None = None,
        start: str | None = None,
        validity: str = _VALIDITY_DAYS,
    ) -> Path:
        """Makes a key in `store` and has the CA sign its certificate.

        Args:
            store: The PKCS12 file to make (key, signed certificate, CA).
            alias: The key's alias.
            subject: Its distinguished name.
            san: A subject alternative name (`IP:127.0.0.1`).
            start: keytool's `-startdate` (`-2d`: an already expired certificate
                with `validity="1"`).
            validity: Days the certificate is valid.
        """
        pw, ca = self.password, self.directory / "ca.p12"
        csr, crt = store.with_suffix(".csr"), store.with_suffix(".crt")
        _keytool(
            pw,
            "-genkeypair",
            "-alias",
            alias,
            *_KEY,
            "-dname",
            subject,
            "-validity",
            validity,
            "-keystore",
            str(store),
            *_STORE,
        )
        _keytool(
            pw,
            "-certreq",
            "-alias",
            alias,
            "-keystore",
            str(store),
            *_STORE,
            "-file",
            str(csr),
        )
        extra = ["-ext", f"SAN={san}"] if san else []
        when = ["-startdate", start] if start else []
        _keytool(
            pw,
            "-gencert",
            "-alias",
            "ca",
            "-keystore",
            str(ca),
            *_STORE,
            "-infile",
            str(csr),
            "-outfile",
            str(crt),
            "-rfc",
            *extra,
            *when,
            "-validity",
            validity,
        )
        _trust_ca(pw, self.ca_pem, store)
        _keytool(
            pw,
            "-importcert",
            "-alias",
            alias,
            "-file",
            str(crt),
            "-keystore",
            str(store),
            *_STORE,
        )
        csr.unlink()
        crt.unlink()
        store.chmod(0o600)
        return store


def _trust_ca(password: str, ca_pem: Path, store: Path) -> None:
    """Adds the CA certificate to `store` (created if missing) as alias `ca`."""
    _keytool(
        password,
        "-importcert",
        "-noprompt",
        *("-alias", "ca", "-file", str(ca_pem), "-keystore", str(store)),
        *_STORE,
    )


def make_material(directory: Path, *, client: bool) -> Material:
    """A new CA, the broker's keystore, a truststore; a client keystore if `client`.

    Whatever `directory` held is replaced: every start gets fresh material.
    """
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, mode=0o700)
    material = Material(directory, secrets.token_urlsafe(18))
    pw, ca = material.password, directory / "ca.p12"
    _keytool(
        pw,
        "-genkeypair",
        "-alias",
        "ca",
        *_KEY,
        "-dname",
        "CN=codec-kafka throw-away CA",
        "-ext",
        "bc:c",
        "-validity",
        _VALIDITY_DAYS,
        "-keystore",
        str(ca),
        *_STORE,
    )
    ca.chmod(0o600)
    _keytool(
        pw,
        "-exportcert",
        "-rfc",
        "-alias",
        "ca",
        "-keystore",
        str(ca),
        *_STORE,
        "-file",
        str(material.ca_pem),
    )
    _trust_ca(pw, material.ca_pem, material.truststore_p12)
    material.signed(material.broker_p12, "broker", "CN=127.0.0.1", san="IP:127.0.0.1")
    if client:
        material.signed(material.client_p12(), "client", f"CN={USER}")
    return material


def listener_properties(
    mode: str, material: Material | None, name: str = "client"
) -> dict[str, str]:
    """The server.properties of the client listener `name` in `mode`."""
    prefix = f"listener.name.{name}."
    props: dict[str, str] = {}
    if uses_tls(mode) and material is not None:
        props |= {
            prefix + "ssl.keystore.type": "PKCS12",
            prefix + "ssl.keystore.location": str(material.broker_p12),
            prefix + "ssl.keystore.password": material.password,
            prefix + "ssl.key.password": material.password,
        }
    if mode == "mtls" and material is not None:
        props |= {
            prefix + "ssl.truststore.type": "PKCS12",
            prefix + "ssl.truststore.location": str(material.truststore_p12),
            prefix + "ssl.truststore.password": material.password,
            prefix + "ssl.client.auth": "required",
        }
    if uses_sasl(mode):
        login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        props |= {
            prefix + "sasl.enabled.mechanisms": MECHANISM,
            prefix + f"{MECHANISM.lower()}.sasl.jaas.config": login,
        }
    return props


def secured_properties(
    mode: str,
    ports: tuple[int, int, int],
    material: Material | None,
) -> dict[str, str]:
    """The listener settings of a `mode` client listener, with the broker's own
    traffic on a plaintext internal listener (all on 127.0.0.1).

    Args:
        mode: One of `SECURITY_MODES` but plaintext.
        ports: The client, internal and controller ports.
        material: The TLS material (modes with TLS).
    """
    port, internal_port, controller_port = ports
    protocol = PROTOCOLS[mode]
    return {
        "listeners": f"CLIENT://{HOST}:{port},INTERNAL://{HOST}:{internal_port},"
        f"CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"CLIENT://{HOST}:{port},"
        f"INTERNAL://{HOST}:{internal_port}",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": f"CLIENT:{protocol},INTERNAL:PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        **listener_properties(mode, material),
    }


def client_settings(
    mode: str, bootstrap: str, material: Material | None, password: str | None
) -> dict[str, str]:
    """The `[kafka]` settings a client of the `mode` listener needs."""
    kafka = {"bootstrap_servers": bootstrap, "security_protocol": PROTOCOLS[mode]}
    if uses_tls(mode) and material is not None:
        kafka["ssl_ca_location"] = str(material.ca_pem)
    if uses_sasl(mode) and password is not None:
        kafka |= {
            "sasl_mechanism": MECHANISM,
            "sasl_username": USER,
            "sasl_password": password,
        }
    if mode == "mtls" and material is not None:
        kafka |= {
            "ssl_keystore_location": str(material.client_p12()),
            "ssl_keystore_password": material.password,
        }
    return kafka


def write_client_file(path: Path, kafka: dict[str, str]) -> Path:
    """Writes `[kafka]` TOML to `path`, readable by its owner only (mode 0600)."""
    lines = ["# written by codec-kafka start: pass it with --config", "[kafka]"]
    lines += [f"{key} = {_toml_string(value)}" for key, value in kafka.items()]
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def new_password() -> str:
    """A SCRAM user's password: random, URL-safe."""
    return secrets.token_urlsafe(18)


def add_scram_user(
    internal: str, user: str, password: str, timeout: float = 30.0
) -> None:
    """Creates (or resets) a SCRAM-SHA-512 user through the broker's admin API.

    Args:
        internal: The broker's internal plaintext listener, `127.0.0.1:PORT`.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from localkafka.topics import admin_client

    admin = admin_client(internal)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    try:
        admin.alter_user_scram_credentials([upsert])[user].result(timeout=timeout)
    except KafkaException as exc:
        raise LocalKafkaError(f"cannot create the SCRAM user {user!r}: {exc}") from None
