"""Start the control plane as local processes: etcd, kube-apiserver, controller-manager, scheduler, kwok.

Data flow (each step waits, bounded, for the previous one's health endpoint)::

    ClusterState (ports, dirs) + BinarySet + Credentials
      etcd            127.0.0.1:<etcd>, data in <dir>/etcd (no fsync: a test cluster)
      kube-apiserver  https://127.0.0.1:<apiserver>, token auth, RBAC, APF off
      kube-controller-manager, kube-scheduler   leader election off, client QPS limits off
      kwok            manages every node, stages from kwok_stages (runner-owned pods excluded)
    -> state.components gets (name, pid, expect=<cluster dir>, log) for each

Why processes and not ``kwokctl create cluster``: ``down`` must end exactly what ``up`` started,
by pid, from any shell; kwokctl keeps its own state under ``~/.kwok`` and forks with its own
pid bookkeeping, and we need our own kwok stage set anyway. Starting the five processes
directly is a page of flags, takes about 5 s, and every flag is visible here. ``start_*``
return a ``Launched`` whose ``wait()`` awaits health, so independent components start together. "QPS limits off"
means what kwokctl's ``--disable-qps-limits`` does: no inflight limits and no priority-and-
fairness in the apiserver, high client QPS in the controllers.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from servecert.fakes.pod_runner import images
from servecert.harness.cluster import kwok_stages, processes
from servecert.harness.cluster.binaries import BinarySet
from servecert.harness.cluster.credentials import Credentials
from servecert.harness.cluster.state import ClusterState, Component

CLIENT_QPS = 5000
CLIENT_BURST = 10000
KWOK_NODE_IP = "10.200.0.1"
"""Address kwok reports as every fake node's InternalIP (and hostIP of its pods)."""
KWOK_POD_CIDR = "10.201.0.0/16"
"""Pod IPs kwok hands to pods the runner does not run; runner pods get 127.x addresses."""
START_TIMEOUT_S = 60.0
"""Bound for each component to become healthy (a cold apiserver takes ~2 s on 2 cores)."""

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def http_ok(url: str, token: str | None = None, expect: str | None = None) -> Callable[[], bool]:
    def check() -> bool:
        request = urllib.request.Request(url)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=2, context=_INSECURE if url.startswith("https") else None) as resp:
            body = resp.read().decode(errors="replace")
            return bool(resp.status == 200 and (expect is None or expect in body))

    return check


def _record(state: ClusterState, name: str, proc_pid: int) -> None:
    state.components.append(Component(name=name, pid=proc_pid, expect=state.directory, log=str(state.logs / f"{name}.log")))
    state.save()


@dataclass
class Launched:
    """A spawned component whose health has not been awaited yet (so several can start at once)."""

    name: str
    proc: subprocess.Popen[bytes]
    check: Callable[[], bool]
    log: Path
    timeout: float
    started: float

    def wait(self) -> float:
        """Seconds from spawn until healthy; raises ClusterStartError quoting the log."""
        processes.wait_for(self.check, what=self.name, log=self.log, timeout=self.timeout, proc=self.proc)
        return time.monotonic() - self.started


def start_process(state: ClusterState, name: str, argv: list[str], check: Callable[[], bool], timeout: float) -> Launched:
    started = time.monotonic()
    proc = processes.spawn(name, argv, state.logs)
    _record(state, name, proc.pid)
    return Launched(name=name, proc=proc, check=check, log=state.logs / f"{name}.log", timeout=timeout, started=started)


def start_etcd(state: ClusterState, bins: BinarySet, timeout: float = START_TIMEOUT_S) -> Launched:
    client, peer = state.ports["etcd"], state.ports["etcd_peer"]
    argv = [
        str(bins.etcd),
        "--name=servecert",
        f"--data-dir={state.path / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=servecert=http://127.0.0.1:{peer}",
        "--quota-backend-bytes=8589934592",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]
    return start_process(state, "etcd", argv, http_ok(f"http://127.0.0.1:{client}/health", expect='"health":"true"'), timeout)


def start_apiserver(state: ClusterState, bins: BinarySet, creds: Credentials, timeout: float = START_TIMEOUT_S) -> Launched:
    port = state.ports["apiserver"]
    argv = [
        str(bins.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{state.ports['etcd']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state.path / 'pki'}",
        f"--token-auth-file={creds.token_file}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={creds.sa_pub}",
        f"--service-account-signing-key-file={creds.sa_key}",
        f"--service-cluster-ip-range={state.service_cidr}",
        "--allow-privileged=true",
        "--max-requests-inflight=0",
        "--max-mutating-requests-inflight=0",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
    ]
    check = http_ok(f"https://127.0.0.1:{port}/readyz", token=creds.token, expect="ok")
    return start_process(state, "kube-apiserver", argv, check, timeout)


def start_controller_manager(state: ClusterState, bins: BinarySet, creds: Credentials, timeout: float = START_TIMEOUT_S) -> Launched:
    port, kubeconfig = state.ports["controller_manager"], state.kubeconfig
    argv = [
        str(bins.kube_controller_manager),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
        f"--service-account-private-key-file={creds.sa_key}",
        f"--root-ca-file={state.path / 'pki' / 'apiserver.crt'}",
        "--use-service-account-credentials=false",
        f"--kube-api-qps={CLIENT_QPS}",
        f"--kube-api-burst={CLIENT_BURST}",
        "--profiling=false",
    ]
    return start_process(state, "kube-controller-manager", argv, http_ok(f"https://127.0.0.1:{port}/healthz", expect="ok"), timeout)


def start_scheduler(state: ClusterState, bins: BinarySet, timeout: float = START_TIMEOUT_S) -> Launched:
    port, kubeconfig = state.ports["scheduler"], state.kubeconfig
    config = state.path / "config" / "kube-scheduler.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": kubeconfig, "qps": CLIENT_QPS, "burst": CLIENT_BURST},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    argv = [
        str(bins.kube_scheduler),
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
    ]
    return start_process(state, "kube-scheduler", argv, http_ok(f"https://127.0.0.1:{port}/healthz", expect="ok"), timeout)


def start_kwok(state: ClusterState, bins: BinarySet, timeout: float = START_TIMEOUT_S) -> Launched:
    config = state.path / "config" / "kwok.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(kwok_stages.config_yaml(images.KNOWN_IMAGES))
    port = state.ports["kwok"]
    argv = [
        str(bins.kwok),
        f"--kubeconfig={state.kubeconfig}",
        "--manage-all-nodes=true",
        f"--cidr={KWOK_POD_CIDR}",
        f"--node-ip={KWOK_NODE_IP}",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{port}",
        f"--config={config}",
    ]
    return start_process(state, "kwok", argv, http_ok(f"http://127.0.0.1:{port}/healthz"), timeout)


def versions(state: ClusterState, token: str) -> dict[str, str]:
    """The apiserver's /version (for ``status``)."""
    request = urllib.request.Request(f"{state.server}/version", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5, context=_INSECURE) as resp:
        data = json.loads(resp.read())
    return {k: str(v) for k, v in data.items()}


def kubeconfig_token(path: Path) -> str:
    config = yaml.safe_load(path.read_text())
    return str(config["users"][0]["user"]["token"])
