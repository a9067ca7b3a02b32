"""Load shapes as data: each is a frozen dataclass with ``duration_s`` and ``level(t)`` in [0, 1].

A level is a fraction of the peak: of the peak user count for locust (``tick``), of the peak
request rate for the suite's open-loop generator (``arrival_times``). One shape per module:
``constant``, ``step``, ``ramp``, ``burst``, ``diurnal``; ``trace`` replays a Mooncake JSONL
trace, whose arrivals are its own timestamps rather than a level.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Protocol


class Shape(Protocol):
    @property
    def duration_s(self) -> float: ...

    def level(self, t: float) -> float:
        """Fraction of the peak at ``t`` seconds after the start (0 <= level <= 1)."""
        ...


def tick(shape: Shape, run_time: float, peak_users: int, spawn_rate: float) -> tuple[int, float] | None:
    """locust ``LoadTestShape.tick``: the user count now, or None when the shape is over."""
    if run_time >= shape.duration_s:
        return None
    users = max(1, round(shape.level(run_time) * peak_users))
    return users, spawn_rate


def arrival_times(shape: Shape, peak_rps: float, dt: float = 0.005) -> Iterator[float]:
    """Evenly paced arrivals whose rate follows the shape: one each time the integral of
    ``level(t) * peak_rps`` crosses the next whole number (deterministic, no Poisson noise)."""
    owed = 0.5  # NB: the first arrival after half a request's worth, so a constant rate starts at once
    steps = math.ceil(shape.duration_s / dt)
    for i in range(steps):
        t = i * dt
        owed += shape.level(t) * peak_rps * dt
        while owed >= 1.0:
            owed -= 1.0
            yield t
