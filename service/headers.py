"""The message headers of DESIGN.md, named once for every part of the project.

| header | meaning |
| --- | --- |
| `content-type` | the wire format: `application/json`, `application/vnd.msgpack`, `application/x-protobuf` |
| `x-seq` | the message's sequence number within its run (no-loss checks) |
| `x-sent-ns` | the intended send time, ns since the epoch (latency without coordinated omission) |
| `x-run-id` | the load-generation run the message belongs to |

Dead letters carry the original headers plus `x-dlq-*` context (`service.delivery`).
"""

from __future__ import annotations

from typing import Final

CONTENT_TYPE: Final = "content-type"
SEQ: Final = "x-seq"
SENT_NS: Final = "x-sent-ns"
RUN_ID: Final = "x-run-id"
DLQ_PREFIX: Final = "x-dlq-"

STAMPED: Final = frozenset({CONTENT_TYPE, SEQ, SENT_NS, RUN_ID})
"""The headers the load generator writes itself (a replay stamps them anew)."""
