"""Discovery of workers: who serves which model, with which card, layout and topology.

A worker is known by what it publishes (its ``/engine/metadata``): dynamo namespace, role, model
card and checksum, runtime protocol version, KV layout, and the runtime config with its topology
domains. Backends keep that as ``WorkerInfo`` records and tell watchers about every change:

- ``MemoryDiscovery`` — in-process; the suite's process environment registers workers into it.
- ``FileDiscovery`` — a folder with one JSON file per worker (``servecert.protocol.discovery_files``),
  polled; lets separate processes (benchmarks, a frontend started from the shell) share one view.
- ``KubernetesDiscovery`` (``kube_discovery``) — WorkerMetadata objects in the pod's namespace.

Polled backends share ``SnapshotDiscovery``: each poll yields the full listing, ``{key: Published}``
(a file name or an object name, with a version that changes whenever the record does), and
``apply`` turns the difference to the previous listing into register/unregister calls. Keys map
to engine ids through what was loaded, so a record whose engine id changes (a restarted engine
re-publishing under the same pod name) replaces the old worker. A listing that could not be read
(``None``) changes nothing: an API outage must not empty the frontend. ``KubeDiscoverySettings``
lives here, not with the client, so reading the environment never imports the Kubernetes client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from servecert.protocol import event_loop, kube_names
from servecert.protocol.card import ModelCard

log = logging.getLogger("servecert.frontend.discovery")
DEFAULT_DYNAMO_NAMESPACE = "dynamo"


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


@dataclass(frozen=True)
class Published:
    """One entry of a listing: ``version`` changes whenever the record does; ``load`` reads it."""

    version: str
    load: Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class _Seen:
    version: str
    engine_id: str


class SnapshotDiscovery(MemoryDiscovery):
    """Registers what appears or changes in successive listings, unregisters what disappears."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, _Seen] = {}
        self._bad: dict[str, str] = {}
        """key -> version that did not load; skipped (and not logged again) until it changes."""

    def apply(self, listing: Mapping[str, Published]) -> None:
        for key in [k for k in self._seen if k not in listing]:
            self._release(self._seen.pop(key).engine_id)
        self._bad = {k: v for k, v in self._bad.items() if k in listing and listing[k].version == v}
        for key, entry in listing.items():
            old = self._seen.get(key)
            if (old is not None and old.version == entry.version) or key in self._bad:
                continue
            info = self._load(key, entry)
            if info is None:
                continue  # a bad new version keeps the previous registration, if any
            self._seen[key] = _Seen(entry.version, info.engine_id)
            if old is not None and old.engine_id != info.engine_id:
                self._release(old.engine_id)
            self.register(info)

    def _load(self, key: str, entry: Published) -> WorkerInfo | None:
        try:
            return WorkerInfo.from_metadata(entry.load())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("discovery: ignoring %s (version %s): malformed worker metadata: %r", key, entry.version, exc)
            self._bad[key] = entry.version
            return None

    def _release(self, engine_id: str) -> None:
        """Unregister ``engine_id`` unless another listed record still publishes it."""
        if all(seen.engine_id != engine_id for seen in self._seen.values()):
            self.unregister(engine_id)


class PollingDiscovery(SnapshotDiscovery):
    """Calls ``listing()`` every ``interval`` seconds between ``start`` and ``stop`` and applies it."""

    def __init__(self, interval: float) -> None:
        super().__init__()
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def listing(self) -> Mapping[str, Published] | None:
        """The full current listing, or None when it could not be read (the view is kept)."""
        raise NotImplementedError

    async def refresh(self) -> None:
        listing = await self.listing()
        if listing is not None:
            self.apply(listing)

    async def start(self) -> None:
        await self.refresh()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        await event_loop.cancel(self._task)
        self._task = None

    async def _poll(self) -> None:
        while True:  # ends with stop(); every listing() bounds its own time
            await asyncio.sleep(self.interval)
            await self.refresh()


class FileDiscovery(PollingDiscovery):
    """Workers as JSON files of their metadata in ``folder``; re-read every ``interval`` seconds."""

    def __init__(self, folder: Path, interval: float = 0.2) -> None:
        super().__init__(interval)
        self.folder = folder

    def files(self) -> dict[str, Published]:
        present: dict[str, Published] = {}
        for path in self.folder.glob("*.json") if self.folder.is_dir() else []:
            with contextlib.suppress(OSError):
                present[path.stem] = Published(str(path.stat().st_mtime_ns), _json_reader(path))
        return present

    def scan(self) -> None:
        self.apply(self.files())

    async def listing(self) -> Mapping[str, Published] | None:
        return self.files()


def _json_reader(path: Path) -> Callable[[], Mapping[str, Any]]:
    def read() -> Mapping[str, Any]:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"{path} holds {type(data).__name__}, not an object")
        return data

    return read


@dataclass(frozen=True)
class KubeDiscoverySettings:
    """Where a frontend with ``DYN_DISCOVERY_BACKEND=kubernetes`` lists WorkerMetadata objects."""

    namespace: str
    dynamo_namespace: str
    kubeconfig: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KubeDiscoverySettings | None:
        """None unless the kubernetes backend is chosen; raises ValueError naming what is missing."""
        backend = (env.get(kube_names.ENV_DISCOVERY_BACKEND) or "").strip().lower()
        if not backend:
            return None
        if backend != kube_names.DISCOVERY_KUBERNETES:
            raise ValueError(
                f"{kube_names.ENV_DISCOVERY_BACKEND} must be {kube_names.DISCOVERY_KUBERNETES!r} or unset "
                f"(file discovery with --discovery-dir), got {backend!r}"
            )
        needed = (kube_names.ENV_POD_NAMESPACE, "KUBECONFIG")
        missing = [name for name in needed if not env.get(name)]
        if missing:
            raise ValueError(
                f"{kube_names.ENV_DISCOVERY_BACKEND}={backend} needs {' and '.join(missing)} set: the pod's namespace "
                "(downward API fieldRef metadata.namespace) and a kubeconfig for the API server"
            )
        return cls(
            namespace=env[kube_names.ENV_POD_NAMESPACE],
            dynamo_namespace=env.get(kube_names.ENV_DYN_NAMESPACE) or DEFAULT_DYNAMO_NAMESPACE,
            kubeconfig=env["KUBECONFIG"],
        )
