"""The embedded cluster end to end: nodes, HyperNodes, Volcano gangs, the pod runner, the CLI.

One cluster (the session ``cluster`` fixture) serves the module; each test works in its own
namespace and, where it counts GPUs, on a node it creates, so tests do not disturb each other.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from servecert.harness.cluster import embedded, hypernodes, kube, state, topology
from servecert.harness.cluster.backends import Cluster
from servecert.harness.cluster.pytest_fixture import TEST_TOPOLOGY
from servecert.protocol import waiting
from tests.harness.cluster import checks

pytestmark = pytest.mark.cluster

ENGINE_IMAGE = "servecert/fake-engine:latest"
GPU = topology.GPU_RESOURCE


def engine_pod(name: str, args: list[str], *, labels: dict[str, str] | None = None, grace: int = 10) -> dict[str, Any]:
    topology_items = [
        {"path": level, "fieldRef": {"fieldPath": f"metadata.labels['grove.io/topology.{level}']"}} for level in ("zone", "rack")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "engine", **(labels or {})}},
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {
                    "name": "engine",
                    "image": ENGINE_IMAGE,
                    "args": ["--model", "m", "--time-scale", "0", *args],
                    "env": [
                        {"name": "DYN_TOPOLOGY_ENABLED", "value": "true"},
                        {"name": "DYN_TOPOLOGY_WAIT_SECONDS", "value": "60"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "GREETING", "value": "hello $(POD_NAME)"},
                    ],
                    "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
                    "volumeMounts": [{"name": "topology", "mountPath": "/etc/podinfo/topology"}],
                }
            ],
            "volumes": [{"name": "topology", "downwardAPI": {"items": topology_items}}],
        },
    }


def grove_labels_for(api: Any, node_name: str) -> dict[str, str]:
    """What Grove would patch onto a scheduled pod (seed 000 §1a): its node's topology domains."""
    node_labels = client.CoreV1Api(api).read_node(node_name).metadata.labels
    return {
        "grove.io/topology.zone": node_labels[topology.ZONE_LABEL],
        "grove.io/topology.rack": node_labels[topology.RACK_LABEL],
    }


def labelled_engine(api: Any, ns: str, name: str, args: list[str], grace: int = 10) -> dict[str, Any]:
    """An engine pod whose topology labels are known up front (placed on a node of zone-0/rack-0-0)."""
    pod = engine_pod(name, args, labels={"grove.io/topology.zone": "zone-0", "grove.io/topology.rack": "rack-0-0"}, grace=grace)
    pod["spec"]["nodeSelector"] = {topology.RACK_LABEL: "rack-0-0"}
    client.CoreV1Api(api).create_namespaced_pod(ns, pod)
    return checks.pod_must_be_ready(api, ns, name)


def engine_pid(cluster: Cluster, ns: str, name: str) -> int:
    assert cluster.state is not None
    pid_files = list(cluster.state.pods_dir.glob(f"{ns}_{name}_*/engine.pid"))
    assert pid_files, f"no pid file for {ns}/{name} under {cluster.state.pods_dir}"
    return int(pid_files[0].read_text().split()[0])


def test_every_node_is_ready_with_gpus_and_topology_labels(api: Any) -> None:
    nodes = {n.metadata.name: n for n in client.CoreV1Api(api).list_node(label_selector=f"{topology.FAKE_NODE_LABEL}=true").items}
    expected = topology.placements(TEST_TOPOLOGY)
    assert sorted(nodes) == sorted(p.name for p in expected)
    for place in expected:
        node = nodes[place.name]
        ready = [c.status for c in node.status.conditions if c.type == "Ready"]
        assert ready == ["True"], f"{place.name} conditions: {node.status.conditions}"
        assert node.status.capacity[GPU] == "8" and node.status.allocatable[GPU] == "8"
        labels = node.metadata.labels
        placed = (labels[topology.ZONE_LABEL], labels[topology.RACK_LABEL], labels[topology.HOST_LABEL])
        assert placed == (place.zone, place.rack, place.name)
        assert not node.spec.taints, f"{place.name} has taints {node.spec.taints}; pods must fit without tolerations"


