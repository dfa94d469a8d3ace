"""A team's own schema: read into a shape, then into every form a codec needs.

| module | holds |
| --- | --- |
| `loader` | `load_schema("MODULE:NAME" | "FILE.proto:Message")` to a `UserSchema` |
| `model/` | a pydantic model read from its core schema, as pydantic reads and writes it |
| `msgspec_reader`, `proto_reader` | a Struct or a `.proto` message read into a shape |
| `type_hints` | a Struct's annotations read into kinds and bounds |
| `foreign_types` | the types with no shape kind (addresses, URLs, `Any`): samples and text |
| `skipped_checks` | which codec skips which check the user's own form makes |
| `validators` | which codec does not run which validator or computed field of the model |
| `catalogue` | the usual types against every codec's rules: docs/types.md, generated |
| `synthetic`, `regex_strings` | seeded synthetic payloads for any shape |

May import `schemas.errors`, `schemas.shape`, `schemas.compare`, `schemas.derive` and
`schemas.prototext`.
"""
