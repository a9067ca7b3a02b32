"""``servecert bench cluster``: how fast the embedded cluster comes up and how much it carries.

Three figures (times, never pass/fail; the issue's targets are printed beside them):

1. Warm ``servecert cluster up`` (binaries cached, default 4-node topology), wall time of the
   command as a user runs it, process start-up included; then ``down``.
2. ``nodes`` fake GPU nodes (``gpus`` each) Ready: the bench cluster's bring-up records the
   time from the first Node create to every Node Ready (kwok's node-initialize stage).
3. ``pods`` pods scheduled by Volcano: gangs of ``gang_size`` pods (one PodGroup each, minMember
   = gang size, 1 GPU per pod, image unknown to the pod runner so kwok plays it), time from the
   first create to every pod bound, and to every pod Running.

Everything runs against clusters this command starts and takes down by pid; nothing else on
the machine is touched. Waits are bounded (``--timeout``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from servecert.benchmarks import figures as figures_mod
from servecert.harness.cluster import topology
from servecert.protocol import waiting

# NB: the kubernetes client (~0.8 s to import) and the modules using it are imported inside the
# functions, so building the `servecert` parser stays quick.

TARGET_NODES_READY_S = 120.0
TARGET_WARM_UP_S = 30.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node")
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--gang-size", type=int, default=8, help="pods per Volcano PodGroup")
    p.add_argument("--timeout", type=float, default=600.0, help="bound for each wait, seconds")
    p.add_argument("--skip-warm-up", action="store_true")
    p.add_argument("--json", type=Path, help="also write the figures here")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def warm_up_seconds(timeout: float) -> float:
    name = f"bench-up-{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "servecert", "cluster"]
    started = time.monotonic()
    try:
        done = subprocess.run([*command, "up", "--name", name], capture_output=True, text=True, timeout=timeout, check=False)
        elapsed = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"`servecert cluster up` failed: {done.stderr[-2000:]}")
        return elapsed
    finally:
        subprocess.run([*command, "down", "--name", name], capture_output=True, text=True, timeout=120, check=False)


def _pod(name: str, group: str) -> dict[str, Any]:
    from servecert.harness.cluster import volcano

    return {
        "metadata": {"name": name, "labels": {"bench": group}, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": volcano.SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {topology.GPU_RESOURCE: "1"}, "limits": {topology.GPU_RESOURCE: "1"}},
                }
            ],
        },
    }


def _count(api: Any, namespace: str) -> tuple[int, int]:
    from kubernetes import client

    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    items = json.loads(pods.data)["items"]
    bound = sum(1 for p in items if p["spec"].get("nodeName"))
    running = sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")
    return bound, running


def schedule_pods(api: Any, pods: int, gang_size: int, timeout: float) -> dict[str, float]:
    from kubernetes import client

    from servecert.harness.cluster import kube, volcano

    namespace = "bench"
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": namespace}})
    groups = [f"g{i}" for i in range((pods + gang_size - 1) // gang_size)]
    clock = waiting.Deadline(timeout)  # NB: the bound counts from the first create, like the figures
    for index, group in enumerate(groups):
        size = min(gang_size, pods - index * gang_size)
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": {"minMember": size, "queue": volcano.DEFAULT_QUEUE},
        }
        custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups", body)
    manifests = [_pod(f"p{i}", groups[i // gang_size]) for i in range(pods)]
    kube.bulk(lambda m: core.create_namespaced_pod(namespace, m), manifests)
    figures = {"pods_created_s": clock.elapsed()}

    def all_running() -> bool:
        bound, running = _count(api, namespace)
        if bound == pods and "pods_bound_s" not in figures:
            figures["pods_bound_s"] = clock.elapsed()
        if running == pods:
            figures["pods_running_s"] = clock.elapsed()
            return True
        return False

    def counts() -> str:
        bound, running = _count(api, namespace)
        return f"only {bound}/{pods} pods bound and {running} Running"

    waiting.until(
        all_running, timeout_s=clock.remaining(), what=f"{pods} pods Running", interval_s=0.5, describe=counts, error=RuntimeError
    )
    return figures


def run(args: argparse.Namespace) -> int:
    from servecert.harness.cluster import embedded, kube, state

    figures: dict[str, Any] = {"machine_cpus": os.cpu_count(), "nodes": args.nodes, "gpus_per_node": args.gpus, "pods": args.pods}
    if not args.skip_warm_up:
        _say("warm `servecert cluster up` (default topology) ...")
        figures["warm_cluster_up_s"] = round(warm_up_seconds(args.timeout), 2)
        _say(f"warm cluster up: {figures['warm_cluster_up_s']:.1f}s (target <= {TARGET_WARM_UP_S:g}s)")
    name = f"bench-{uuid.uuid4().hex[:6]}"
    _say(f"cluster {name} with {args.nodes} nodes x {args.gpus} GPUs ...")
    try:
        cluster = embedded.up(name, topology.flat_spec(args.nodes, gpus_per_node=args.gpus), progress=_say)
        figures["nodes_created_s"] = round(cluster.timings["nodes_created"], 2)
        figures["nodes_ready_s"] = round(cluster.timings["nodes_ready"], 2)
        figures["bench_cluster_up_s"] = round(cluster.timings["total"], 2)
        _say(f"{args.nodes} nodes Ready in {figures['nodes_ready_s']:.1f}s (target <= {TARGET_NODES_READY_S:g}s)")
        api = kube.api_client(cluster.kubeconfig)
        try:
            _say(f"{args.pods} pods in gangs of {args.gang_size}, scheduled by Volcano ...")
            pods = schedule_pods(api, args.pods, args.gang_size, args.timeout)
        finally:
            api.close()
        figures.update({k: round(v, 2) for k, v in pods.items()})
        _say(f"{args.pods} pods bound in {figures['pods_bound_s']:.1f}s, Running in {figures['pods_running_s']:.1f}s")
    finally:
        with contextlib.suppress(state.ClusterStateError):
            embedded.down(name)
    return figures_mod.emit(figures, args.json)
