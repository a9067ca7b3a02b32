"""A perf model from a pre-deployment profile table (Dynamo's profiler NPZ/JSON, our table format).

The file is the fake engines' timing table: ``{"prefill": {"isl": [...], "ttft_ms": [...]},
"decode": {"active_kv_tokens": [...], "itl_ms": [...]}}`` (JSON or YAML). Linear interpolation,
flat beyond the ends. Live observations are ignored: the profile is trusted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml


class TablePerfModel:
    def __init__(self, isl: list[float], ttft_ms: list[float], kv_tokens: list[float], itl_ms: list[float]) -> None:
        if len(isl) < 2 or len(isl) != len(ttft_ms) or len(kv_tokens) < 2 or len(kv_tokens) != len(itl_ms):
            raise ValueError("profile table: need >= 2 points and equal-length columns for prefill and decode")
        self._isl, self._ttft = np.asarray(isl, float), np.asarray(ttft_ms, float)
        self._kv, self._itl = np.asarray(kv_tokens, float), np.asarray(itl_ms, float)

    @classmethod
    def from_file(cls, path: Path) -> TablePerfModel:
        text = path.read_text()
        data: dict[str, Any] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        try:
            return cls(data["prefill"]["isl"], data["prefill"]["ttft_ms"], data["decode"]["active_kv_tokens"], data["decode"]["itl_ms"])
        except (KeyError, TypeError) as exc:
            raise ValueError(
                f"profile table {path}: expected prefill.isl, prefill.ttft_ms, decode.active_kv_tokens, decode.itl_ms"
            ) from exc

    def observe_prefill(self, tokens: int, iteration_ms: float) -> None:
        return None

    def observe_decode(self, kv_tokens: int, iteration_ms: float) -> None:
        return None

    def prefill_ready(self) -> bool:
        return True

    def decode_ready(self) -> bool:
        return True

    def prefill_ms(self, tokens: float) -> float:
        return 0.0 if tokens <= 0 else float(np.interp(tokens, self._isl, self._ttft))

    def decode_ms(self, kv_tokens: float) -> float:
        return float(np.interp(kv_tokens, self._kv, self._itl))
