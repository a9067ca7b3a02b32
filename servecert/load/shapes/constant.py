"""A constant load: the same level for the whole run (steady-state and rollout scenarios)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Constant:
    duration_s: float
    fraction: float = 1.0

    def level(self, t: float) -> float:
        return self.fraction
