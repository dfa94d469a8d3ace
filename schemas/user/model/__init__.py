"""A pydantic model read as pydantic reads and writes it.

| module | holds |
| --- | --- |
| `reader` | `read_model`: the models of a tree, from their core schema, into a shape |
| `core_types` | a core schema's type nodes into shapes |
| `core_nodes` | whose function a node runs, how the team's code is named |

May import `schemas.errors`, `schemas.shape`, `schemas.formats`, `schemas.unions` and
`schemas.user`'s modules that do not import it.
"""