def test_hypernode_tree_and_cluster_topology_match_the_node_labels(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    own = f"{topology.FAKE_NODE_LABEL}=true"  # NB: cases add HyperNodes and nodes of their own beside the cluster's
    stored = custom.list_cluster_custom_object(hypernodes.GROUP, hypernodes.VERSION, hypernodes.PLURAL, label_selector=own)["items"]
    nodes = client.CoreV1Api(api).list_node(label_selector=own).items
    labels = {n.metadata.name: dict(n.metadata.labels) for n in nodes}
    assert hypernodes.validate_tree(stored, labels) == []
    covered = hypernodes.leaves(stored, labels)
    by_rack: dict[str, set[str]] = {}
    by_zone: dict[str, set[str]] = {}
    for name, node_labels in labels.items():
        by_rack.setdefault(node_labels[topology.RACK_LABEL], set()).add(name)
        by_zone.setdefault(node_labels[topology.ZONE_LABEL], set()).add(name)
    tiers = {t: sorted(sorted(covered[h["metadata"]["name"]]) for h in stored if h["spec"]["tier"] == t) for t in (1, 2)}
    assert tiers[1] == sorted(sorted(v) for v in by_rack.values())
    assert tiers[2] == sorted(sorted(v) for v in by_zone.values())
    assert {h["spec"]["tier"] for h in stored} == {1, 2}

    ct = custom.get_cluster_custom_object(
        topology.CLUSTER_TOPOLOGY_GROUP, topology.CLUSTER_TOPOLOGY_VERSION, topology.CLUSTER_TOPOLOGY_PLURAL, "servecert"
    )
    assert ct["spec"]["levels"] == [{"domain": d, "labelKey": k} for d, k in topology.LEVELS]


def _gang_pod(name: str, pool: str, scheduler: str, group: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"gang": group or "none"}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": topology.reserve(spec, pool)}


def test_gang_of_four_stays_pending_with_three_free_gpus_and_binds_once_a_fourth_is_free(api: Any) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    with checks.namespace(api, "gang") as ns, checks.reserved_node(api, ns, gpus=4) as node_name:
        core.create_namespaced_pod(ns, _gang_pod("blocker", ns, "default-scheduler"))
        checks.eventually(lambda: checks.bound_pods(api, ns, "gang=none").get("blocker"), "blocker pod bound", 30)

        podgroup = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"minMember": 4, "queue": "default"},
        }
        custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", podgroup)
        for i in range(4):
            core.create_namespaced_pod(ns, _gang_pod(f"member-{i}", ns, "volcano", group="pg"))

        for _ in waiting.holding(4.0, 0.2):  # 20 scheduling cycles of 200 ms
            bound = checks.bound_pods(api, ns, "gang=pg")
            assert len(bound) == 4 and not any(bound.values()), f"gang partly bound with 3 GPUs free: {bound}"

        core.delete_namespaced_pod("blocker", ns, grace_period_seconds=0)
        members = checks.eventually(
            lambda: (b := checks.bound_pods(api, ns, "gang=pg")) and all(b.values()) and b,
            "all 4 gang members bound",
            30,
            lambda: f"bound: {checks.bound_pods(api, ns, 'gang=pg')}",
        )
        assert set(members.values()) == {node_name}


