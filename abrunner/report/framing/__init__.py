"""The report's framed cases (`codec-ab --framing confluent`).

| module | holds |
| --- | --- |
| `twins` | each framed case beside its unframed twin on Kafka, and, in process on the same framed messages, beside confluent-kafka's deserializer |

May import `abrunner.plan`, `abrunner.results`, `abrunner.peer_figures` and the packages below `abrunner`,
as the rest of `abrunner.report`.
"""

from __future__ import annotations

from abrunner.report.framing.twins import section

__all__ = ["section"]
