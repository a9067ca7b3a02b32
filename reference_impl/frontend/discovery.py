"""Discovery of workers: who serves which model, with which card, layout and topology.

A worker is known by what it publishes (its ``/engine/metadata``): dynamo namespace, role, model
card and checksum, runtime protocol version, KV layout, and the runtime config with its topology
domains. Backends keep that as ``WorkerInfo`` records and tell watchers about every change:

- ``MemoryDiscovery`` — in-process; the suite's process environment registers workers into it.
- ``FileDiscovery`` — a folder with one JSON file per worker (``protocol.discovery_files``),
  polled; lets separate processes (benchmarks, a frontend started from the shell) share one view.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from protocol.card import ModelCard


@dataclass(frozen=True)
class WorkerInfo:
    engine_id: str
    url: str
    namespace: str
    role: str
    card: ModelCard
    checksum: str
    protocol_version: str
    kv_layout: Mapping[str, Any]
    domains: Mapping[str, str] = field(default_factory=dict)
    transfer_domain: str | None = None
    enforcement: str = "required"
    preferred_weight: float | None = None
    topology_enabled: bool = False

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> WorkerInfo:
        """Build from an engine's published metadata; raises KeyError/TypeError/ValueError if malformed."""
        runtime = dict(meta.get("runtime_config") or {})
        card = dict(meta["card"])
        weight = runtime.get("kv_transfer_preferred_weight")
        return cls(
            engine_id=str(meta["engine_id"]),
            url=str(meta["url"]),
            namespace=str(meta.get("namespace", "dynamo")),
            role=str(meta["role"]),
            card=ModelCard.from_dict(card),
            checksum=str(card["checksum"]),
            protocol_version=str(meta["protocol_version"]),
            kv_layout=dict(meta.get("kv_layout") or {}),
            domains={str(k): str(v) for k, v in dict(runtime.get("topology_domains") or {}).items()},
            transfer_domain=runtime.get("kv_transfer_domain") or None,
            enforcement=str(runtime.get("kv_transfer_enforcement") or "required"),
            preferred_weight=None if weight is None else float(weight),
            topology_enabled=bool(runtime.get("enabled", False)),
        )

    @property
    def model(self) -> str:
        return self.card.served_model_name


Watcher = Callable[[str, WorkerInfo], None]  # ("added" | "removed", worker)


class Discovery(Protocol):
    def workers(self) -> list[WorkerInfo]: ...

    def watch(self, watcher: Watcher) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class MemoryDiscovery:
    def __init__(self) -> None:
        self._workers: dict[str, WorkerInfo] = {}
        self._watchers: list[Watcher] = []

    def register(self, worker: WorkerInfo) -> None:
        self._workers[worker.engine_id] = worker
        for watcher in self._watchers:
            watcher("added", worker)

    def unregister(self, engine_id: str) -> None:
        worker = self._workers.pop(engine_id, None)
        if worker is not None:
            for watcher in self._watchers:
                watcher("removed", worker)

    def workers(self) -> list[WorkerInfo]:
        return list(self._workers.values())

    def watch(self, watcher: Watcher) -> None:
        self._watchers.append(watcher)
        for worker in self._workers.values():
            watcher("added", worker)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class FileDiscovery(MemoryDiscovery):
    """Workers as JSON files of their metadata in ``folder``; re-read every ``interval`` seconds."""

    def __init__(self, folder: Path, interval: float = 0.2) -> None:
        super().__init__()
        self.folder = folder
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._seen: dict[str, float] = {}

    def scan(self) -> None:
        present: dict[str, float] = {}
        for path in self.folder.glob("*.json") if self.folder.is_dir() else []:
            with contextlib.suppress(OSError):
                present[path.stem] = path.stat().st_mtime
        for engine_id in set(self._seen) - set(present):
            self.unregister(engine_id)
        for engine_id, mtime in present.items():
            if self._seen.get(engine_id) == mtime:
                continue
            try:
                info = WorkerInfo.from_metadata(json.loads((self.folder / f"{engine_id}.json").read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # half-written or malformed: try again next scan
            self.register(info)
        self._seen = present

    async def start(self) -> None:
        self.scan()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.scan()
