"""The ground-truth log: what really happened to every request an engine saw.

Conformance verdicts are taken from here, never from an implementation's own report. One record
per request and engine: the role the engine played, the MDC checksum and protocol version the
request arrived with and the engine's own, the KV layout, the KV transfer (both ends, their
topology domains, distance, bytes, priced duration), token counts, timings and outcome. The log
is a bounded ring (oldest records dropped first, and counted) with a sequence number so readers
can poll for what is new.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

OK = "ok"
PREFILLED = "prefilled"
ABORTED = "aborted"


@dataclass
class TransferRecord:
    source_engine: str
    dest_engine: str
    source_domains: dict[str, str]
    dest_domains: dict[str, str]
    distance: str
    kv_bytes: int
    duration_ms: float
    source_layout: dict[str, Any]
    dest_layout: dict[str, Any]


@dataclass
class RequestRecord:
    request_id: str
    engine_id: str
    role: str
    model: str
    frontend: str
    mdc_checksum: str | None
    engine_mdc_checksum: str
    protocol_version: str
    engine_protocol_version: str
    kv_layout: dict[str, Any]
    domains: dict[str, str]
    prompt_fingerprint: str = ""
    outcome: str = OK  # OK | PREFILLED | ABORTED | an error code
    error: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    preemptions: int = 0
    arrival: float = 0.0
    first_token_at: float | None = None
    finished_at: float | None = None
    transfer: TransferRecord | None = None
    seq: int = field(default=0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GroundTruthLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=capacity)
        self._next_seq = 1
        self.dropped = 0
        self._listeners: list[Callable[[RequestRecord], None]] = []

    def append(self, record: RequestRecord) -> None:
        if self._records.maxlen is not None and len(self._records) == self._records.maxlen:
            self.dropped += 1
        record.seq = self._next_seq
        self._next_seq += 1
        self._records.append(record)
        for listener in self._listeners:
            listener(record)

    def since(self, seq: int = 0) -> list[RequestRecord]:
        return [r for r in self._records if r.seq > seq]

    def subscribe(self, listener: Callable[[RequestRecord], None]) -> None:
        self._listeners.append(listener)

    def __len__(self) -> int:
        return len(self._records)
