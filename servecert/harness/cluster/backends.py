"""Where the suite's cluster comes from: ``embedded`` (default), ``existing`` (KUBECONFIG), ``k3s``.

Each backend is one small class behind ``ClusterBackend``: ``up()`` returns a ``Cluster``
(kubeconfig path, and for the embedded one its recorded state), ``down()`` ends what ``up``
started and nothing else. ``select(name)`` builds one from ``SERVECERT_CLUSTER_BACKEND``.

Why three: contributors and CI use the embedded cluster (no Docker here); vendors point the
suite at a real cluster with ``existing``; ``k3s`` (a real kubelet, through testcontainers) is
for machines with a Docker engine. A backend that cannot work on this machine raises
``BackendUnavailable`` with the reason, which the pytest fixture turns into a skip.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from servecert.harness.cluster import embedded, kube, topology
from servecert.harness.cluster.state import ClusterState

BACKEND_ENV = "SERVECERT_CLUSTER_BACKEND"
BACKENDS = ("embedded", "existing", "k3s")
Progress = Callable[[str], None]


class BackendUnavailable(RuntimeError):
    """This backend cannot run here; the message says why and what to use instead."""


@dataclass
class Cluster:
    name: str
    backend: str
    kubeconfig: Path
    state: ClusterState | None = None
    """Only for ``embedded``: ports, pids, the pod runner's directory."""

    @property
    def has_pod_runner(self) -> bool:
        return self.state is not None

    def api(self) -> Any:
        """A new kubernetes ApiClient (close it, or use it for the session)."""
        return kube.api_client(self.kubeconfig)


class ClusterBackend(Protocol):
    name: str

    def up(self, progress: Progress | None = None) -> Cluster: ...

    def down(self) -> None: ...


class EmbeddedBackend:
    name = "embedded"

    def __init__(self, cluster_name: str, spec: topology.TopologySpec | None = None) -> None:
        self.cluster_name = cluster_name
        self.spec = spec or topology.TopologySpec()

    def up(self, progress: Progress | None = None) -> Cluster:
        state = embedded.up(self.cluster_name, self.spec, progress=progress)
        return Cluster(name=state.name, backend=self.name, kubeconfig=Path(state.kubeconfig), state=state)

    def down(self) -> None:
        embedded.down(self.cluster_name)


class ExistingBackend:
    """A cluster someone else runs; ``down`` leaves it alone."""

    name = "existing"

    def __init__(self, kubeconfig: str | None = None) -> None:
        self.kubeconfig = kubeconfig or os.environ.get("KUBECONFIG", "")

    def up(self, progress: Progress | None = None) -> Cluster:
        path = Path(self.kubeconfig.split(os.pathsep)[0]) if self.kubeconfig else Path.home() / ".kube" / "config"
        if not path.is_file():
            raise BackendUnavailable(f"backend 'existing' needs KUBECONFIG pointing at a kubeconfig file; {path} does not exist")
        return Cluster(name="existing", backend=self.name, kubeconfig=path)

    def down(self) -> None:
        return None


def docker_reachable() -> str | None:
    """None if a Docker engine answers, else the reason it does not."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        sock = Path(host.removeprefix("unix://"))
        if not sock.exists():
            return f"no Docker engine: {sock} does not exist (DOCKER_HOST={host})"
    try:
        docker = importlib.import_module("docker")  # installed with testcontainers
        docker.from_env(timeout=5).ping()
    except ImportError:
        return "the testcontainers extra is not installed (pip install 'testcontainers[k3s]')"
    except Exception as exc:
        return f"no Docker engine answers at {host}: {exc}"
    return None


class K3sBackend:
    """k3s in a container through testcontainers; a real kubelet, no kwok, no Volcano, no pod runner."""

    name = "k3s"

    def __init__(self) -> None:
        self._container: Any = None

    def up(self, progress: Progress | None = None) -> Cluster:
        reason = docker_reachable()
        if reason is not None:
            raise BackendUnavailable(f"backend 'k3s' is not available here: {reason}; use 'embedded' (the default)")
        from testcontainers.k3s import K3SContainer

        self._container = K3SContainer().start()
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"servecert-k3s-{os.getpid()}-{int(time.time())}.kubeconfig"
        path.write_text(self._container.config_yaml())
        return Cluster(name="k3s", backend=self.name, kubeconfig=path)

    def down(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None


def select(backend: str | None = None, cluster_name: str = "servecert", spec: topology.TopologySpec | None = None) -> ClusterBackend:
    chosen = backend or os.environ.get(BACKEND_ENV, "embedded")
    if chosen == "embedded":
        return EmbeddedBackend(cluster_name, spec)
    if chosen == "existing":
        return ExistingBackend()
    if chosen == "k3s":
        return K3sBackend()
    raise BackendUnavailable(f"{BACKEND_ENV}={chosen!r} is not a backend; choose one of {', '.join(BACKENDS)}")
