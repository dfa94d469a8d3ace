"""Message schemas: what a message is, in every form a codec takes.

The base every other package stands on (`schemas` <- `codec` <- `service`, `loadgen`
<- `abrunner`); it imports none of them.

| part | holds |
| --- | --- |
| `errors` | the project's one exception tree |
| `int_widths` | the protobuf integer type that holds an int's bounds |
| `shape` | the format-neutral shape model every derivation goes through |
| `unions` | unions: the tag field of a union's members, their tags and names, which formats carry them |
| `formats` | which codec's format carries which shape: per-codec refusals, one line per field |
| `compare` | field-by-field comparison of decoded objects |
| `prototext` | `.proto` text parsed without protoc |
| `builtin` | the built-in schemas: `messages.proto`, its generated module, Structs and models |
| `carried` | what a codec carries by conversion ("carried as str"), one line per field |
| `derive` | every form derived from a shape: msgspec, pydantic, protobuf, Avro, FlatBuffers, Cap'n Proto |
| `user` | a team's schema (`MODULE:NAME` or `FILE.proto:Message`) read into a shape, synthetic payloads |
| `registry`, `wire_shape` | `SCHEMAS` and `resolve_schema`; the shape of any schema the codecs take |

Each part may import only those above it in this table.
This module imports nothing, so `schemas.errors` is cheap to reach from any tool.
"""
