"""The model deployment card (MDC) and its checksum.

A frontend preprocesses a request with the card of the worker set it routes to (tokenizer,
context length, block size) and sends the card's checksum with the request; the engine compares
it with its own card and fails the request on a mismatch (seed 001, 3.1). The checksum covers
what changes how a request must be preprocessed, as Dynamo's ``mdcsum`` does: the served model
name, tokenizer identity, context length, KV block size and worker type. Runtime settings such
as topology are published beside the card, never hashed into it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

WORKER_TYPES = ("agg", "prefill", "decode")


@dataclass(frozen=True)
class ModelCard:
    """What a worker publishes about the model it serves; immutable once published."""

    served_model_name: str
    tokenizer: str = "servecert-words-v1"
    context_length: int = 8192
    block_size: int = 16
    worker_type: str = "agg"

    def __post_init__(self) -> None:
        if self.worker_type not in WORKER_TYPES:
            raise ValueError(f"worker_type must be one of {WORKER_TYPES}, got {self.worker_type!r}")
        if self.block_size <= 0 or self.context_length <= 0:
            raise ValueError("block_size and context_length must be positive")

    def checksum(self) -> str:
        """A stable hex digest over the hashed fields, in a fixed order."""
        payload = json.dumps(
            [self.served_model_name, self.tokenizer, self.context_length, self.block_size, self.worker_type],
            separators=(",", ":"),
        )
        return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "checksum": self.checksum()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        fields = ("served_model_name", "tokenizer", "context_length", "block_size", "worker_type")
        return cls(**{k: data[k] for k in fields if k in data})
