"""Shadow decoding: a second codec checks a sample of live messages, off the hot path.

| module | holds |
| --- | --- |
| `sampler` | the sample, the shadow's thread, `worker_shadow_total` and the samples topic |
| `verdict` | both codecs' verdicts on one message, compared field by field |

May import `service.kafka`, `service.telemetry`, `schemas` and `codec`.
"""
