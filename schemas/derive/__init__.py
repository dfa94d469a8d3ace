"""Every form a codec needs, derived from a shape.

| module | holds |
| --- | --- |
| `msgspec_structs` | msgspec Structs, with the built-in Structs' options |
| `pydantic_models` | pydantic v2 models (for a Struct or `.proto` source) |
| `proto_file` | a `.proto` file, and message classes built from any file |
| `avro_schema`, `fbs_schema`, `capnp_schema` | Avro, FlatBuffers and Cap'n Proto schemas |

May import `schemas.errors`, `schemas.shape` and `schemas.prototext`.
"""
