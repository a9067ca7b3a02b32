"""Polling assertions for the cluster tests: ``<object>_must_<condition>``, each with a deadline.

Every helper polls the API (bounded by ``timeout``) and fails with a message naming the object
and its last seen state, so a red test says what the cluster looked like.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from protocol import waiting

POLL_S = 0.2


def eventually(check: Callable[[], Any], what: str, timeout: float, describe: Callable[[], str] | None = None) -> Any:
    return waiting.until(check, timeout_s=timeout, what=what, interval_s=POLL_S, describe=describe)


def pod(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        raw = client.CoreV1Api(api).read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    data: dict[str, Any] = json.loads(raw.data)
    return data


def _ready(p: dict[str, Any] | None) -> bool:
    conditions = ((p or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _brief(p: dict[str, Any] | None) -> str:
    if p is None:
        return "pod does not exist"
    status = p.get("status") or {}
    where = f"phase={status.get('phase')} podIP={status.get('podIP')} node={p['spec'].get('nodeName')}"
    return f"{where} containers={status.get('containerStatuses')}"


def pod_must_be_ready(api: Any, namespace: str, name: str, timeout: float = 30.0) -> dict[str, Any]:
    result: dict[str, Any] = eventually(
        lambda: (p := pod(api, namespace, name)) is not None and _ready(p) and p,
        f"pod {namespace}/{name} Ready",
        timeout,
        lambda: _brief(pod(api, namespace, name)),
    )
    return result


def pod_must_stay_unready(api: Any, namespace: str, name: str, seconds: float) -> None:
    for _ in waiting.holding(seconds, POLL_S):
        p = pod(api, namespace, name)
        assert not _ready(p), f"pod {namespace}/{name} became Ready too early: {_brief(p)}"


def pod_must_be_gone(api: Any, namespace: str, name: str, timeout: float = 30.0) -> None:
    eventually(
        lambda: pod(api, namespace, name) is None, f"pod {namespace}/{name} deleted", timeout, lambda: _brief(pod(api, namespace, name))
    )


def pod_must_restart(api: Any, namespace: str, name: str, count: int, timeout: float = 30.0) -> dict[str, Any]:
    def restarted() -> dict[str, Any] | None:
        p = pod(api, namespace, name)
        statuses = ((p or {}).get("status") or {}).get("containerStatuses") or []
        return p if p is not None and statuses and statuses[0]["restartCount"] >= count else None

    what = f"pod {namespace}/{name} restartCount >= {count}"
    result: dict[str, Any] = eventually(restarted, what, timeout, lambda: _brief(pod(api, namespace, name)))
    return result


def node_must_be_ready(api: Any, name: str, timeout: float = 30.0) -> None:
    def ready() -> bool:
        conditions = client.CoreV1Api(api).read_node(name).status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    eventually(ready, f"node {name} Ready", timeout)


def bound_pods(api: Any, namespace: str, selector: str) -> dict[str, str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items
    return {p.metadata.name: p.spec.node_name or "" for p in pods}


@contextmanager
def namespace(api: Any, prefix: str) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (the test's objects go with it)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name, grace_period_seconds=0)


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
