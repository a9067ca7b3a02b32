"""Warm-starting a predictor from a trace file (seed 003: "All predictors support warm-starting from trace files").

ARIMA and Kalman need several throughput windows of history before they forecast well, and a new
planner has none; a trace of past arrivals gives it that history. The trace is Mooncake JSONL
(``{"timestamp": ms, ...}`` per request, the format ``servecert/load/traces`` replays); ``rates`` bins its
arrivals, from the trace's time 0, into windows of the planner's throughput interval (simulated
seconds) and returns each window's requests per second, oldest first, for ``Planner`` to ``add``
before its first tick.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from servecert.reference_impl.planner.config import PlannerConfigError


class WarmupTraceError(PlannerConfigError):
    """A warm-up trace that cannot be read; the message names the file, the line and the expected form."""


def rates(path: Path, interval_s: float) -> list[float]:
    """Requests per second in each ``interval_s`` window of the trace, from its time 0 to its last arrival."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise WarmupTraceError(f"cannot read the warm-up trace {path}: {exc.strerror}; give a Mooncake JSONL file") from None
    stamps: list[float] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            stamps.append(float(json.loads(line)["timestamp"]) / 1000.0)
        except (ValueError, KeyError, TypeError):
            raise WarmupTraceError(
                f"{path}:{n}: not a Mooncake trace line; expected JSON with a 'timestamp' in milliseconds, got {line[:80]!r}"
            ) from None
    if not stamps:
        return []
    counts = [0] * (math.floor(max(stamps) / interval_s) + 1)
    for t in stamps:
        counts[math.floor(max(0.0, t) / interval_s)] += 1
    return [c / interval_s for c in counts]
