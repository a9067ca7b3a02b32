"""The interface of a perf model: iteration time of a prefill batch and of a decode step.

The estimators need only the costs (``PrefillCost``, ``DecodeCost``), so an aggregated engine's
model can stand in through its views (``perf_model/aggregated.py``).
"""

from __future__ import annotations

from typing import Protocol


class PrefillCost(Protocol):
    def prefill_ms(self, tokens: float) -> float:
        """Predicted time of one prefill iteration of ``tokens`` new tokens (0 -> 0)."""
        ...


class DecodeCost(Protocol):
    def decode_ms(self, kv_tokens: float) -> float:
        """Predicted time of one decode step with ``kv_tokens`` active KV tokens."""
        ...


class PerfModel(PrefillCost, DecodeCost, Protocol):
    def observe_prefill(self, tokens: int, iteration_ms: float) -> None:
        """One prefill iteration of ``tokens`` new tokens took ``iteration_ms`` (simulated)."""
        ...

    def observe_decode(self, kv_tokens: int, iteration_ms: float) -> None:
        """One decode step over ``kv_tokens`` active KV tokens took ``iteration_ms``."""
        ...

    def prefill_ready(self) -> bool: ...

    def decode_ready(self) -> bool: ...
