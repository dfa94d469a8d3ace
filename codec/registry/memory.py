"""``InMemoryRegistry``: a registry client without a registry, for benchmarks.

`codec-bench --framing confluent` measures the framed decode path (header, cache,
decoder), which asks the registry once per id; an HTTP round trip would measure the
network, not the codec. Ids count up from 1; an equal schema keeps its id.
"""

from __future__ import annotations

from codec.registry.client import RegisteredSchema, SchemaNotFound


class InMemoryRegistry:
    """Registers and fetches schemas in a dict (the client's two calls)."""

    def __init__(self) -> None:
        self._schemas: dict[int | str, RegisteredSchema] = {}

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        """The schema registered under ``ref``.

        Raises:
            SchemaNotFound: none is.
        """
        try:
            return self._schemas[ref]
        except KeyError:
            raise SchemaNotFound(str(ref)) from None

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        """The id of an equal schema registered before, else None."""
        for known, schema in self._schemas.items():
            if isinstance(known, int) and schema.text == text:
                return known
        return None

    def register(self, subject: str, schema_type: str, text: str) -> int:
        """Registers ``text`` (an equal one keeps its id); returns the id."""
        if (known := self.lookup(subject, schema_type, text)) is not None:
            return known
        schema_id = len(self._schemas) + 1
        self._schemas[schema_id] = RegisteredSchema(schema_type, text)
        return schema_id
