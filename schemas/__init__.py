"""Message schemas: what a message is, in every form a codec takes.

The base every other package stands on (`schemas` <- `codec` <- `service`, `loadgen`
<- `abrunner`); it imports none of them.

| module | holds |
| --- | --- |
| `messages.proto`, `pb/` | the built-in schemas' source of truth and its generated module (`make proto`) |
| `models`, `pydantic_models` | the built-ins' msgspec Structs and pydantic models, kept in step by tests |
| `registry` | `SCHEMAS`: every built-in schema's forms, and `resolve_schema` for a user's |
| `loader` | a user's schema (`MODULE:NAME` or `FILE.proto:Message`) as a `UserSchema` |
| `shape` | the format-neutral shape model every derivation goes through |
| `from_pydantic`, `from_msgspec`, `from_proto`, `proto_parse`, `proto_tokens`, `annotations` | reading a schema into a shape |
| `to_msgspec`, `to_pydantic`, `to_proto` | deriving each form from a shape |
| `compare`, `synth` | field-by-field comparison of decoded objects; seeded synthetic payloads |
| `errors` | the project's one exception tree |

This module imports nothing, so `schemas.errors` is cheap to reach from any tool.
"""
