"""A payment team's own pydantic model (aliases, UUID, Decimal, ge=0 ints, patterns...)
on a real broker: `codec-schema check` passes with all six codecs, and a
msgspec-json worker on the model reads what the team's service publishes,
dead-lettering exactly the lax values its pydantic model coerces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fixtures.usermodels.payments import PaymentEvent
from tests.support import WorkerProcess, produce

SPEC = "tests.fixtures.usermodels.payments:PaymentEvent"
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

TopicFactory = Callable[..., str]


def published(n: int) -> dict[str, Any]:
    """Event `n` as the service publishes it: `model_dump(mode="json", by_alias=True)`."""
    event = PaymentEvent.model_validate(
        {
            "paymentId": str(uuid.UUID(int=n + 1)),
            "userId": n,
            "merchantId": f"m-{n % 7}",
            "status": ["authorized", "captured", "declined"][n % 3],
            "method": "card",
            "amount": {"amount": f"{n}.25", "currency": "EUR"},
            "card": {
                "brand": "visa",
                "lastFour": "4242",
                "expiryMonth": 1 + n % 12,
                "expiryYear": 2030,
            },
            "items": [
                {
                    "sku": f"sku-{n}",
                    "quantity": 1 + n % 3,
                    "unitPrice": {"amount": "9.99", "currency": "EUR"},
                }
            ],
            "metadata": {"channel": "web"},
            "createdAt": "2026-03-01T12:00:00Z",
            "retries": n % 4,
        }
    )
    return event.model_dump(mode="json", by_alias=True)


def lax(event: dict[str, Any], kind: int) -> dict[str, Any]:
    """Values the lax pydantic model accepts and strict msgspec does not."""
    if kind == 0:
        return event | {"userId": str(event["userId"])}  # a numeric string
    return event | {"retries": float(event["retries"])}  # 2.0 for an int


def test_check_passes_with_every_codec() -> None:
    done = subprocess.run(
        [str(BIN / "codec-schema"), "check", SPEC, "--count", "30"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with 9 codecs" in done.stdout and "all codecs agree" in done.stdout


def test_msgspec_json_worker_dead_letters_exactly_the_lax_messages(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    records = []
    lax_count = 0
    for n in range(40):
        event = published(n)
        PaymentEvent.model_validate_json(json.dumps(event))  # the team's own check
        if n % 5 == 0:
            event = lax(event, n % 2)
            lax_count += 1
        elif n % 5 == 1:
            event |= {"somethingNew": "a field a newer producer adds"}
        PaymentEvent.model_validate_json(json.dumps(event))  # still valid for pydantic
        records.append({"key": str(n).encode(), "value": json.dumps(event).encode()})
    produce(kafka_bootstrap, topic, records)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ("--codec", "msgspec-json", "--schema", SPEC, "--create-topics")
    with WorkerProcess(kafka_bootstrap, topic, *args, env=env) as worker:
        worker.wait_for(40 - lax_count, timeout=90)
        worker.wait_for(lax_count, outcome="decode_error", timeout=30)
        metrics = worker.metrics()
    ok = 'worker_messages_total{codec="msgspec-json",outcome="ok"}'
    bad = 'worker_messages_total{codec="msgspec-json",outcome="decode_error"}'
    assert metrics[ok] == 40 - lax_count  # unknown fields ignored, as pydantic does
    assert metrics[bad] == lax_count == 8
    dead = 'worker_dead_letters_total{codec="msgspec-json",reason="decode"}'
    assert metrics[dead] == lax_count
