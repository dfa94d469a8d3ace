"""One local broker with a listener of every kind the client settings must tell apart.

`codec-kafka start --security MODE` gives one client listener; the session's secured
brokers (tests/integration/conftest.py) are SASL_SSL with SCRAM-SHA-512 and mutual TLS.
`ManyListeners` is one JVM whose listeners are the other kinds a team's cluster may
have, each with a client settings file beside it:

| name | protocol | who is let in |
| --- | --- | --- |
| `plaintext` | PLAINTEXT | anyone (also the broker's own traffic) |
| `scram` | SASL_PLAINTEXT | SCRAM-SHA-512 user `codec-ab` |
| `ssl` | SSL | anyone trusting the throw-away CA |
| `mtls` | SSL | a client certificate signed by the CA (PKCS12 keystore, or PEM files with an encrypted key) |
| `plain` | SASL_SSL | SASL PLAIN user `alice` |

Everything is on 127.0.0.1, made in the data dir with the JDK's keytool and openssl.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Final

from localkafka import LocalKafka, security as sec
from service.lifecycle.child_processes import free_ports

PLAIN_USER: Final = "alice"
NAMES: Final = ("plaintext", "scram", "ssl", "mtls", "plain")
_PROTOCOLS: Final = {
    "scram": "SASL_PLAINTEXT",
    "ssl": "SSL",
    "mtls": "SSL",
    "plain": "SASL_SSL",
}
KEY_PASSWORD: Final = "pem-key-pass"  # noqa: S105  # a throw-away test key's
"""The password of the mTLS client's PEM key (`pem_client`)."""


class ManyListeners:
    """The broker (a `LocalKafka` with more listeners), started on `__enter__`.

    Attributes:
        address: Each listener's `127.0.0.1:PORT`, by name.
        settings: Each listener's `[kafka]` client settings (the right ones).
        files: Each listener's settings as a TOML file (mode 0600).
    """

    def __init__(self, data_dir: Path, heap: str = "384m") -> None:
        self.data_dir = data_dir
        self._heap = heap
        self.address: dict[str, str] = {}
        self.settings: dict[str, dict[str, str]] = {}
        self.files: dict[str, Path] = {}
        self.material: sec.Material | None = None
        self._kafka: LocalKafka | None = None

    def __enter__(self) -> ManyListeners:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        material = sec.make_material(self.data_dir / "tls", client=True)
        self.material = material
        ports = dict(zip([*NAMES, "controller"], free_ports(6), strict=True))
        host = sec.HOST
        self.address = {name: f"{host}:{ports[name]}" for name in NAMES}
        self._plain_password = sec.new_password()
        overrides = self._properties(ports, material)
        self._kafka = LocalKafka(
            self.data_dir / "broker",
            ports["plaintext"],
            heap=self._heap,
            overrides=overrides,
        )
        self._kafka.start()
        scram_password = sec.new_password()
        sec.add_scram_user(self.address["plaintext"], sec.USER, scram_password)
        self._clients(material, scram_password)
        return self

    def _properties(
        self, ports: dict[str, int], material: sec.Material
    ) -> dict[str, str]:
        host = sec.HOST
        listeners = [f"{n.upper()}://{host}:{ports[n]}" for n in NAMES]
        protocol_map = [f"{n.upper()}:{p}" for n, p in _PROTOCOLS.items()]
        props = {
            "controller.quorum.voters": f"1@{host}:{ports['controller']}",
            "listeners": ",".join(
                [*listeners, f"CONTROLLER://{host}:{ports['controller']}"]
            ),
            "advertised.listeners": ",".join(listeners),
            "listener.security.protocol.map": ",".join(
                ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT", *protocol_map]
            ),
            **sec.listener_properties("sasl_plaintext", material, "scram"),
            **sec.listener_properties("ssl", material, "ssl"),
            **sec.listener_properties("mtls", material, "mtls"),
            **sec.listener_properties("ssl", material, "plain"),
            "listener.name.plain.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.plain.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{PLAIN_USER}="{self._plain_password}";'
            ),
        }
        return props

    def _clients(self, material: sec.Material, scram_password: str) -> None:
        ca = str(material.ca_pem)
        settings: dict[str, dict[str, str]] = {
            "plaintext": {},
            "scram": {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": sec.USER,
                "sasl_password": scram_password,
            },
            "ssl": {"security_protocol": "SSL", "ssl_ca_location": ca},
            "mtls": {
                "security_protocol": "SSL",
                "ssl_ca_location": ca,
                "ssl_keystore_location": str(material.client_p12()),
                "ssl_keystore_password": material.password,
            },
            "plain": {
                "security_protocol": "SASL_SSL",
                "ssl_ca_location": ca,
                "sasl_mechanism": "PLAIN",
                "sasl_username": PLAIN_USER,
                "sasl_password": self._plain_password,
            },
        }
        for name, kafka in settings.items():
            kafka = {"bootstrap_servers": self.address[name], **kafka}
            self.settings[name] = kafka
            self.files[name] = sec.write_client_file(
                self.data_dir / f"{name}.toml", kafka
            )

    def pem_client(self, password: str = KEY_PASSWORD) -> dict[str, str]:
        """The mTLS client as PEM files, its key encrypted with `password`: the
        `[kafka]` settings without the key password."""
        assert self.material is not None
        store, env = self.material.client_p12(), {**os.environ}
        env |= {"IN_PASS": self.material.password, "OUT_PASS": password}
        cert, key = self.data_dir / "client.pem", self.data_dir / "client.key"
        common = ["openssl", "pkcs12", "-in", str(store), "-passin", "env:IN_PASS"]
        for args in (
            ["-clcerts", "-nokeys", "-out", str(cert)],
            ["-nocerts", "-out", str(key), "-passout", "env:OUT_PASS"],
        ):
            subprocess.run([*common, *args], check=True, env=env, capture_output=True)
        return {
            "bootstrap_servers": self.address["mtls"],
            "security_protocol": "SSL",
            "ssl_ca_location": str(self.material.ca_pem),
            "ssl_certificate_location": str(cert),
            "ssl_key_location": str(key),
        }

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._kafka is not None:
            self._kafka.stop()