def test_volcanos_controllers_count_hypernode_nodes_and_group_a_bare_pod(api: Any) -> None:
    """vc-controller-manager runs: every HyperNode of the cluster's tree reports its node count (the hyperNode-controller),
    and a pod for Volcano with no PodGroup gets one (the pg-controller) and binds through it.

    Volcano 1.15.1 counts a HyperNode's members, not the nodes under them: a tier-1 rack reports its nodes, a tier-2 zone
    the racks it lists (``actualNodeCnt`` matches each member's selector against node names, and an exactMatch member
    counts as its name)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    own = f"{topology.FAKE_NODE_LABEL}=true"
    labels = {n.metadata.name: dict(n.metadata.labels) for n in core.list_node(label_selector=own).items}

    def counted() -> dict[str, Any] | None:
        found = custom.list_cluster_custom_object(hypernodes.GROUP, hypernodes.VERSION, hypernodes.PLURAL, label_selector=own)["items"]
        leaves = hypernodes.leaves(found, labels)
        want = {
            h["metadata"]["name"]: len(leaves[h["metadata"]["name"]]) if h["spec"]["tier"] == 1 else len(h["spec"]["members"])
            for h in found
        }
        said = {h["metadata"]["name"]: (h.get("status") or {}).get("nodeCount") for h in found}
        return said if said and said == want else None

    checks.eventually(counted, "every HyperNode's status.nodeCount: a rack's nodes, a zone's racks", 30)
    with checks.namespace(api, "bare") as ns, checks.reserved_node(api, ns, gpus=1) as node_name:
        core.create_namespaced_pod(ns, _gang_pod("bare", ns, "volcano"))
        bound = checks.eventually(lambda: checks.bound_pods(api, ns, "gang=none").get("bare"), "bare Volcano pod bound", 30)
        assert bound == node_name
        groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
        pod = core.read_namespaced_pod("bare", ns)
        assert [g["metadata"]["name"] for g in groups] == [pod.metadata.annotations["scheduling.k8s.io/group-name"]]


def test_engine_pod_gets_a_loopback_ip_env_and_topology_files_and_serves_on_its_ip(api: Any, cluster: Cluster) -> None:
    core = client.CoreV1Api(api)
    assert cluster.state is not None
    with checks.namespace(api, "engine") as ns:
        core.create_namespaced_pod(ns, engine_pod("e1", []))
        pod = checks.eventually(lambda: (p := checks.pod(api, ns, "e1")) and (p.get("status") or {}).get("podIP") and p, "pod IP", 30)
        ip = pod["status"]["podIP"]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(cluster.state.pod_cidr)
        # No topology labels yet: the engine waits for its files, so the pod is not Ready.
        checks.pod_must_stay_unready(api, ns, "e1", 1.5)
        core.patch_namespaced_pod("e1", ns, {"metadata": {"labels": grove_labels_for(api, pod["spec"]["nodeName"])}})
        pod = checks.pod_must_be_ready(api, ns, "e1")
        assert pod["status"]["podIP"] == ip

        node_labels = core.read_node(pod["spec"]["nodeName"]).metadata.labels
        metadata = checks.http_json(f"http://{ip}:8000/engine/metadata")
        assert metadata["runtime_config"]["topology_domains"] == {
            "zone": node_labels[topology.ZONE_LABEL],
            "rack": node_labels[topology.RACK_LABEL],
        }
        completion = checks.http_json(f"http://{ip}:8000/v1/completions", {"model": "m", "prompt": "hello world", "max_tokens": 3})
        assert completion["usage"]["completion_tokens"] == 3

        # NB: the env the runner started the program with; that a forked program gets it is test_pod_runner_zygote's.
        [env_file] = cluster.state.pods_dir.glob(f"{ns}_e1_*/engine.env.json")
        env = json.loads(env_file.read_text())
        assert engine_pid(cluster, ns, "e1") > 0
        assert (env["POD_NAME"], env["POD_IP"], env["NODE_NAME"]) == ("e1", ip, pod["spec"]["nodeName"])
        assert env["GREETING"] == "hello e1"
        assert env["DYN_TOPOLOGY_MOUNT_PATH"].startswith(str(cluster.state.pods_dir))

        time.sleep(1.0)  # kwok must not have rewritten the runner's IP meanwhile
        assert checks.pod(api, ns, "e1")["status"]["podIP"] == ip  # type: ignore[index]


def test_a_crashed_engine_shows_as_a_restart_and_serves_again(api: Any) -> None:
    with checks.namespace(api, "crash") as ns:
        pod = labelled_engine(api, ns, "e2", ["--crash-after", "1"])
        ip = pod["status"]["podIP"]
        with pytest.raises(urllib.error.HTTPError) as refused:  # --crash-after 1: the first request crashes it
            checks.http_json(f"http://{ip}:8000/v1/completions", {"model": "m", "prompt": "one", "max_tokens": 2})
        assert refused.value.code == 503
        pod = checks.pod_must_restart(api, ns, "e2", 1)
        status = pod["status"]["containerStatuses"][0]
        assert status["lastState"]["terminated"]["exitCode"] == 3, status  # servecert.fakes.serve.EXIT_CRASHED
        pod = checks.pod_must_be_ready(api, ns, "e2")
        assert pod["status"]["podIP"] == ip
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
        assert checks.http_json(f"http://{ip}:8000/engine/metadata")["card"]["served_model_name"] == "m"


def test_deleting_an_engine_pod_stops_its_process_before_the_pod_disappears(api: Any, cluster: Cluster) -> None:
    with checks.namespace(api, "delete") as ns:
        labelled_engine(api, ns, "e3", [], grace=20)
        pid = engine_pid(cluster, ns, "e3")
        started = time.monotonic()
        client.CoreV1Api(api).delete_namespaced_pod("e3", ns)
        died = checks.eventually(lambda: not checks.pid_alive(pid) and time.monotonic(), f"engine pid {pid} ended", 20)
        checks.pod_must_be_gone(api, ns, "e3", timeout=20)
        gone = time.monotonic()
        assert died <= gone
        assert died - started < 15, "the engine did not stop on SIGTERM well within its grace period"


def test_an_unknown_image_runs_nothing_and_kwok_plays_its_lifecycle(api: Any, cluster: Cluster) -> None:
    assert cluster.state is not None
    with checks.namespace(api, "plain") as ns:
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
        client.CoreV1Api(api).create_namespaced_pod(ns, pod)
        ready = checks.pod_must_be_ready(api, ns, "p")
        assert not ready["status"]["podIP"].startswith("127."), "kwok, not the runner, gives unknown images their IP"
        assert not list(cluster.state.pods_dir.glob(f"{ns}_p_*"))


def _cluster_processes(directory: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if directory in cmdline:
            found.append(f"{proc.name}: {cmdline[:120]}")
    return found


def test_cluster_up_status_down_from_a_shell_leave_no_process_behind(api: Any) -> None:
    """Even an engine whose pod runner was SIGKILLed is ended by ``down`` (through its pid file)."""
    name = f"cli-{os.getpid()}"
    directory = str(state.cluster_dir(name))
    command = [sys.executable, "-m", "servecert", "cluster"]
    engine = 0
    try:
        up = subprocess.run([*command, "up", "--name", name, "--nodes", "2"], capture_output=True, text=True, timeout=180, check=False)
        assert up.returncode == 0, up.stderr
        assert f"export KUBECONFIG={directory}/kubeconfig" in up.stdout
        status = subprocess.run([*command, "status", "--name", name], capture_output=True, text=True, timeout=60, check=False)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "running" in status.stdout and "2 Ready" in status.stdout
        assert _cluster_processes(directory), "no process of the cluster found while it is up"

        recorded = state.load(name)
        other = kube.api_client(recorded.kubeconfig)
        try:
            client.CoreV1Api(other).create_namespaced_pod("default", engine_pod("orphan", []))
            client.CoreV1Api(other).patch_namespaced_pod(
                "orphan", "default", {"metadata": {"labels": {"grove.io/topology.zone": "z", "grove.io/topology.rack": "r"}}}
            )
            checks.pod_must_be_ready(other, "default", "orphan")
        finally:
            other.close()
        pid_file = next(recorded.pods_dir.glob("default_orphan_*/engine.pid"))
        engine = int(pid_file.read_text().split()[0])
        runner = next(c.pid for c in recorded.components if c.name == "pod-runner")
        os.kill(runner, signal.SIGKILL)
        checks.eventually(lambda: not checks.pid_alive(runner), "pod runner killed", 10)
        assert checks.pid_alive(engine), "the engine should outlive its SIGKILLed runner until down"
    finally:
        down = subprocess.run([*command, "down", "--name", name], capture_output=True, text=True, timeout=120, check=False)
        if down.returncode != 0 and state.cluster_dir(name).exists():
            embedded.down(name)  # NB: never leave a cluster behind, even when the CLI itself is broken
    assert down.returncode == 0, down.stderr
    assert "orphan default_orphan" in down.stdout, down.stdout
    assert _cluster_processes(directory) == []
    assert not checks.pid_alive(engine)
    assert not Path(directory).exists()
    gone = subprocess.run([*command, "status", "--name", name], capture_output=True, text=True, timeout=60, check=False)
    assert gone.returncode == 1 and "no cluster named" in gone.stderr
