"""Fault injection for a fake engine: errors, crashes, stalls, slow start, streams cut short.

Every decision is drawn from a seeded generator, so a test that injects a 10 % error rate sees
the same requests fail on every run. Faults can be set at start-up and changed at run time
(``POST /admin/faults``), which lets a test break one engine in the middle of a scenario.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Faults:
    error_rate: float = 0.0  # fraction of accepted requests answered with an injected 500
    crash_after: int = 0  # crash the engine when this many requests have been accepted (0 = never)
    stall_after: int = 0  # freeze the scheduler once this many requests were accepted (0 = never)
    stall_seconds: float = 0.0  # how long a stall lasts, in real seconds
    startup_seconds: float = 0.0  # model-load time before /health answers 200, in real seconds
    kill_stream_after: int = 0  # cut every stream after this many tokens, without [DONE] (0 = never)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError("error_rate must be within [0, 1]")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "seed" and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{f.name} must be a finite number >= 0, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def updated(self, changes: dict[str, Any]) -> Faults:
        known = {f.name: f.type for f in fields(self)}
        unknown = sorted(set(changes) - set(known))
        if unknown:
            raise ValueError(f"unknown fault fields {unknown}; known: {sorted(known)}")
        cast: dict[str, Any] = {k: (float(v) if isinstance(getattr(self, k), float) else int(v)) for k, v in changes.items()}
        return replace(self, **cast)


class FaultState:
    """Counts accepted requests and draws the injected faults for each."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.accepted = 0
        self.stalled = False
        self._rng = random.Random(faults.seed)

    def set(self, faults: Faults) -> None:
        self.faults = faults
        self._rng = random.Random(faults.seed)

    def on_accept(self) -> tuple[bool, bool, bool]:
        """Count a request; returns (fail it, crash now, stall now)."""
        self.accepted += 1
        f = self.faults
        fail = f.error_rate > 0 and self._rng.random() < f.error_rate
        crash = f.crash_after > 0 and self.accepted >= f.crash_after
        stall = f.stall_after > 0 and not self.stalled and self.accepted >= f.stall_after
        if stall:
            self.stalled = True
        return fail, crash, stall
