"""The pure parts of the InferenceService rules: leader-address names, and the replica counts each shortcut gives."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.conformance.tests.inference_service import leader_address, replica_readiness
from servecert.reference_impl.operator.inference_service import LWS_WORKER_INDEX_LABEL, ready_replicas


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("lws-0-0.lws-0.ns", ("lws-0-0", "lws-0", "ns")),
        ("lws-0-0.lws-0.ns.svc", ("lws-0-0", "lws-0", "ns")),
        ("lws-0-0.lws-0.ns.svc.cluster.local.", ("lws-0-0", "lws-0", "ns")),
        ("lws-0-0.lws-0", ("lws-0-0", "lws-0", "home")),
        ("lws-0-0", None),
        ("10.0.0.1", None),
    ],
)
def test_a_leader_address_is_split_as_a_pods_resolver_completes_it(address: str, expected: tuple[str, str, str] | None) -> None:
    assert leader_address.split_name(address, "home") == expected


def test_the_workers_are_every_non_leader_pod_of_each_multi_node_replica() -> None:
    body = {
        "metadata": {"name": "s"},
        "spec": {
            "roles": [
                {"name": "prefill", "replicas": 1, "multinode": {"nodeCount": 2}},
                {"name": "decode", "replicas": 2, "multinode": {"nodeCount": 3}},
                {"name": "router", "replicas": 2},
            ]
        },
    }
    found = {(w.pod, w.leader) for w in leader_address.workers(body)}
    assert found == {
        ("s-prefill-0-0-1", "s-prefill-0-0"),
        ("s-decode-0-0-1", "s-decode-0-0"),
        ("s-decode-0-0-2", "s-decode-0-0"),
        ("s-decode-1-0-1", "s-decode-1-0"),
        ("s-decode-1-0-2", "s-decode-1-0"),
    }


def _pod(worker: int, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"labels": {LWS_WORKER_INDEX_LABEL: str(worker)}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _replicas(size: int, unready: tuple[tuple[int, int], ...]) -> dict[int, list[dict[str, Any]]]:
    return {r: [_pod(w, (r, w) not in unready) for w in range(size)] for r in range(2)}


def test_the_suites_placement_tells_both_shortcuts_from_the_rule() -> None:
    """Step 1's placement: the rule, the leader shortcut and the pod-count shortcut give three different answers."""
    members = _replicas(4, replica_readiness.UNREADY)
    answers = {how: ready_replicas(members, 4, how) for how in ("all-pods", "leader", "pod-count")}
    assert answers == {"all-pods": 0, "leader": 2, "pod-count": 1}


def test_a_placement_inside_one_replica_would_let_the_pod_count_shortcut_through() -> None:
    """Why the suite spreads the unready pods over two replicas: within one, 6 // 4 = 1 is the right answer too."""
    members = _replicas(4, ((0, 1), (0, 3)))
    assert ready_replicas(members, 4, "all-pods") == ready_replicas(members, 4, "pod-count") == 1
