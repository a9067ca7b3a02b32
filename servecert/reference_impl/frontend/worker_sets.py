"""Worker sets: which workers the frontend may route to, and which it rejected.

Workers of one (dynamo namespace, model, worker type) form a set sharing one model card. The
first card accepted for a set wins (as in Dynamo); a later worker publishing a card with another
checksum is not routed to, and its rejection is kept for the status endpoint and logged. A
worker whose card names a tokenizer this frontend cannot run is rejected the same way. When the
last worker of a set leaves, the set forgets its card, so a new card can be accepted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from servecert.protocol import tokenizer
from servecert.reference_impl.frontend.discovery import WorkerInfo

log = logging.getLogger("servecert.frontend")

SetKey = tuple[str, str, str]  # (namespace, model, worker type)


@dataclass(frozen=True)
class Rejection:
    engine_id: str
    key: SetKey
    checksum: str
    incumbent: str
    reason: str
    url: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "engine_id": self.engine_id,
            "url": self.url,
            "namespace": self.key[0],
            "model": self.key[1],
            "worker_type": self.key[2],
            "checksum": self.checksum,
            "incumbent_checksum": self.incumbent,
            "reason": self.reason,
        }


class WorkerSets:
    def __init__(self, namespace: str | None = None) -> None:
        self.namespace = namespace  # None: accept every namespace
        self.accepted: dict[str, WorkerInfo] = {}
        self.rejected: dict[str, Rejection] = {}
        self._cards: dict[SetKey, str] = {}
        self._members: dict[SetKey, set[str]] = {}

    def on_change(self, kind: str, worker: WorkerInfo) -> None:
        if kind == "removed":
            self.remove(worker.engine_id)
        else:
            self.add(worker)

    def add(self, worker: WorkerInfo) -> bool:
        if self.namespace is not None and worker.namespace != self.namespace:
            return False
        key: SetKey = (worker.namespace, worker.model, worker.role)
        self.remove(worker.engine_id)
        if worker.card.tokenizer not in tokenizer.KNOWN:
            self._reject(worker, key, "", f"unknown tokenizer {worker.card.tokenizer!r}")
            return False
        incumbent = self._cards.setdefault(key, worker.checksum)
        if incumbent != worker.checksum:
            self._reject(worker, key, incumbent, "incompatible model card; the first accepted card retains the worker set")
            return False
        self._members.setdefault(key, set()).add(worker.engine_id)
        self.accepted[worker.engine_id] = worker
        return True

    def remove(self, engine_id: str) -> None:
        self.rejected.pop(engine_id, None)
        worker = self.accepted.pop(engine_id, None)
        if worker is None:
            return
        key: SetKey = (worker.namespace, worker.model, worker.role)
        members = self._members.get(key, set())
        members.discard(engine_id)
        if not members:
            self._members.pop(key, None)
            self._cards.pop(key, None)

    def _reject(self, worker: WorkerInfo, key: SetKey, incumbent: str, reason: str) -> None:
        self.rejected[worker.engine_id] = Rejection(worker.engine_id, key, worker.checksum, incumbent, reason, worker.url)
        log.error(
            "Rejected incompatible worker %s (%s): model=%s worker_type=%s incumbent_checksum=%s rejected_checksum=%s",
            worker.engine_id, reason, worker.model, worker.role, incumbent, worker.checksum,
        )

    def for_model(self, model: str) -> list[WorkerInfo]:
        return [w for w in self.accepted.values() if w.model == model]

    def models(self) -> list[str]:
        return sorted({w.model for w in self.accepted.values()})
