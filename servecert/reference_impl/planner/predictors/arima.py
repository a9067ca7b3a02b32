"""The ARIMA predictor: statsmodels ARIMA(1,1,1) on the window history (Dynamo's default).

ARIMA needs history: until ``min_points`` windows are seen, and whenever the fit fails (flat or
degenerate series), it predicts the last value, like Dynamo's warm-up fallback. The history is
bounded to ``max_points`` windows so a fit stays cheap. statsmodels is imported on first use.
"""

from __future__ import annotations

import math
import warnings
from collections import deque


class ArimaPredictor:
    def __init__(self, order: tuple[int, int, int] = (1, 1, 1), min_points: int = 6, max_points: int = 64) -> None:
        self.order = order
        self.min_points = min_points
        self.history: deque[float] = deque(maxlen=max_points)

    def add(self, value: float) -> None:
        self.history.append(value)

    def predict(self) -> float:
        if not self.history:
            return 0.0
        last = self.history[-1]
        if len(self.history) < self.min_points or len(set(self.history)) < 3:
            return max(0.0, last)
        from statsmodels.tsa.arima.model import ARIMA

        try:
            with warnings.catch_warnings():
                # NB: short series make statsmodels warn about convergence and frequency; the fallback covers bad fits.
                warnings.simplefilter("ignore")
                fitted = ARIMA(list(self.history), order=self.order).fit()
                forecast = float(fitted.forecast(1)[0])
        except (ValueError, ArithmeticError, IndexError, RuntimeError):
            return max(0.0, last)
        return max(0.0, forecast) if math.isfinite(forecast) else max(0.0, last)
