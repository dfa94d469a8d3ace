"""Fuzzing of the codecs' decode paths: the contract a poison message relies on.

A payload off Kafka is untrusted bytes. The worker's hot loop calls a codec's
`decode_unchecked` and maps whatever it raises to a `DecodeError` with
`as_decode_error` (the message is dead-lettered); `decode` is the safe entry point
that raises only `DecodeError`. Any other outcome (another exception escaping, a
`MemoryError`, a hang, a crash of a C extension) stops the worker on one message,
and a restarted worker meets the same message again.

- `contract`: the check of one input against that contract, shared by both runners.
- `inputs`: the profiles (schemas) fuzzed, valid seed payloads, hostile structures.
- `harness`: one codec under atheris (libFuzzer), run as a child process.
- `__main__`: `python -m tests.fuzz` (`make fuzz`), a coverage-guided run per codec.

The quick, deterministic property tests live in `tests/unit/test_codec_fuzz.py`.
"""
