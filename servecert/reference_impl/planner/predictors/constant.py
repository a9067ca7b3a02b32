"""The constant predictor: the next window looks like the last one (Dynamo's ``constant``)."""

from __future__ import annotations


class ConstantPredictor:
    def __init__(self) -> None:
        self.last = 0.0

    def add(self, value: float) -> None:
        self.last = value

    def predict(self) -> float:
        return max(0.0, self.last)
