"""The local schema registry: Apicurio Registry, resolved by Maven and run as a JVM.

Parts, in import order: `distribution` (the pinned version, Maven, the unpacked
archive) < `server` (``LocalRegistry``: start, readiness, stop) < `commands`
(``codec-kafka registry resolve|start|stop``). May import `localkafka`'s process
helpers, `service` and `schemas`.
"""

from localkafka.registry.distribution import registry_version, resolve_registry
from localkafka.registry.server import CCOMPAT_PATH, LocalRegistry

__all__ = ["CCOMPAT_PATH", "LocalRegistry", "registry_version", "resolve_registry"]
