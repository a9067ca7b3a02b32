"""The Kalman predictor: a local-linear-trend filter (level and slope) in numpy.

State x = [level, slope], transition F = [[1, 1], [0, 1]], observation H = [1, 0]. ``q`` is the
process noise (how fast level and trend may drift), ``r`` the measurement noise, both relative to
the observed scale. Before ``min_points`` observations it predicts the last value (Dynamo's
``kalman_min_points``).
"""

from __future__ import annotations

import numpy as np


class KalmanPredictor:
    def __init__(self, q: float = 0.05, r: float = 0.5, min_points: int = 3) -> None:
        self.q, self.r, self.min_points = q, r, min_points
        self.x = np.zeros(2)
        self.p = np.eye(2) * 1e3
        self.count = 0
        self.last = 0.0
        self._f = np.array([[1.0, 1.0], [0.0, 1.0]])
        self._h = np.array([[1.0, 0.0]])

    def add(self, value: float) -> None:
        self.last = value
        if self.count == 0:
            self.x = np.array([value, 0.0])
        else:
            scale = max(1.0, abs(value))
            x = self._f @ self.x
            p = self._f @ self.p @ self._f.T + np.eye(2) * self.q * scale
            s = float((self._h @ p @ self._h.T)[0, 0]) + self.r * scale
            k = (p @ self._h.T)[:, 0] / s
            self.x = x + k * (value - float(x[0]))
            self.p = (np.eye(2) - np.outer(k, self._h[0])) @ p
        self.count += 1

    def predict(self) -> float:
        if self.count < self.min_points:
            return max(0.0, self.last)
        return max(0.0, float((self._f @ self.x)[0]))
