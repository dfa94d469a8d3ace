"""The FlatBuffers codec: flatc's generated accessors behind a verifier.

| module | holds |
| --- | --- |
| `codec` | `FlatBuffersCodec`: verify, then a lazy view; encode through the builder |
| `accessors` | flatc's Python accessors for a derived `.fbs`, generated once into a cache |
| `layout` | how each field of a derived schema is stored, read and written |
| `verifier` | every offset checked before use |

May import `codec.base`, `codec.views` and `schemas`.
"""
