"""The Volcano scheduler beside the control plane: CRDs, its configuration, the process, the open queue.

Data flow::

    BinarySet.volcano_crd_dir/*.yaml -> kube.apply_crds (PodGroup, Queue, HyperNode, ...)
    SCHEDULER_CONF -> <dir>/config/volcano-scheduler.conf -> vc-scheduler --scheduler-conf
    vc-scheduler creates the ``default`` and ``root`` queues -> open_default_queue patches
        status.state = Open (Volcano's controller-manager would, but we do not run it)

Why: gang scheduling (PodGroup minMember) and network-topology-aware placement (HyperNodes)
come from the real scheduler, not a model of it. Without ``--scheduler-conf`` it never
schedules ("failed to find Action"), and without an Open queue it refuses every PodGroup, so
both are part of bring-up. Its metrics and healthz ports default to :8080 and :11251 on every
interface; they are moved to 127.0.0.1 ports of this cluster so two clusters can coexist.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.harness.cluster import control_plane, kube, processes
from servecert.harness.cluster.binaries import BinarySet
from servecert.harness.cluster.state import ClusterState
from servecert.protocol import waiting

SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
SCHEDULE_PERIOD = "200ms"
"""Volcano's default is 1s; a shorter period keeps gang tests quick (the cycle is cheap here)."""

SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""


def apply_crds(api: Any, bins: BinarySet, timeout: float = 60.0) -> list[str]:
    crds = kube.load_yaml_dir(bins.volcano_crd_dir)
    if not crds:
        raise RuntimeError(f"no Volcano CRDs in {bins.volcano_crd_dir}; rebuild with `servecert cluster build`")
    return kube.apply_crds(api, crds, timeout=timeout)


def start_scheduler(state: ClusterState, bins: BinarySet, timeout: float = control_plane.START_TIMEOUT_S) -> control_plane.Launched:
    conf = state.path / "config" / "volcano-scheduler.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(SCHEDULER_CONF)
    healthz = state.ports["volcano_healthz"]
    argv = [
        str(bins.volcano_scheduler),
        f"--kubeconfig={state.kubeconfig}",
        f"--scheduler-conf={conf}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--leader-elect=false",
        f"--listen-address=127.0.0.1:{state.ports['volcano_metrics']}",
        f"--healthz-address=127.0.0.1:{healthz}",
        "--enable-healthz=true",
        f"--schedule-period={SCHEDULE_PERIOD}",
        f"--kube-api-qps={control_plane.CLIENT_QPS}",
        f"--kube-api-burst={control_plane.CLIENT_BURST}",
        f"--default-queue={DEFAULT_QUEUE}",
    ]
    return control_plane.start_process(state, "vc-scheduler", argv, control_plane.http_ok(f"http://127.0.0.1:{healthz}/healthz"), timeout)


CONTROLLERS = ("job-controller", "pg-controller", "queue-controller", "gc-controller", "hyperNode-controller", "cronjob-controller")
"""Volcano's controllers whose CRDs the cluster installs (its bases: no JobFlow, JobTemplate; sharding is off by default)."""


def start_controller_manager(
    state: ClusterState, bins: BinarySet, timeout: float = control_plane.START_TIMEOUT_S
) -> control_plane.Launched:
    """Volcano's controllers, built from the same module as its scheduler: PodGroups for bare Volcano pods, PodGroup and
    Queue status, Job lifecycle, and each HyperNode's status (its node count). No HyperNode discovery is configured (no
    ``volcano-controller-configmap``): the cluster's tree stays the suite's generator's (docs/gang-scheduling.md says why)."""
    healthz = state.ports["volcano_cm_healthz"]
    argv = [
        str(bins.volcano_controller_manager),
        f"--kubeconfig={state.kubeconfig}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--leader-elect=false",
        f"--controllers={','.join(CONTROLLERS)}",
        f"--listen-address=127.0.0.1:{state.ports['volcano_cm_metrics']}",
        f"--healthz-address=127.0.0.1:{healthz}",
        "--enable-healthz=true",
        f"--kube-api-qps={control_plane.CLIENT_QPS}",
        f"--kube-api-burst={control_plane.CLIENT_BURST}",
    ]
    check = control_plane.http_ok(f"http://127.0.0.1:{healthz}/healthz")
    return control_plane.start_process(state, "vc-controller-manager", argv, check, timeout)


def open_default_queue(api: Any, state: ClusterState, timeout: float = 30.0) -> float:
    """Wait for the scheduler to create the default queue, then set its state to Open."""
    custom = client.CustomObjectsApi(api)

    def opened() -> bool:
        try:
            queue = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", DEFAULT_QUEUE)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        if (queue.get("status") or {}).get("state") == "Open":
            return True
        custom.patch_cluster_custom_object_status(
            "scheduling.volcano.sh", "v1beta1", "queues", DEFAULT_QUEUE, {"status": {"state": "Open"}}
        )
        return False

    clock = waiting.Deadline(timeout)
    waiting.until(
        opened,
        timeout_s=timeout,
        what=f"Volcano's {DEFAULT_QUEUE!r} queue to exist and be Open",
        interval_s=kube.POLL_S,
        tolerate=(ApiException,),
        describe=lambda: f"see {state.logs / 'vc-scheduler.log'}:\n{processes.log_tail(state.logs / 'vc-scheduler.log', 10)}",
        error=kube.KubeWaitError,
    )
    return clock.elapsed()
