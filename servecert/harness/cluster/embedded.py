"""Bring a named embedded cluster up, report on it, and take it down: the ``embedded`` backend.

Data flow of ``up``::

    binaries.ensure()                     build or reuse the Go binaries (progress lines)
    state: ports + pod-IP block           picked under the allocation lock, saved to state.json
    credentials + kubeconfig              <dir>/pki, <dir>/kubeconfig
    control_plane: etcd -> kube-apiserver (kubeconfig rewritten to trust its certificate)
    then together: controller-manager, kube-scheduler, kwok, the pod runner (python -m servecert.fakes.pod_runner), the
    service proxy (python -m servecert.fakes.service_proxy: Services' ClusterIPs, in the block's upper half, to their endpoints),
    CRDs (Volcano's + the suite's, crds.suite_crds()), then vc-scheduler and vc-controller-manager; then all their
    health checks
    topology: Nodes -> ClusterTopology -> HyperNodes generated from the Nodes' labels as stored
    default queue Open; every node Ready  -> ClusterState (timings per step in state.timings)

``down`` ends every recorded pid in reverse order (the pod runner first: it stops its engine
processes on SIGTERM), then any engine pid the runner left in ``pods/*/*.pid``, then removes the
directory. ``status`` reads the record and checks each pid and the apiserver.

Why every step is bounded and every failure stops what was started: a half-started cluster
must not outlive the command or test session that started it; the error names the component
and its log file, which stays on disk (``up`` of the same name cleans it away).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from servecert.adapters.contract import free_port
from servecert.harness.cluster import (
    binaries,
    control_plane,
    crds,
    credentials,
    hypernodes,
    kube,
    processes,
    state,
    topology,
    volcano,
)
from servecert.harness.cluster.binaries import BinarySet
from servecert.harness.cluster.state import ClusterState

Progress = Callable[[str], None]
NODES_READY_TIMEOUT_S = 180.0
RUNNER_READY_TIMEOUT_S = 30.0
_PORTS = (
    "etcd",
    "etcd_peer",
    "apiserver",
    "controller_manager",
    "scheduler",
    "kwok",
    "volcano_metrics",
    "volcano_healthz",
    "volcano_cm_metrics",
    "volcano_cm_healthz",
)


class ClusterUpError(RuntimeError):
    """Bring-up failed; started processes were stopped; the message names the log to read."""


def _quiet(_line: str) -> None:
    return None


def _claim(name: str) -> ClusterState:
    """Pick ports and a pod-IP block no other recorded cluster uses, and record them at once."""
    with state.allocation_lock():
        directory = state.cluster_dir(name)
        if (directory / "state.json").is_file():
            old = state.load(name)
            if any(processes.alive(c.pid, c.expect) for c in old.components):
                raise ClusterUpError(f"cluster {name!r} is already running; use it, or `servecert cluster down --name {name}` first")
            shutil.rmtree(directory, ignore_errors=True)
        taken = {s.pod_ip_octet for s in state.all_states()}
        ports: dict[str, int] = {}
        for key in _PORTS:
            port = free_port()
            while port in ports.values():
                port = free_port()
            ports[key] = port
        directory.mkdir(parents=True)
        claimed = ClusterState(
            name=name,
            backend="embedded",
            directory=str(directory),
            kubeconfig=str(directory / "kubeconfig"),
            ports=ports,
            pod_ip_octet=state.free_pod_ip_octet(taken),
            created=time.time(),
        )
        claimed.save()
        return claimed


def start_pod_runner(cluster: ClusterState, timeout: float = RUNNER_READY_TIMEOUT_S) -> control_plane.Launched:
    ready = cluster.pods_dir / ".runner-ready"
    ready.unlink(missing_ok=True)
    argv = [
        sys.executable,
        "-m",
        "servecert.fakes.pod_runner",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--pods-dir={cluster.pods_dir}",
        f"--pod-cidr={cluster.pod_cidr}",
        f"--ready-file={ready}",
    ]
    return control_plane.start_process(cluster, "pod-runner", argv, ready.is_file, timeout)


def start_service_proxy(cluster: ClusterState, timeout: float = RUNNER_READY_TIMEOUT_S) -> control_plane.Launched:
    """The cluster's kube-proxy (python -m servecert.fakes.service_proxy): Services' loopback ClusterIPs forward to their endpoints."""
    ready = cluster.path / ".service-proxy-ready"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "servecert.fakes.service_proxy", f"--kubeconfig={cluster.kubeconfig}", f"--ready-file={ready}"]
    return control_plane.start_process(cluster, "service-proxy", argv, ready.is_file, timeout)


def install_topology(api: Any, spec: topology.TopologySpec, timeout: float = NODES_READY_TIMEOUT_S) -> dict[str, float]:
    """Nodes, the ClusterTopology and the HyperNodes; waits until every node is Ready."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    nodes = topology.node_manifests(spec)
    kube.create_nodes(api, nodes)
    timings["nodes_created"] = time.monotonic() - started
    kube.create_cluster_custom(api, topology.cluster_topology(spec), topology.CLUSTER_TOPOLOGY_PLURAL)
    stored = client.CoreV1Api(api).list_node(label_selector=f"{topology.FAKE_NODE_LABEL}=true").items
    labels = {n.metadata.name: dict(n.metadata.labels or {}) for n in stored}
    generated = hypernodes.generate(labels, topology.LEVELS)
    for hypernode in generated:  # NB: the cluster's own tree, told apart from HyperNodes tests and cases add
        hypernode["metadata"]["labels"][topology.FAKE_NODE_LABEL] = "true"
    problems = hypernodes.validate_tree(generated, labels)
    if problems:
        raise ClusterUpError("generated HyperNodes are invalid: " + "; ".join(problems))
    kube.bulk(lambda h: kube.create_cluster_custom(api, h, hypernodes.PLURAL), generated)
    timings["nodes_ready"] = kube.wait_nodes_ready(api, [n["metadata"]["name"] for n in nodes], timeout) + timings["nodes_created"]
    return timings


