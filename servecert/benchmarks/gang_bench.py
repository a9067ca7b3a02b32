"""``servecert bench gang``: how fast the embedded Volcano places gangs on a 256-node / 2,048-GPU cluster.

Figures (times, never pass/fail), each the median of ``--repeat`` runs on one cluster:

1. ``gang_bound_s``: from creating a PodGroup (minMember 64) and its 64 pods (8 GPUs each, so
   64 whole nodes) to every pod bound. Beside it, the same 64 pods each in a one-pod PodGroup
   (what Volcano's controller would make for bare pods; the embedded cluster does not run it)
   — ``independent_bound_s`` — and the ratio of the two, so the cost of gang placement is read
   against the same scheduler in the same process.
2. ``table_s``: seed 004's table scenario — story 4 as the reference operator plans it (pods
   and PodGroup from ``servecert.reference_impl.operator.inference_service.plan``, applied directly, no
   operator process) on 80, 64, 48, 32 and 16 GPUs of nodes of its own, one row after another;
   per row, the time from creating the objects to the row's outcome: the expected replicas all
   bound, or (blocked rows) Volcano marking the PodGroup unschedulable.

3. Topology-aware gangs (seed 002 on seed 004): ``--topology-gangs`` gangs at once, each one
   replica of ``--topology-pods`` pods of 4 GPUs (half a tier-1 HyperNode: 8 nodes x 8 GPUs per
   rack), planned by the reference operator from an InferenceService whose
   ``schedulingStrategy.networkTopology`` is hard or soft at tier 1, or absent (the baseline, the
   same gangs in the same run). Per mode: ``topology_<mode>_bound_s``, from the first create to
   every pod bound, and ``topology_<mode>_within_tier1``, how many gangs landed wholly inside one
   tier-1 HyperNode (a rack; read from the pods' nodes and the nodes' labels, not Volcano's claims).

Everything runs against a cluster this command starts and takes down by pid. Waits are bounded
(``--timeout``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servecert.benchmarks import figures as figures_mod
from servecert.harness.cluster import topology
from servecert.protocol import waiting

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
TOPOLOGY_MODES = ("none", "soft", "hard")
TOPOLOGY_POD_GPUS = 4
TABLE = {80: 3, 64: 2, 48: 2, 32: 0, 16: 0}
"""GPUs -> replicas of story 4 seed 004 says are bound (prefill-0 + one or two decode replicas, or none)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=256)
    p.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node")
    p.add_argument("--gang-pods", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--topology-gangs", type=int, default=100, help="gangs placed at once per network-topology mode (0: skip)")
    p.add_argument("--topology-pods", type=int, default=8, help="pods of 4 GPUs per topology-aware gang")
    p.add_argument("--timeout", type=float, default=300.0, help="bound for each wait, seconds")
    p.add_argument("--json", type=Path, help="also write the figures here")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


POLL_S = 0.05
"""Every wait polls this often (not kube's 0.2 s): the figures are fractions of a second."""


class Bench:
    def __init__(self, api: Any, gpus: int, timeout: float) -> None:
        from kubernetes import client

        self.api = api
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.gpus, self.timeout = gpus, timeout

    def namespace(self, name: str) -> str:
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    def bound(self, namespace: str) -> set[str]:
        from servecert.harness.cluster import kube

        return {name for name, node in kube.pod_nodes(self.api, namespace).items() if node}

    def pod(self, name: str, group: str) -> dict[str, Any]:
        from servecert.harness.cluster import volcano

        annotations = {"scheduling.k8s.io/group-name": group}
        limits = {topology.GPU_RESOURCE: str(self.gpus)}
        return {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "schedulerName": volcano.SCHEDULER_NAME,
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": PAUSE_IMAGE, "resources": {"requests": limits, "limits": limits}}],
            },
        }

    def gang(self, namespace: str, pods: int, with_group: bool) -> float:
        """Seconds from the first create to every pod bound."""
        from servecert.harness.cluster import kube

        started = time.monotonic()
        groups = {"gang": pods} if with_group else {f"solo-{i}": 1 for i in range(pods)}
        for name, size in groups.items():
            body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name}}
            body["spec"] = {"minMember": size}
            self.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups", body)
        manifests = [self.pod(f"p{i}", "gang" if with_group else f"solo-{i}") for i in range(pods)]
        kube.bulk(lambda m: self.core.create_namespaced_pod(namespace, m), manifests)
        self._until(lambda: len(self.bound(namespace)) == pods, f"{pods} pods bound in {namespace}")
        return time.monotonic() - started

    def _until(self, probe: Callable[[], bool], what: str) -> None:
        waiting.until(probe, timeout_s=self.timeout, what=what, interval_s=POLL_S, error=RuntimeError)

    def clear(self, namespace: str) -> None:
        self.core.delete_namespace(namespace, grace_period_seconds=0)
        self._until(lambda: not self._exists(namespace), f"namespace {namespace} gone")

    def _exists(self, namespace: str) -> bool:
        from kubernetes.client.rest import ApiException

        try:
            self.core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def table_row(self, gpus: int, tag: str) -> float:
        """Story 4 on ``gpus`` GPUs of its own nodes: seconds to the row's outcome."""
        from servecert.harness import seed_examples
        from servecert.harness.cluster import kube
        from servecert.reference_impl.operator import inference_service
        from servecert.reference_impl.operator.behaviour import REFERENCE

        ns = self.namespace(f"table-{gpus}-{tag}")
        nodes = [f"{ns}-n{i}" for i in range(gpus // self.gpus)]
        for name in nodes:
            resources = {"cpu": "64", "memory": "512Gi", "pods": "110", topology.GPU_RESOURCE: str(self.gpus)}
            self.core.create_node(topology.fake_node(name, {}, resources, reserved_for=ns))
        kube.wait_nodes_ready(self.api, nodes, self.timeout)
        isvc = copy.deepcopy(seed_examples.load("inferenceservice-story4"))
        isvc["metadata"] |= {"namespace": ns, "uid": f"bench-{ns}", "generation": 1}
        plan = inference_service.plan(isvc, REFERENCE)
        started = time.monotonic()
        group = plan.pod_group
        assert group is not None
        group["metadata"].pop("ownerReferences", None)
        self.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", group)
        pods = [_placed(p, ns) for p in plan.pods.values()]
        kube.bulk(lambda m: self.core.create_namespaced_pod(ns, m), pods)
        replicas = TABLE[gpus]
        if replicas:
            want = {"prefill": 2, "decode": 4}
            expected = want["prefill"] + want["decode"] * (replicas - 1)
            self._until(lambda: len(self.bound(ns)) == expected, f"{expected} pods bound on {gpus} GPUs")
        else:
            self._until(lambda: self._unschedulable(ns), f"PodGroup marked unschedulable on {gpus} GPUs")
        took = time.monotonic() - started
        self.clear(ns)
        for name in nodes:
            self.core.delete_node(name)
        return took

    def topology_round(self, mode: str, gangs: int, pods: int, tag: str) -> tuple[float, int]:
        """``gangs`` one-replica services of ``pods`` pods at once, networkTopology ``mode`` at tier 1: (seconds to every pod
        bound, gangs wholly inside one rack)."""
        from servecert.harness.cluster import kube
        from servecert.reference_impl.operator import inference_service
        from servecert.reference_impl.operator.behaviour import REFERENCE

        ns = self.namespace(f"topology-{mode}-{tag}")
        started = time.monotonic()
        for g in range(gangs):
            plan = inference_service.plan(_gang_service(ns, f"g{g}", pods, mode), REFERENCE)
            assert plan.pod_group is not None
            plan.pod_group["metadata"].pop("ownerReferences", None)
            self.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", plan.pod_group)
            kube.bulk(lambda m: self.core.create_namespaced_pod(ns, m), [_runnable(p) for p in plan.pods.values()])
        self._until(lambda: len(self.bound(ns)) == gangs * pods, f"{gangs * pods} pods of {gangs} gangs bound ({mode})")
        took = time.monotonic() - started
        racks = {n["metadata"]["name"]: n["metadata"]["labels"].get(topology.RACK_LABEL) for n in kube.list_nodes(self.api)}
        placed: dict[str, set[str | None]] = {}
        for pod in kube.list_pods(self.api, ns):
            group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            placed.setdefault(group, set()).add(racks.get(pod["spec"]["nodeName"]))
        self.clear(ns)
        return took, sum(1 for found in placed.values() if len(found) == 1 and None not in found)

    def _unschedulable(self, ns: str) -> bool:
        groups = self.custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
        conditions = [c for g in groups for c in (g.get("status") or {}).get("conditions") or []]
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions)


def _gang_service(ns: str, name: str, pods: int, mode: str) -> dict[str, Any]:
    """One replica of ``pods`` pods (4 GPUs each), asking for tier 1 in ``mode`` (``none``: no networkTopology)."""
    limits = {topology.GPU_RESOURCE: str(TOPOLOGY_POD_GPUS)}
    container = {"name": "engine", "image": PAUSE_IMAGE, "args": ["serve"], "resources": {"limits": limits, "requests": limits}}
    role = {"name": "inference", "componentType": "worker", "replicas": 1, "multinode": {"nodeCount": pods}}
    role["template"] = {"spec": {"containers": [container]}}
    strategy: dict[str, Any] = {"schedulerName": "volcano"}
    if mode != "none":
        strategy["networkTopology"] = {"mode": mode, "highestTierAllowed": 1}
    meta = {"name": name, "namespace": ns, "uid": f"bench-{ns}-{name}", "generation": 1}
    return {
        "apiVersion": "fusioninfer.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {"roles": [role], "schedulingStrategy": strategy},
    }


def _runnable(pod: dict[str, Any]) -> dict[str, Any]:
    """A planned pod kwok can play: no owner (no operator here), the pause image, no grace period."""
    pod = copy.deepcopy(pod)
    pod["metadata"].pop("ownerReferences", None)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    for container in pod["spec"]["containers"]:
        container["image"] = PAUSE_IMAGE
    return pod


def _placed(pod: dict[str, Any], ns: str) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["metadata"].pop("ownerReferences", None)
    spec = topology.reserve(pod["spec"], ns)
    spec["terminationGracePeriodSeconds"] = 0
    for container in spec["containers"]:
        container["image"] = PAUSE_IMAGE
    return pod


def run(args: argparse.Namespace) -> int:
    from servecert.harness.cluster import embedded, kube, state

    figures: dict[str, Any] = {"nodes": args.nodes, "gpus_per_node": args.gpus, "gang_pods": args.gang_pods, "repeat": args.repeat}
    name = f"bench-gang-{uuid.uuid4().hex[:6]}"
    _say(f"cluster {name} with {args.nodes} nodes x {args.gpus} GPUs ...")
    try:
        cluster = embedded.up(name, topology.flat_spec(args.nodes, gpus_per_node=args.gpus), progress=_say)
        api = kube.api_client(cluster.kubeconfig)
        try:
            bench = Bench(api, args.gpus, args.timeout)
            gang: list[float] = []
            independent: list[float] = []
            table: list[float] = []
            placement: dict[str, list[tuple[float, int]]] = {mode: [] for mode in TOPOLOGY_MODES}
            for i in range(args.repeat):
                for with_group, into in ((True, gang), (False, independent)):
                    ns = bench.namespace(f"{'gang' if with_group else 'independent'}-{i}")
                    into.append(bench.gang(ns, args.gang_pods, with_group))
                    bench.clear(ns)
                    how = "as one gang" if with_group else "independent"
                    _say(f"run {i + 1}/{args.repeat}: {args.gang_pods} pods {how}: {into[-1]:.2f}s")
                rows = {gpus: bench.table_row(gpus, str(i)) for gpus in TABLE}
                table.append(sum(rows.values()))
                _say(f"run {i + 1}/{args.repeat}: seed 004 table " + ", ".join(f"{g} GPUs {s:.2f}s" for g, s in rows.items()))
                for mode in TOPOLOGY_MODES if args.topology_gangs else ():
                    took, within = bench.topology_round(mode, args.topology_gangs, args.topology_pods, str(i))
                    placement[mode].append((took, within))
                    _say(
                        f"run {i + 1}/{args.repeat}: {args.topology_gangs} gangs, networkTopology {mode}: bound in {took:.2f}s, "
                        f"{within} within one tier-1 HyperNode"
                    )
        finally:
            api.close()
    finally:
        with contextlib.suppress(state.ClusterStateError):
            embedded.down(name)
    figures["gang_bound_s"] = round(statistics.median(gang), 3)
    figures["independent_bound_s"] = round(statistics.median(independent), 3)
    figures["gang_over_independent"] = round(statistics.median(gang) / statistics.median(independent), 3)
    figures["table_s"] = round(statistics.median(table), 3)
    runs = {"gang_s": gang, "independent_s": independent, "table_s": table}
    if args.topology_gangs:
        figures |= {"topology_gangs": args.topology_gangs, "topology_pods": args.topology_pods, "topology_pod_gpus": TOPOLOGY_POD_GPUS}
        for mode, rounds in placement.items():
            figures[f"topology_{mode}_bound_s"] = round(statistics.median(t for t, _ in rounds), 3)
            figures[f"topology_{mode}_within_tier1"] = int(statistics.median(w for _, w in rounds))
            runs[f"topology_{mode}_s"] = [t for t, _ in rounds]
        figures["topology_hard_over_none"] = round(figures["topology_hard_bound_s"] / figures["topology_none_bound_s"], 3)
    figures["runs"] = {key: [round(x, 3) for x in values] for key, values in runs.items()}
    return figures_mod.emit(figures, args.json)
