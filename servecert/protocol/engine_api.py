"""The engine's runtime API: what a frontend sends a worker and what it gets back.

Besides the OpenAI-compatible routes (for direct clients), an engine serves three routes to
frontends, all JSON over HTTP:

- ``POST /engine/generate`` — a preprocessed request (token ids) for an aggregated or decode
  engine; streams one JSON line per token (``application/x-ndjson``) or answers once. A decode
  request carries a ``kv_transfer`` naming the prefill engine that holds the KV blocks.
- ``POST /engine/prefill`` — a preprocessed request for a prefill engine; answers with a
  ``KvHandle`` once the prompt's KV blocks are computed and pinned for pickup.
- ``POST /engine/kv/pull`` — called by a decode engine on the prefill engine named in the
  handle: releases the pinned blocks and returns their layout and domains (the fake network
  prices the transfer on the receiving side).

Every request names the MDC checksum it was preprocessed with and the runtime-protocol version
of its sender. A worker refuses a request whose checksum or protocol differs from its own, and a
transfer between incompatible KV layouts, with the error codes below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUNTIME_PROTOCOL_VERSION = "1"

# How a P/D router hands a request from a prefill to a decode engine: the suite's runtime API
# above, vLLM's ``kv_transfer_params`` or SGLang's bootstrap room on the OpenAI routes (``servecert.fakes.pd_wire``).
PD_SERVECERT = "servecert"
PD_VLLM = "vllm"
PD_SGLANG = "sglang"
PD_PROTOCOLS = (PD_SERVECERT, PD_VLLM, PD_SGLANG)

# Error codes carried in ``{"error": {"code": ...}}`` bodies.
MDC_CHECKSUM_MISMATCH = "mdc_checksum_mismatch"
RUNTIME_PROTOCOL_MISMATCH = "runtime_protocol_mismatch"
KV_LAYOUT_MISMATCH = "kv_layout_mismatch"
KV_HANDLE_NOT_FOUND = "kv_handle_not_found"
KV_TRANSFER_FAILED = "kv_transfer_failed"
WRONG_ROLE = "wrong_role"
INJECTED_ERROR = "injected_error"
ENGINE_UNAVAILABLE = "engine_unavailable"

# HTTP status of each runtime error code.
ERROR_STATUS = {
    MDC_CHECKSUM_MISMATCH: 422,
    RUNTIME_PROTOCOL_MISMATCH: 400,
    KV_LAYOUT_MISMATCH: 409,
    KV_HANDLE_NOT_FOUND: 404,
    KV_TRANSFER_FAILED: 502,
    WRONG_ROLE: 400,
    INJECTED_ERROR: 500,
    ENGINE_UNAVAILABLE: 503,
}


@dataclass(frozen=True)
class Sampling:
    max_tokens: int = 16
    min_tokens: int = 0
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "min_tokens": self.min_tokens,
            "ignore_eos": self.ignore_eos,
            "stop": list(self.stop),
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sampling:
        return cls(
            max_tokens=int(data.get("max_tokens", 16)),
            min_tokens=int(data.get("min_tokens", 0)),
            ignore_eos=bool(data.get("ignore_eos", False)),
            stop=tuple(data.get("stop") or ()),
            seed=None if data.get("seed") is None else int(data["seed"]),
        )


@dataclass(frozen=True)
class KvHandle:
    """Where a prefilled request's KV blocks wait for a decode engine to pull them."""

    handle_id: str
    engine_id: str
    url: str
    num_tokens: int
    first_token: int
    kv_bytes: int
    layout: dict[str, Any]
    domains: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "handle_id": self.handle_id,
            "engine_id": self.engine_id,
            "url": self.url,
            "num_tokens": self.num_tokens,
            "first_token": self.first_token,
            "kv_bytes": self.kv_bytes,
            "layout": self.layout,
            "domains": dict(self.domains),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KvHandle:
        return cls(
            handle_id=str(data["handle_id"]),
            engine_id=str(data["engine_id"]),
            url=str(data["url"]),
            num_tokens=int(data["num_tokens"]),
            first_token=int(data["first_token"]),
            kv_bytes=int(data["kv_bytes"]),
            layout=dict(data["layout"]),
            domains={str(k): str(v) for k, v in dict(data.get("domains") or {}).items()},
        )


@dataclass(frozen=True)
class EngineRequest:
    """A preprocessed request as a frontend sends it to ``/engine/generate`` or ``/engine/prefill``."""

    request_id: str
    model: str
    token_ids: tuple[int, ...]
    sampling: Sampling
    mdc_checksum: str | None
    protocol_version: str = RUNTIME_PROTOCOL_VERSION
    stream: bool = True
    kv_transfer: KvHandle | None = None
    frontend: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "model": self.model,
            "token_ids": list(self.token_ids),
            "sampling": self.sampling.to_dict(),
            "mdc_checksum": self.mdc_checksum,
            "protocol_version": self.protocol_version,
            "stream": self.stream,
            "kv_transfer": None if self.kv_transfer is None else self.kv_transfer.to_dict(),
            "frontend": self.frontend,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineRequest:
        handle = data.get("kv_transfer")
        return cls(
            request_id=str(data["request_id"]),
            model=str(data["model"]),
            token_ids=tuple(int(t) for t in data["token_ids"]),
            sampling=Sampling.from_dict(dict(data.get("sampling") or {})),
            mdc_checksum=None if data.get("mdc_checksum") is None else str(data["mdc_checksum"]),
            protocol_version=str(data.get("protocol_version", RUNTIME_PROTOCOL_VERSION)),
            stream=bool(data.get("stream", True)),
            kv_transfer=None if handle is None else KvHandle.from_dict(dict(handle)),
            frontend=str(data.get("frontend", "")),
        )
