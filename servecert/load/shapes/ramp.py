"""A piecewise-linear ramp through ``(second, level)`` points, flat after the last one."""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Ramp:
    duration_s: float
    points: tuple[tuple[float, float], ...]  # (second, level), by second; at least one

    def level(self, t: float) -> float:
        pts = self.points
        if t <= pts[0][0]:
            return pts[0][1]
        for (t0, v0), (t1, v1) in itertools.pairwise(pts):
            if t0 <= t < t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]
