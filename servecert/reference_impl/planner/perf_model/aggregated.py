"""Aggregated engines' perf model: one 2-D regression of iteration time on prefill tokens and decode KV.

In aggregated mode (seed 003, ``--mode agg``) an engine runs chunked prefill with the running
sequences' decode step piggybacked on the same iteration, so neither 1-D model fits. An
iteration's time is modelled as

    ms = a * [it prefills] + b * [it decodes] + c * prefill_tokens + d * decode_kv_tokens

a fixed cost per phase plus a cost per token. Training rows are one engine's averages over one
load interval, not single iterations (seed 003: "uses per-worker time-averaged metrics (not
instantaneous) for regression training to smooth out chunked prefill noise"). The model is linear,
so the mean of an interval's iterations is the model of the mean features:
``mean ms = a * share_prefilling + b * share_decoding + c * mean P + d * mean D``. The fit is least
squares with every coefficient kept >= 0 (a column whose coefficient comes out negative is
dropped and the rest refitted: more work is never predicted to be faster), redone lazily after
new rows; the model is ready after ``min_observations`` rows.

Two views let the disaggregated estimators price an aggregated engine unchanged
(``estimate.ttft_ms``, ``estimate.itl_ms``, ``throughput_scaling.*_capacity_rps``):
- ``PrefillView``: a prefill chunk with the engine's decode step piggybacked on it (seed 003:
  "Estimates both TTFT (simulated prefill with piggybacked decode)");
- ``DecodeView``: a decode step carrying the interval's average prefill ("and ITL (decode with
  average piggybacked prefill)").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEATURES = 4  # share of iterations prefilling, share decoding, mean prefill tokens, mean decode KV tokens
REFITS = FEATURES  # each refit drops at least one column


@dataclass(frozen=True)
class WindowRow:
    """One engine's iterations over one load interval, averaged (heartbeats excluded)."""

    prefill_share: float
    decode_share: float
    prefill_tokens: float
    decode_kv_tokens: float
    iteration_ms: float

    @classmethod
    def of(cls, iterations: Sequence[tuple[int, int, float]]) -> WindowRow | None:
        """From (prefill tokens, decode KV tokens, ms) per iteration; None without a working iteration."""
        work = [it for it in iterations if it[2] > 0]
        if not work:
            return None
        n = len(work)
        return cls(
            prefill_share=sum(p > 0 for p, _, _ in work) / n,
            decode_share=sum(d > 0 for _, d, _ in work) / n,
            prefill_tokens=sum(p for p, _, _ in work) / n,
            decode_kv_tokens=sum(d for _, d, _ in work) / n,
            iteration_ms=sum(ms for _, _, ms in work) / n,
        )

    def features(self) -> list[float]:
        return [self.prefill_share, self.decode_share, self.prefill_tokens, self.decode_kv_tokens]


class AggregatedPerfModel:
    def __init__(self, max_rows: int = 256, min_observations: int = 5) -> None:
        self.rows: deque[WindowRow] = deque(maxlen=max_rows)
        self.min_observations = min_observations
        self._coefficients: np.ndarray | None = None

    def observe(self, row: WindowRow) -> None:
        self.rows.append(row)
        self._coefficients = None

    def ready(self) -> bool:
        return len(self.rows) >= self.min_observations

    def iteration_ms(self, prefill_share: float, decode_share: float, prefill_tokens: float, decode_kv_tokens: float) -> float:
        """Predicted mean iteration time with these features (shares in [0, 1], tokens per iteration)."""
        x = np.array([prefill_share, decode_share, prefill_tokens, decode_kv_tokens])
        return max(0.0, float(x @ self.coefficients()))

    def coefficients(self) -> np.ndarray:
        if self._coefficients is None:
            self._coefficients = _fit_non_negative(
                np.array([r.features() for r in self.rows]), np.array([r.iteration_ms for r in self.rows])
            )
        return self._coefficients


def _fit_non_negative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    kept = np.ones(FEATURES, dtype=bool)
    found = np.zeros(FEATURES)
    for _ in range(REFITS):
        found = np.zeros(FEATURES)
        if not kept.any():
            break
        solution, *_ = np.linalg.lstsq(x[:, kept], y, rcond=None)
        found[kept] = solution
        if (found >= 0).all():
            break
        kept &= found > 0
    return np.clip(found, 0.0, None)


@dataclass(frozen=True)
class PrefillView:
    """The perf model as a prefill engine whose every chunk carries a decode step over ``decode_kv`` tokens."""

    model: AggregatedPerfModel
    decode_kv: float

    def prefill_ms(self, tokens: float) -> float:
        if tokens <= 0:
            return 0.0
        return self.model.iteration_ms(1.0, 1.0 if self.decode_kv > 0 else 0.0, tokens, self.decode_kv)


@dataclass(frozen=True)
class DecodeView:
    """The perf model as a decode engine whose steps carry, on average, ``prefill_tokens`` of prefill in
    ``prefill_share`` of them."""

    model: AggregatedPerfModel
    prefill_share: float
    prefill_tokens: float

    def decode_ms(self, kv_tokens: float) -> float:
        return self.model.iteration_ms(self.prefill_share, 1.0, self.prefill_tokens, kv_tokens)
