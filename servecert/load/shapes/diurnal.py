"""A diurnal (sine) load between ``low`` and ``high`` with period ``period_s``, starting at the trough."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Diurnal:
    duration_s: float
    period_s: float
    low: float = 0.25
    high: float = 1.0

    def level(self, t: float) -> float:
        return self.low + (self.high - self.low) * (1 - math.cos(2 * math.pi * t / self.period_s)) / 2
