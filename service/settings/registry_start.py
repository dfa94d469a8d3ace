"""The schema registry at a tool's start: reached once, and a writer's schema id.

Every tool that frames values (`--framing confluent`) calls `reach` before it
consumes or produces anything: one request with the configured URL, credentials and
CA (`codec.registry.access_check`), so a wrong password, a CA file that cannot be
read or does not vouch for the registry's certificate, or a registry that does not
answer ends the tool with one line naming the setting (the caller's error type:
exit status 1) instead of dead-lettering a topic. A tool that writes framed values
then gets the id of its schema (`register_writer`: looked up under its subject,
registered if it is not there) and writes with it.
"""

from __future__ import annotations

from typing import Any

import structlog

from codec.registry.access_check import RegistryAccessError, check_registry
from codec.registry.client import RegistryUnavailable
from schemas.errors import FatalError
from service.settings.registry import RegistryConnection
from service.settings.worker import Settings

log = structlog.get_logger(__name__)


def reach(registry: RegistryConnection, refused: type[Exception]) -> None:
    """Reach the registry once; raise ``refused`` (the one line) if it cannot be used.

    Raises:
        Exception: ``refused``, naming the registry, the cause and the setting.
    """
    try:
        check_registry(registry.access())
    except RegistryAccessError as exc:
        raise refused(str(exc)) from None


def register_writer(
    registry: RegistryConnection, writer: Any, topic: str, refused: type[Exception]
) -> tuple[str, int]:
    """Give the framed codec ``writer`` the id of its schema for ``topic``.

    Returns:
        The subject and the id.

    Raises:
        Exception: ``refused``: the registry could not be used, or refused the
            schema (incompatible with the subject's, or the key may not register).
    """
    subject = registry.subject(topic, writer.record_name())
    try:
        return subject, int(writer.register(subject))
    except (RegistryUnavailable, ValueError) as exc:
        raise refused(
            f"schema registry at {registry.url}: cannot write {topic!r} framed: "
            f"registering its schema under subject {subject!r} failed: {exc}"
        ) from None


def output_writer(codec: Any) -> Any:
    """The framed codec a worker writes its output with, or None: the codec itself
    if framed (`FramedCodec`), a framed `auto`'s output codec."""
    from codec.registry.framed import FramedCodec

    if isinstance(codec, FramedCodec):
        return codec
    return getattr(codec, "writer", None)


def prepare_worker(settings: Settings, codec: Any) -> None:
    """The worker's start with `--framing confluent`: the registry reached, and the
    output's schema registered (or looked up) so that its values are framed.

    Raises:
        FatalError: the one line (exit status 1).
    """
    if settings.codec.framing == "none":
        return
    reach(settings.registry, FatalError)
    topic, writer = settings.processing.output_topic, output_writer(codec)
    if topic is not None and writer is not None:
        subject, schema_id = register_writer(
            settings.registry, writer, topic, FatalError
        )
        log.info("output_schema", topic=topic, subject=subject, schema_id=schema_id)
