"""Timing models: how long one scheduler iteration of a fake engine takes.

An iteration prefills some new tokens and/or advances every decoding sequence by one token.
Three interchangeable models sit behind ``TimingModel``:

- ``Polynomial`` — Dynamo mocker's published fit (milliseconds): prefill = 4.209989e-7*T^2 +
  0.01518344*T + 16.50142 with T the new tokens across the batch (0 when T is 0), and a decode
  step = max(1, -25.74*u^2 + 54.01*u + 5.74) with u the KV utilisation.
- ``Table`` — linear interpolation of measured points (ISL -> TTFT, active KV tokens -> ITL)
  loaded from a JSON or YAML file: ``{"prefill": {"isl": [...], "ttft_ms": [...]},
  "decode": {"active_kv_tokens": [...], "itl_ms": [...]}}``.
- ``Constant`` — fixed prefill and decode-step times.

The engine divides every delay by its time scale; the models know nothing about it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import yaml


class TimingModel(Protocol):
    def prefill_ms(self, new_tokens: int) -> float:
        """Time to prefill ``new_tokens`` new tokens summed across the batch (0 -> 0)."""
        ...

    def decode_ms(self, kv_utilisation: float, active_kv_tokens: int) -> float:
        """Time of one decode step for the whole batch."""
        ...


@dataclass(frozen=True)
class Polynomial:
    a: float = 4.209989e-07
    b: float = 1.518344e-02
    c: float = 16.50142

    def prefill_ms(self, new_tokens: int) -> float:
        if new_tokens <= 0:
            return 0.0
        t = float(new_tokens)
        return self.a * t * t + self.b * t + self.c

    def decode_ms(self, kv_utilisation: float, active_kv_tokens: int) -> float:
        u = min(1.0, max(0.0, kv_utilisation))
        return max(1.0, -25.74 * u * u + 54.01 * u + 5.74)


@dataclass(frozen=True)
class Constant:
    prefill: float = 20.0
    decode: float = 10.0

    def prefill_ms(self, new_tokens: int) -> float:
        return self.prefill if new_tokens > 0 else 0.0

    def decode_ms(self, kv_utilisation: float, active_kv_tokens: int) -> float:
        return self.decode


class Table:
    def __init__(self, isl: list[float], ttft_ms: list[float], kv_tokens: list[float], itl_ms: list[float]) -> None:
        for name, xs, ys in (("prefill", isl, ttft_ms), ("decode", kv_tokens, itl_ms)):
            if len(xs) < 2 or len(xs) != len(ys):
                raise ValueError(f"timing table {name}: need >= 2 points and equal-length columns")
            if any(b <= a for a, b in itertools.pairwise(xs)):
                raise ValueError(f"timing table {name}: x values must increase strictly")
        self._isl = np.asarray(isl, dtype=float)
        self._ttft = np.asarray(ttft_ms, dtype=float)
        self._kv = np.asarray(kv_tokens, dtype=float)
        self._itl = np.asarray(itl_ms, dtype=float)

    @classmethod
    def from_file(cls, path: Path) -> Table:
        text = path.read_text()
        data: dict[str, Any] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        try:
            return cls(
                list(data["prefill"]["isl"]),
                list(data["prefill"]["ttft_ms"]),
                list(data["decode"]["active_kv_tokens"]),
                list(data["decode"]["itl_ms"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(
                f"timing table {path}: expected keys prefill.isl, prefill.ttft_ms, "
                f"decode.active_kv_tokens, decode.itl_ms ({exc})"
            ) from exc

    def prefill_ms(self, new_tokens: int) -> float:
        if new_tokens <= 0:
            return 0.0
        return float(np.interp(new_tokens, self._isl, self._ttft))

    def decode_ms(self, kv_utilisation: float, active_kv_tokens: int) -> float:
        return float(np.interp(active_kv_tokens, self._kv, self._itl))


def from_spec(spec: str) -> TimingModel:
    """Parse a CLI spelling: ``polynomial``, ``constant:PREFILL_MS:DECODE_MS`` or ``table:PATH``."""
    kind, _, rest = spec.partition(":")
    if kind == "polynomial" and not rest:
        return Polynomial()
    if kind == "constant":
        parts = rest.split(":") if rest else []
        if len(parts) != 2:
            raise ValueError("constant timing is spelled constant:PREFILL_MS:DECODE_MS, e.g. constant:20:10")
        return Constant(float(parts[0]), float(parts[1]))
    if kind == "table" and rest:
        return Table.from_file(Path(rest))
    raise ValueError(f"unknown timing model {spec!r}: use polynomial, constant:P:D or table:PATH")
