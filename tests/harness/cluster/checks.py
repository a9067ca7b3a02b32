"""Polling assertions for the cluster tests: ``<object>_must_<condition>``, each with a deadline.

Every helper polls the API through the harness's facade (``servecert.harness.cluster.kube``: each request
bounded there, objects returned as ``servecert.protocol.kube_objects``), bounded by ``timeout``, and fails
with a message naming the object and its last seen state, so a red test says what the cluster
looked like.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from servecert.harness.cluster import kube, topology
from servecert.protocol import kube_objects, waiting

POLL_S = 0.2


def eventually(check: Callable[[], Any], what: str, timeout: float, describe: Callable[[], str] | None = None) -> Any:
    return waiting.until(check, timeout_s=timeout, what=what, interval_s=POLL_S, describe=describe)


def pod(api: Any, namespace: str, name: str) -> kube_objects.Pod | None:
    return kube.read_pod(api, namespace, name)


def _status(p: kube_objects.Pod | None) -> kube_objects.PodStatus:
    return (p.get("status") or {}) if p else {}


def _ready(p: kube_objects.Pod | None) -> bool:
    conditions = _status(p).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _brief(p: kube_objects.Pod | None) -> str:
    if p is None:
        return "pod does not exist"
    status = p.get("status") or {}
    where = f"phase={status.get('phase')} podIP={status.get('podIP')} node={p['spec'].get('nodeName')}"
    return f"{where} containers={status.get('containerStatuses')}"


def pod_must_be_ready(api: Any, namespace: str, name: str, timeout: float = 30.0) -> kube_objects.Pod:
    result: kube_objects.Pod = eventually(
        lambda: (p := pod(api, namespace, name)) is not None and _ready(p) and p,
        f"pod {namespace}/{name} Ready",
        timeout,
        lambda: _brief(pod(api, namespace, name)),
    )
    return result


def pod_must_have_ip(api: Any, namespace: str, name: str, timeout: float = 30.0) -> str:
    """The pod's IP, once the pod runner gave it one."""
    found: str = eventually(
        lambda: _status(pod(api, namespace, name)).get("podIP"),
        f"pod {namespace}/{name} with an IP",
        timeout,
        lambda: _brief(pod(api, namespace, name)),
    )
    return found


def pod_must_stay_unready(api: Any, namespace: str, name: str, seconds: float) -> None:
    for _ in waiting.holding(seconds, POLL_S):
        p = pod(api, namespace, name)
        assert not _ready(p), f"pod {namespace}/{name} became Ready too early: {_brief(p)}"


def pod_must_be_gone(api: Any, namespace: str, name: str, timeout: float = 30.0) -> None:
    eventually(
        lambda: pod(api, namespace, name) is None, f"pod {namespace}/{name} deleted", timeout, lambda: _brief(pod(api, namespace, name))
    )


def pod_must_restart(api: Any, namespace: str, name: str, count: int, timeout: float = 30.0) -> kube_objects.Pod:
    def restarted() -> kube_objects.Pod | None:
        p = pod(api, namespace, name)
        statuses = _status(p).get("containerStatuses") or []
        return p if p is not None and statuses and statuses[0]["restartCount"] >= count else None

    what = f"pod {namespace}/{name} restartCount >= {count}"
    result: kube_objects.Pod = eventually(restarted, what, timeout, lambda: _brief(pod(api, namespace, name)))
    return result


def node_must_be_ready(api: Any, name: str, timeout: float = 30.0) -> None:
    def ready() -> bool:
        conditions = (kube.read_node(api, name).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    eventually(ready, f"node {name} Ready", timeout)


def bound_pods(api: Any, namespace: str, selector: str) -> dict[str, str]:
    return kube.pod_nodes(api, namespace, selector)


@contextmanager
def namespace(api: Any, prefix: str) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (the test's objects go with it)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(api, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        kube.delete_namespace(api, name, grace_period_seconds=0)


@contextmanager
def reserved_node(api: Any, namespace: str, gpus: int) -> Iterator[str]:
    """A Ready node of ``gpus`` GPUs reserved (tainted) for the pods of ``namespace``, deleted afterwards.

    Reserved because, untainted, other tests' pods landed on such a node (an engine pod found no zone label)."""
    name = f"{namespace}-node"
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", topology.GPU_RESOURCE: str(gpus)}
    kube.create_node(api, topology.fake_node(name, {}, resources, reserved_for=namespace))
    try:
        node_must_be_ready(api, name)
        yield name
    finally:
        kube.delete_node(api, name)


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """GET (or POST ``body`` as JSON) and return the decoded JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result
