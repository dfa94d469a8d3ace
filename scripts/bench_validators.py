"""Decode cost of `--run-validators`: a user's model's Struct with and without its
after validators, interleaved in one process (the machine's noise hits both).

    cd tests/fixtures/usermodels
    PYTHONPATH=.:../../.. ../../../.venv/bin/python ../../../scripts/bench_validators.py \\
        tracking:ShipmentEvent

Prints, per msgspec codec, the best of 40 rounds of decoding 1,000 synthetic
messages, in us per message (`time.thread_time_ns`), with and without.
"""

from __future__ import annotations

import sys
import time

from codec import get_codec
from schemas.registry import resolve
from schemas.user.synthetic import make_payloads


def main(spec: str, rounds: int = 40) -> None:
    """Print the decode figures of `spec` with and without its validators."""
    plain, run = resolve(spec), resolve(spec, run_validators=True)
    for name in ("msgspec-json", "msgspec-msgpack"):
        off, on = get_codec(name, plain), get_codec(name, run)
        wire = [
            off.encode(off.from_builtins(p)) for p in make_payloads(plain.shape, 1000)
        ]
        best = {"off": float("inf"), "on": float("inf")}
        for _ in range(rounds):
            for key, codec in (("off", off), ("on", on)):
                start = time.thread_time_ns()
                for value in wire:
                    codec.decode(value)
                us = (time.thread_time_ns() - start) / len(wire) / 1e3
                best[key] = min(best[key], us)
        print(
            f"{name}: decode us/msg without {best['off']:.2f}, with "
            f"{best['on']:.2f}: +{best['on'] - best['off']:.2f} us "
            f"({best['on'] / best['off']:.2f}x)"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tracking:ShipmentEvent")
