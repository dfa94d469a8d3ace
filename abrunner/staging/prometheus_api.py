"""A minimal client of the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`).

Used by `codec-ab staging` (`abrunner.staging.slices`). Standard library only: the answers
are small JSON documents. Two kinds of failure, kept apart because they exit
differently: `Unreachable` (no answer, a non-Prometheus answer: a runtime problem,
exit 1) and `BadQuery` (Prometheus refused the expression, e.g. a selector that is
not PromQL: bad input, exit 2).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

TIMEOUT_S: Final = 30.0
"""One request's timeout: a range query over hours of data may take seconds."""


class PrometheusError(Exception):
    """A Prometheus request failed; the message is one line."""


class Unreachable(PrometheusError):
    """No usable answer: connection refused, timed out, not a Prometheus API."""


class BadQuery(PrometheusError):
    """Prometheus refused the expression (HTTP 400/422, `bad_data`)."""


Series = dict[float, float]
"""One series of a range query: evaluation time -> value (NaN left out)."""


@dataclass(frozen=True)
class Client:
    """The Prometheus server at `url` (e.g. `http://127.0.0.1:9090`)."""

    url: str
    timeout: float = TIMEOUT_S

    def _get(self, path: str, params: dict[str, str]) -> Any:
        base = self.url.rstrip("/")
        url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as answer:  # noqa: S310 (the user's Prometheus URL)
                body = answer.read()
        except urllib.error.HTTPError as exc:
            body = exc.read() or b""
            exc.close()
            if exc.code in (400, 422):
                raise BadQuery(_error(body) or f"HTTP {exc.code}") from None
            raise Unreachable(f"{self.url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise Unreachable(f"{self.url}: {reason}") from None
        try:
            data = json.loads(body)
        except ValueError:
            raise Unreachable(f"{self.url}: not a Prometheus API answer") from None
        if not isinstance(data, dict) or data.get("status") != "success":
            error = data.get("error") if isinstance(data, dict) else None
            raise Unreachable(f"{self.url}: {error or 'not a Prometheus API answer'}")
        return data.get("data")

    def query(self, expr: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant query at unix time `at`: (labels, value) per sample."""
        data = self._get("query", {"query": expr, "time": _ts(at)})
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise Unreachable(f"{self.url}: expected a vector for {expr}")
        return [
            (s["metric"], float(s["value"][1]))
            for s in data["result"]
            if math.isfinite(float(s["value"][1]))
        ]

    def samples(
        self, expr: str, at: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """An instant query of a range selector (`worker_messages_total{..}[300s]`)
        at unix time `at`: each series' raw samples, (time, value) in time order."""
        data = self._get("query", {"query": expr, "time": _ts(at)})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise Unreachable(f"{self.url}: expected a matrix for {expr}")
        return [
            (s["metric"], [(float(t), float(v)) for t, v in s["values"]])
            for s in data["result"]
        ]

    def series(self, match: str) -> list[dict[str, str]]:
        """The label sets of every series `match` selects, over all stored time."""
        data = self._get("series", {"match[]": match})
        if not isinstance(data, list):
            raise Unreachable(f"{self.url}: expected a series list for {match}")
        return [dict(labels) for labels in data]

    def query_range(
        self, expr: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], Series]]:
        """A range query: (labels, time -> value) per series; NaN values dropped."""
        data = self._get(
            "query_range",
            {"query": expr, "start": _ts(start), "end": _ts(end), "step": _ts(step)},
        )
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise Unreachable(f"{self.url}: expected a matrix for {expr}")
        found = []
        for s in data["result"]:
            values = {
                float(t): float(v) for t, v in s["values"] if not math.isnan(float(v))
            }
            found.append((s["metric"], values))
        return found


def _ts(value: float) -> str:
    return f"{value:.3f}"


def _error(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return str(data.get("error")) if isinstance(data, dict) else None