def up(
    name: str,
    spec: topology.TopologySpec,
    progress: Progress | None = None,
    bins: BinarySet | None = None,
) -> ClusterState:
    report = progress or _quiet
    t0 = time.monotonic()
    bins = bins or binaries.ensure(progress=report)
    cluster = _claim(name)
    cluster.timings["binaries"] = time.monotonic() - t0
    report(f"cluster {name}: starting in {cluster.directory}")
    try:
        _bring_up(cluster, bins, spec, report)
    except BaseException as exc:
        stop_components(cluster)
        if isinstance(exc, (processes.ClusterStartError, kube.KubeWaitError, ClusterUpError)):
            raise ClusterUpError(f"cluster {name} did not come up: {exc}\nLogs: {cluster.logs}") from exc
        raise
    cluster.timings["total"] = time.monotonic() - t0
    cluster.nodes = spec.node_count
    cluster.save()
    report(f"cluster {name}: up in {cluster.timings['total']:.1f}s, {spec.node_count} nodes; KUBECONFIG={cluster.kubeconfig}")
    return cluster


def _await(cluster: ClusterState, launched: list[control_plane.Launched], report: Progress) -> None:
    for item in launched:
        cluster.timings[item.name] = item.wait()
    report("  " + ", ".join(f"{item.name} {cluster.timings[item.name]:.1f}s" for item in launched))


def _start_api(cluster: ClusterState, bins: BinarySet, report: Progress) -> credentials.Credentials:
    """etcd, then kube-apiserver; the kubeconfig trusts the API server's certificate once it exists."""
    creds = credentials.make(cluster.path / "pki")
    credentials.write_kubeconfig(Path(cluster.kubeconfig), cluster.server, creds.token, cluster.name)
    _await(cluster, [control_plane.start_etcd(cluster, bins)], report)
    _await(cluster, [control_plane.start_apiserver(cluster, bins, creds)], report)
    ca = cluster.path / "pki" / "apiserver.crt"
    credentials.write_kubeconfig(Path(cluster.kubeconfig), cluster.server, creds.token, cluster.name, ca_file=ca)
    return creds


def _bring_up(cluster: ClusterState, bins: BinarySet, spec: topology.TopologySpec, report: Progress) -> None:
    """Start in dependency order; components that only need the apiserver start together."""
    creds = _start_api(cluster, bins, report)
    api = kube.api_client(cluster.kubeconfig)
    try:
        peers = [
            control_plane.start_controller_manager(cluster, bins, creds),
            control_plane.start_scheduler(cluster, bins),
            control_plane.start_kwok(cluster, bins),
            start_pod_runner(cluster),
            start_service_proxy(cluster),
        ]
        started = time.monotonic()
        volcano.apply_crds(api, bins)
        kube.apply_crds(api, crds.suite_crds())
        cluster.timings["crds"] = time.monotonic() - started
        vc = [volcano.start_scheduler(cluster, bins), volcano.start_controller_manager(cluster, bins)]
        _await(cluster, [*peers, *vc], report)
        report(f"  CRDs established in {cluster.timings['crds']:.1f}s")
        cluster.timings.update(install_topology(api, spec))
        report(f"  {spec.node_count} nodes Ready in {cluster.timings['nodes_ready']:.1f}s")
        cluster.timings["queue"] = volcano.open_default_queue(api, cluster)
    finally:
        api.close()


