"""Steps: the level jumps at given times (``((0, 0.25), (60, 1.0), (180, 0.25))`` is a x4 step up and back)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    duration_s: float
    steps: tuple[tuple[float, float], ...]  # (start second, level), by start

    def level(self, t: float) -> float:
        current = 0.0
        for start, value in self.steps:
            if t >= start:
                current = value
        return current

    def changes(self) -> list[tuple[float, float, float]]:
        """(time, level before, level after) of every step."""
        out, before = [], 0.0
        for start, value in self.steps:
            if value != before and start > 0:
                out.append((start, before, value))
            before = value
        return out
