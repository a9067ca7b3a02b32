"""Records engines publish while they run: KV events and forward-pass metrics.

KV events let a KV-aware router know which prefix blocks each engine holds (block hashes are
chained, so a prompt's blocks can be matched from its first block on). Forward-pass metrics
(one per scheduler iteration, plus an idle heartbeat) carry what Dynamo's planner consumes:
scheduled and queued prefill/decode work per iteration. Both are plain dataclasses turned into
JSON dicts on the wire.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

BLOCK_STORED = "stored"
BLOCK_REMOVED = "removed"
ALL_BLOCKS_CLEARED = "cleared"


@dataclass(frozen=True)
class KvEvent:
    engine_id: str
    event_id: int
    kind: str  # BLOCK_STORED | BLOCK_REMOVED | ALL_BLOCKS_CLEARED
    block_hashes: tuple[int, ...] = ()
    parent_hash: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["block_hashes"] = list(self.block_hashes)
        return data


@dataclass(frozen=True)
class RequestSums:
    """Counts and token sums of one class of requests (scheduled or queued) in one iteration."""

    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    sum_prefill_kv_tokens: int = 0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


@dataclass(frozen=True)
class ForwardPassMetrics:
    worker_id: str
    counter_id: int
    # Seed 003 (Forward Pass Metrics): "wall_time: per-iteration execution time (regression target)"; "Idle heartbeats
    # (wall_time=0) are skipped". Seconds the iteration took, in simulated time (as Dynamo's, from schedule() to
    # update_from_output()); 0.0 for an idle heartbeat. Not a timestamp.
    wall_time: float
    dp_rank: int = 0
    scheduled_requests: RequestSums = field(default_factory=RequestSums)
    queued_requests: RequestSums = field(default_factory=RequestSums)
    kv_active_blocks: int = 0
    kv_total_blocks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
