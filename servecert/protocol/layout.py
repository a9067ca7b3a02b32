"""The KV-cache layout descriptor: what must agree for a KV transfer to be usable.

A decode engine that pulls KV blocks from a prefill engine can use them only when the block
size, tensor-parallel size, dtype and engine version agree (seed 001, 3.2: a TP=2 prefill
cannot feed a TP=1 decode). ``incompatibilities`` names every field that differs, so an error
can say exactly why a transfer was refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DTYPE_BYTES = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4}


@dataclass(frozen=True)
class KvLayout:
    block_size: int = 16
    tensor_parallel_size: int = 1
    dtype: str = "fp16"
    engine_version: str = "1"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {self.dtype!r}")
        if self.tensor_parallel_size < 1:
            raise ValueError("tensor_parallel_size must be >= 1")

    def incompatibilities(self, other: KvLayout) -> list[str]:
        """Names of fields whose values differ, each as 'field: mine != theirs'."""
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: {mine[k]} != {theirs[k]}" for k in mine if mine[k] != theirs[k]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KvLayout:
        return cls(
            block_size=int(data["block_size"]),
            tensor_parallel_size=int(data["tensor_parallel_size"]),
            dtype=str(data["dtype"]),
            engine_version=str(data["engine_version"]),
        )
