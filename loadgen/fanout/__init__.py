"""One load generator, several topics: the same messages at the same instants on each.

`codec-ab`'s paired mode runs every codec's worker at once, each on a topic of its
own in its codec's wire format; for their figures to compare window by window,
every topic must carry the same payloads at the same intended times. So one
`ProducerLoop` (the usual pacing, schedule and stamps) runs with a sender that
writes each seq to every topic in turn: the pool encoded with each topic's codec
(same seed and size: the same payloads), the same `x-seq`, `x-sent-ns` and
`x-run-id` everywhere, the topic's own `content-type`.

    python -m loadgen.fanout --also TOPIC=CODEC [--also ...] <codec-loadgen flags>

`--topic`/`--codec` name the first topic. Synthetic payloads and one producer
process only (a replay, `--encode-live` or `--processes` are refused, exit 2).
Prints one JSON line `{"wire_bytes": {topic: bytes per message}}`, then the
usual `--json` summary, whose `sent` and `acked` count messages per topic (every
topic got each message; `failed` counts failed deliveries on any topic).
"""
