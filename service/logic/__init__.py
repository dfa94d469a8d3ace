"""The business logic a worker runs on each decoded message.

| module | holds |
| --- | --- |
| `builtin` | the stub logics (`aggregate`, `noop`, `flaky`, `fields`) and their registry |
| `named_fields` | the `fields` logic: read only some named fields, as a real consumer does |
| `field_reader` | a user's schema's logic: read every field of a decoded object |

May import `schemas` and `codec` only: the logic reads decoded objects by attribute and
knows nothing of Kafka.
"""
