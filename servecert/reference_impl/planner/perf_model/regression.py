"""Online linear regression of iteration time on load, from live forward-pass metrics.

Prefill: ``sum_prefill_tokens -> iteration_ms``; decode: ``sum_decode_kv_tokens -> iteration_ms``
(Dynamo's 1-D regression models). The newest ``max_samples`` points per component are kept;
the fit (``numpy.polyfit`` degree 1) is redone lazily after new points. A model is ready with
``min_observations`` points (Dynamo's ``load_min_observations``); until then the planner holds.
Steady traffic often gives every iteration the same load (one request per prefill batch, or a
full chunk under saturation): with a single distinct load the model is proportional through the
origin (time per token), which overestimates the cost of smaller batches — the safe side for a
planner. A negative slope (noise at a narrow load range) is clamped to 0 so the model never
predicts that more work is faster.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class _Line:
    def __init__(self, max_samples: int, min_observations: int) -> None:
        self.points: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self.min_observations = min_observations
        self._fit: tuple[float, float] | None = None

    def add(self, x: float, y: float) -> None:
        self.points.append((x, y))
        self._fit = None

    def ready(self) -> bool:
        return len(self.points) >= self.min_observations

    def coefficients(self) -> tuple[float, float]:
        if self._fit is None:
            xs = np.array([p[0] for p in self.points])
            ys = np.array([p[1] for p in self.points])
            if len(set(xs.tolist())) < 2:
                self._fit = (float(ys.mean() / xs.mean()), 0.0)
                return self._fit
            slope, intercept = np.polyfit(xs, ys, 1)
            slope = max(0.0, float(slope))
            if slope == 0.0:
                intercept = float(ys.mean())
            self._fit = (slope, max(0.0, float(intercept)))
        return self._fit

    def predict(self, x: float) -> float:
        slope, intercept = self.coefficients()
        return max(0.0, intercept + slope * x)


class RegressionPerfModel:
    def __init__(self, max_samples: int = 256, min_observations: int = 5) -> None:
        self.prefill = _Line(max_samples, min_observations)
        self.decode = _Line(max_samples, min_observations)

    def observe_prefill(self, tokens: int, iteration_ms: float) -> None:
        if tokens > 0 and iteration_ms > 0:
            self.prefill.add(float(tokens), iteration_ms)

    def observe_decode(self, kv_tokens: int, iteration_ms: float) -> None:
        if kv_tokens > 0 and iteration_ms > 0:
            self.decode.add(float(kv_tokens), iteration_ms)

    def prefill_ready(self) -> bool:
        return self.prefill.ready()

    def decode_ready(self) -> bool:
        return self.decode.ready()

    def prefill_ms(self, tokens: float) -> float:
        return 0.0 if tokens <= 0 else self.prefill.predict(tokens)

    def decode_ms(self, kv_tokens: float) -> float:
        return self.decode.predict(kv_tokens)
