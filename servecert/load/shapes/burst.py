"""A burst: ``base`` level with one rectangular burst to ``peak`` from ``start`` for ``length`` seconds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Burst:
    duration_s: float
    base: float
    start: float
    length: float
    peak: float = 1.0

    def level(self, t: float) -> float:
        return self.peak if self.start <= t < self.start + self.length else self.base
