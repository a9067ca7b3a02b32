"""PREDICT: next window's request rate from the past windows, one strategy per module.

``protocol.Predictor`` is the interface; ``constant`` (last value), ``arima`` (statsmodels
ARIMA(1,1,1), constant until enough history), ``kalman`` (local linear trend). ``make`` builds one
by name (Dynamo's ``load_predictor``).
"""

from __future__ import annotations

from servecert.reference_impl.planner.predictors.protocol import Predictor


def make(name: str) -> Predictor:
    if name == "constant":
        from servecert.reference_impl.planner.predictors.constant import ConstantPredictor

        return ConstantPredictor()
    if name == "arima":
        from servecert.reference_impl.planner.predictors.arima import ArimaPredictor

        return ArimaPredictor()
    if name == "kalman":
        from servecert.reference_impl.planner.predictors.kalman import KalmanPredictor

        return KalmanPredictor()
    raise ValueError(f"unknown load predictor {name!r}: use constant, arima or kalman")