def up_api_only(name: str, without_crds: frozenset[str], progress: Progress | None = None) -> ClusterState:
    """etcd and kube-apiserver alone, with the suite's CRDs but ``without_crds`` (names; no Volcano): a cluster lacking a CRD.

    Why: an admission rule about a missing CRD (seed 000: "Grove not installed") cannot be judged on
    the shared cluster without removing the CRD from under every other test; this one takes about
    6 s to start, has no nodes and runs no pods, and ``down(name)`` removes it.
    """
    report = progress or _quiet
    bins = binaries.ensure(progress=report)
    cluster = _claim(name)
    try:
        _start_api(cluster, bins, report)
        api = kube.api_client(cluster.kubeconfig)
        try:
            kube.apply_crds(api, [crd for crd in crds.suite_crds() if crd["metadata"]["name"] not in without_crds])
        finally:
            api.close()
    except BaseException as exc:
        stop_components(cluster)
        if isinstance(exc, (processes.ClusterStartError, kube.KubeWaitError)):
            raise ClusterUpError(f"cluster {name} did not come up: {exc}\nLogs: {cluster.logs}") from exc
        raise
    cluster.save()
    return cluster


def stop_components(cluster: ClusterState) -> list[str]:
    """End every recorded process (reverse start order) and any engine the runner left behind."""
    stopped: list[str] = []
    for comp in reversed(cluster.components):
        if processes.stop(comp.pid, comp.expect):
            stopped.append(comp.name)
    for pid_file in sorted(cluster.pods_dir.glob("*/*.pid")):
        try:
            pid_text, _, expect = pid_file.read_text().partition(" ")
            if processes.stop(int(pid_text), expect.strip() or None, timeout=5.0):
                stopped.append(f"orphan {pid_file.parent.name}/{pid_file.stem}")
        except (OSError, ValueError):
            continue
    return stopped


def down(name: str, keep_logs: bool = False) -> list[str]:
    cluster = state.load(name)
    stopped = stop_components(cluster)
    left = [c.name for c in cluster.components if processes.alive(c.pid, c.expect)]
    if left:
        raise ClusterUpError(f"cluster {name}: could not end {left}; their pids are in {cluster.path / 'state.json'}")
    if keep_logs:
        (cluster.path / "state.json").unlink(missing_ok=True)
        for sub in ("etcd", "pki", "pods", "config"):
            shutil.rmtree(cluster.path / sub, ignore_errors=True)
    else:
        shutil.rmtree(cluster.path, ignore_errors=True)
    return stopped


@dataclass(frozen=True)
class Status:
    cluster: ClusterState
    alive: dict[str, bool]
    version: str
    ready_nodes: int

    @property
    def healthy(self) -> bool:
        return all(self.alive.values()) and self.version != ""

    def lines(self) -> list[str]:
        c = self.cluster
        out = [
            f"cluster {c.name} ({c.backend}): {'running' if self.healthy else 'DEGRADED'}",
            f"  server     {c.server}  version {self.version or 'unreachable'}",
            f"  kubeconfig {c.kubeconfig}",
            f"  nodes      {self.ready_nodes} Ready",
            f"  pod IPs    {c.pod_cidr} (pod runner), Service IPs {c.service_cidr} (service proxy), logs {c.logs}",
        ]
        out += [f"  {comp.name:<24} pid {comp.pid:<8} {'running' if self.alive[comp.name] else 'NOT RUNNING'}" for comp in c.components]
        return out


def status(name: str) -> Status:
    cluster = state.load(name)
    alive = {c.name: processes.alive(c.pid, c.expect) for c in cluster.components}
    version, ready = "", 0
    try:
        token = control_plane.kubeconfig_token(Path(cluster.kubeconfig))
        version = control_plane.versions(cluster, token).get("gitVersion", "")
        api = kube.api_client(cluster.kubeconfig)
        try:
            ready = len(kube.ready_node_names(api))
        finally:
            api.close()
    except Exception:  # status reports an unreachable apiserver instead of failing
        pass
    return Status(cluster=cluster, alive=alive, version=version, ready_nodes=ready)
