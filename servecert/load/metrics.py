"""Exact per-request samples and what is computed from them: percentiles, goodput, rates.

locust buckets response times (exact below 100 ms, then 10 ms, 100 ms, 1 s steps), too coarse for
ITL and TPOT, so every request's exact figures are kept as a ``Sample`` (JSON lines written by
the locust user, or built by the suite's generator) and summarised here with numpy.

Goodput (vLLM/AIPerf): requests per second that succeeded AND met every configured threshold —
TTFT, and ITL judged per request on its mean inter-token time (TPOT; a request of one token
meets it trivially). ``Thresholds`` are milliseconds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servecert.load.sse import CUT_AT_END

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Sample:
    start: float  # wall-clock seconds (time.time()) when the request was sent
    ok: bool
    error: str  # '' when ok, else a kind: http_503, stream_cut, stream_error, transport
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float
    output_tokens: int
    input_tokens: int = 0
    itl_ms: tuple[float, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        data = asdict(self)
        data["itl_ms"] = [round(x, 4) for x in self.itl_ms]
        return json.dumps(data)

    @classmethod
    def from_json(cls, line: str) -> Sample:
        data = json.loads(line)
        data["itl_ms"] = tuple(data.get("itl_ms") or ())
        return cls(**data)


@dataclass(frozen=True)
class Thresholds:
    ttft_ms: float | None = None
    itl_ms: float | None = None

    def met(self, s: Sample) -> bool:
        if not s.ok:
            return False
        if self.ttft_ms is not None and (s.ttft_ms is None or s.ttft_ms > self.ttft_ms):
            return False
        return self.itl_ms is None or s.tpot_ms is None or s.tpot_ms <= self.itl_ms


def read_samples(paths: Iterable[Path]) -> list[Sample]:
    out: list[Sample] = []
    for path in paths:
        out.extend(Sample.from_json(line) for line in path.read_text().splitlines() if line.strip())
    return sorted(out, key=lambda s: s.start)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values, dtype=float)
    out = {f"p{p}": float(np.percentile(arr, p)) for p in PERCENTILES}
    out["mean"], out["min"], out["max"] = float(arr.mean()), float(arr.min()), float(arr.max())
    return out


def summarise(samples: Sequence[Sample], thresholds: Thresholds) -> dict[str, Any]:
    """The JSON report's figures: counts, rates, exact percentiles, errors by kind, goodput."""
    # NB: a request the run itself cut at its end (servecert.load.runner's stop timeout) says nothing of the server
    unfinished = sum(1 for s in samples if s.error == CUT_AT_END)
    samples = [s for s in samples if s.error != CUT_AT_END]
    if not samples:
        return {"requests": 0, "unfinished_at_end": unfinished}
    ok = [s for s in samples if s.ok]
    span = max(1e-9, max(s.start + s.e2e_ms / 1000 for s in samples) - min(s.start for s in samples))
    good = [s for s in samples if thresholds.met(s)]
    return {
        "requests": len(samples),
        "succeeded": len(ok),
        "failed": len(samples) - len(ok),
        "error_rate": (len(samples) - len(ok)) / len(samples),
        "duration_s": span,
        "request_throughput": len(ok) / span,
        "output_token_throughput": sum(s.output_tokens for s in ok) / span,
        "errors": dict(Counter(s.error for s in samples if not s.ok)),
        "unfinished_at_end": unfinished,
        "ttft_ms": percentiles([s.ttft_ms for s in ok if s.ttft_ms is not None]),
        "tpot_ms": percentiles([s.tpot_ms for s in ok if s.tpot_ms is not None]),
        "itl_ms": percentiles([x for s in ok for x in s.itl_ms]),
        "e2e_ms": percentiles([s.e2e_ms for s in ok]),
        "output_tokens": percentiles([float(s.output_tokens) for s in ok]),
        "goodput": {
            "thresholds_ms": asdict(thresholds),
            "requests": len(good),
            "request_goodput": len(good) / span,
            "fraction": len(good) / len(samples),
        },
    }
