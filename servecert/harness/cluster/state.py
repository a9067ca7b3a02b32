"""Where a named cluster lives on disk, and the record that lets another shell find and end it.

Layout (``clusters_root()`` is ``<cache_root()>/clusters``, i.e. ``~/.cache/servecert/clusters``)::

    <root>/<name>/state.json        ClusterState: ports, pids + command-line marks, kubeconfig path
    <root>/<name>/kubeconfig        admin token, server https://127.0.0.1:<port>
    <root>/<name>/logs/<component>.log
    <root>/<name>/pki/, etcd/, config/    keys, etcd data, component configs
    <root>/<name>/pods/<ns>_<pod>/  the pod runner's per-pod dirs (volumes, logs, pid files)
    <root>/.alloc.lock              flock held while picking ports and a pod-IP block

Why a file and not memory: ``up``, ``status`` and ``down`` are separate commands, and pytest-xdist
workers are separate processes; the JSON record (written atomically) is the single source of
truth for what runs. The allocation lock makes two clusters started at once (xdist workers)
never pick the same ports or the same 127.<octet>.0.0/16 block for pod IPs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from servecert.harness.cluster import binaries

POD_IP_OCTETS = range(64, 224)
"""Second octet of the 127.<o>.0.0/16 block of a cluster: pod IPs in its lower half, Service ClusterIPs in its upper."""
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


class ClusterStateError(RuntimeError):
    """No such cluster, or its record is unreadable; the message says what to run."""


@dataclass
class Component:
    name: str
    pid: int
    expect: str
    """A string the process's command line contains (its binary path): guards against pid reuse."""
    log: str


@dataclass
class ClusterState:
    name: str
    backend: str
    directory: str
    kubeconfig: str
    ports: dict[str, int] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)
    pod_ip_octet: int = 0
    created: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    nodes: int = 0

    @property
    def path(self) -> Path:
        return Path(self.directory)

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def pods_dir(self) -> Path:
        return self.path / "pods"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def pod_cidr(self) -> str:
        """The lower half of the cluster's 127.<o>.0.0/16 block: the pod runner's pod IPs."""
        return f"127.{self.pod_ip_octet}.0.0/17"

    @property
    def service_cidr(self) -> str:
        """The upper half: Services' ClusterIPs, loopback addresses the service proxy listens on (no traffic leaves the host)."""
        return f"127.{self.pod_ip_octet}.128.0/17"

    def save(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".state.json.tmp-{os.getpid()}"
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        os.replace(tmp, self.path / "state.json")


def clusters_root() -> Path:
    return binaries.cache_root() / "clusters"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ClusterStateError(f"cluster name {name!r} must be 1-40 lowercase letters, digits or '-' (no leading/trailing '-')")
    return name


def cluster_dir(name: str) -> Path:
    return clusters_root() / check_name(name)


def _from_json(data: dict[str, Any]) -> ClusterState:
    comps = [Component(**c) for c in data.pop("components", [])]
    return ClusterState(components=comps, **data)


def load(name: str) -> ClusterState:
    path = cluster_dir(name) / "state.json"
    try:
        return _from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ClusterStateError(f"no cluster named {name!r} (no {path}); start one with `servecert cluster up --name {name}`") from None
    except (OSError, ValueError, TypeError) as exc:
        raise ClusterStateError(f"cannot read {path}: {exc}; remove {path.parent} by hand if no process of it runs") from exc


def all_states() -> list[ClusterState]:
    out: list[ClusterState] = []
    root = clusters_root()
    if not root.is_dir():
        return out
    for entry in sorted(root.iterdir()):
        if (entry / "state.json").is_file():
            with contextlib.suppress(ClusterStateError):
                out.append(load(entry.name))
    return out


@contextlib.contextmanager
def allocation_lock() -> Iterator[None]:
    root = clusters_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".alloc.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def free_pod_ip_octet(taken: set[int]) -> int:
    """The lowest 127.<o>.0.0/16 block no recorded cluster uses (call under allocation_lock)."""
    for octet in POD_IP_OCTETS:
        if octet not in taken:
            return octet
    raise ClusterStateError(f"all {len(POD_IP_OCTETS)} pod-IP blocks are taken; run `servecert cluster down --all` to remove old clusters")
