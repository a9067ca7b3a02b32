"""The interface every load predictor implements."""

from __future__ import annotations

from typing import Protocol


class Predictor(Protocol):
    def add(self, value: float) -> None:
        """Record the value observed in the window that just ended."""
        ...

    def predict(self) -> float:
        """The expected value of the next window (>= 0; 0 before any observation)."""
        ...
