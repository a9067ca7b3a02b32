"""The choices of the reference operator that conformance tests pin down, as one replaceable object.

The reference uses ``REFERENCE``. The deliberately broken operators in ``tests/nonconforming``
are the same operator with one of these choices changed, loaded with ``--behaviour
module:attribute``, so each conformance test can be shown to fail on exactly the rule it checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from servecert.protocol import named_object


def seed_task_key(role: str, replica: int) -> str:
    """Seed 004: the PodGroup's ``minTaskMember`` key and the pods' ``volcano.sh/task-spec``."""
    return f"{role}-{replica}"


def seed_pod_name(lws: str, worker: int) -> str:
    """Seed 004: the leader is ``{lws}-0``, workers ``{lws}-0-{w}`` with w from 1."""
    return f"{lws}-0" if worker == 0 else f"{lws}-0-{worker}"


def bound_node(bound: str, nodes: Sequence[str]) -> str:
    """Topology labels come from the node the pod is bound to."""
    return bound


SPLITS = ("ready", "even", "switch")
REPLICA_READINESS = ("all-pods", "leader", "pod-count", "existing-pods")
WORKER_TOPOLOGY = ("workers", "replica", "drop")


@dataclass(frozen=True)
class Behaviour:
    task_key: Callable[[str, int], str] = seed_task_key
    label_node: Callable[[str, Sequence[str]], str] = bound_node
    inject_before_binding: bool = False
    """Label pods before the scheduler binds them (from some node): seed 000 forbids it."""
    check_level: bool = True
    """Refuse a ``kvCacheTransferTopology.level`` that is not a domain of the ClusterTopology."""
    check_topology_exists: bool = True
    """Refuse a DGD whose ``clusterTopologyName`` names no ClusterTopology; False admits it unchecked (broken)."""
    crd_required_for: tuple[str, ...] = ("fail", "fallback")
    """Mismatch policies whose topology is refused when the ClusterTopology CRD is not installed: both (seed 000's row
    names no policy); fewer admits what it cannot check (fails open, broken)."""
    topology_refused_on: tuple[str, ...] = ("prefill", "decode", "worker", "planner")
    """Component types whose ``kvCacheTransferTopology`` is refused: every type but frontend; fewer is broken."""
    pod_name: Callable[[str, int], str] = seed_pod_name
    default_mismatch_policy: str = "fail"
    """The router's mismatch policy when ``kvCacheTransferTopology`` omits it (seed 000: fail; fallback is broken)."""
    topology_env: bool = True
    """Give frontends and workers the topology env and volume when kvCacheTransferTopology is set."""
    worker_topology_wait: str | None = None
    """``DYN_TOPOLOGY_WAIT_SECONDS`` imposed on workers over the user's; None leaves theirs (``"0"``: no retry period, broken)."""
    status_from_pods: bool = True
    """Count readiness from the pods; False reports every existing pod as ready (optimistic)."""
    replica_readiness: str = "all-pods"
    """Seed 004: a replica counts as ready only when all its pods are (``all-pods``); ``leader`` counts a replica whose
    leader is Ready, ``pod-count`` divides the ready pods by the pods of a replica, ``existing-pods`` counts a replica whose
    pods that exist are all Ready, however few (broken)."""
    terminating_serves: bool = False
    """A pod being deleted (``deletionTimestamp`` set) still counts, by its Ready condition; True is broken."""
    leader_service: bool = True
    """A headless Service per multi-node replica, as LWS makes, so ``LWS_LEADER_ADDRESS`` resolves to the leader; False
    names an address nothing answers for (broken)."""
    report_unknown: bool = True
    """A role with a pod whose phase is Unknown is in phase Unknown; False reports it as any other not-ready role (broken)."""
    pod_group_key: Callable[[str, int], str] | None = None
    """The PodGroup's ``minTaskMember`` key of a replica when it differs from the pods' task-spec (None: ``task_key``)."""
    pod_group_as_seed_example: bool = False
    """Write the PodGroup as seed 004's example does (``minMember`` = every pod, no ``subGroupPolicy``) instead of one replica
    of every gang role with a subGroupPolicy per role: on Volcano 1.15 that forbids the seed's own scheduling table (broken)."""
    network_topology: bool = True
    """Put ``schedulingStrategy.networkTopology`` on the service's PodGroup; False drops it (broken: the gang lands anywhere)."""
    worker_topology: str = "workers"
    """A role's ``multinode.workerNetworkTopology`` (seed 002, use case 4) on a sub-group of each replica's workers, the
    leader free (``workers``); ``replica`` constrains the leader too, ``drop`` ignores it (broken)."""
    worker_topology_mode: str | None = None
    """The mode written on a replica's workers' sub-group: None, the spec's ``workerNetworkTopology.mode``; ``soft`` or
    ``hard`` whatever the spec says (broken)."""
    roll_inference_services: bool = True
    """Replace an InferenceService's pods when its spec changes them (``inference_service.replace``); False keeps the pods of
    the generation that created them (broken)."""
    replace_whole_replicas: bool = True
    """Replace a changed replica's pods all at once, as LWS recreates a group; False one pod at a time beside the others (broken:
    a replica runs two templates at once)."""
    scheduler_name: str = "volcano"
    """The scheduler of gang-scheduled pods (unless the InferenceService names one)."""
    isolate_rollouts: bool = True
    """Seed 001 4.1.2: each worker revision in its own dynamo namespace; False rolls in place in one (broken)."""
    honour_pause: bool = True
    """``spec.rolloutStrategy.paused`` holds every count; False steps on regardless (broken)."""
    honour_max_unavailable: bool = True
    """Old workers go only while ready capacity stays >= target - maxUnavailable; False removes them at will (broken)."""
    new_frontend_first: bool = True
    """Old frontends drain only once the spec's frontends are all ready and their own workers gone; False drains them at
    once (broken)."""
    frontend_rolls_workers: bool = True
    """Seed 001 4.1: a frontend-only change gets a new dynamo namespace too, and the workers roll into it with their new
    frontend; False keeps the workers and puts the new frontend in their namespace (broken)."""
    honour_max_surge: bool = True
    """New workers are added within target + maxSurge; False creates every new worker at once (broken)."""
    honour_ratio: bool = True
    """Seed 001 4.1.2: the prefill:decode ratio holds within one worker on each side; False moves each component at its own
    pace (broken)."""
    resume_rollouts: bool = True
    """A started operator resumes a rollout from the pods and the spec; False takes the other revision's workers for orphans
    on its first reconcile of each DGD and deletes them all (broken)."""
    full_new_frontend: bool = True
    """Seed 001 4.1 T1: the new frontend is created at the spec's replica count ("matching the replica count of the old
    frontend resource"); False starts it at one replica and grows it once the old workers are gone (broken)."""
    workers_after_frontend: bool = True
    """Seed 001 T1-T3: new workers only once the new frontend is ready; False creates them with it (broken)."""
    split: str = "ready"
    """Seed 001 4.3: the proxy's weights split traffic by ready workers (``ready``); ``even`` splits it evenly between
    every set that can serve (the seed's plain Service), ``switch`` sends it all to the spec's set once it can serve (broken)."""
    replace_proxies: bool = True
    """Keep ``dgd_pods.PROXY_REPLICAS`` proxy replicas, replacing one that goes; False creates them only while the DGD has
    none, so a lost replica is never replaced (broken)."""
    sync_every_proxy: bool = True
    """Bring every proxy replica to the plan each reconcile; False configures a replica until it has some frontend weighted
    and keeps only the first (by name) up to date after that (broken: the others serve the weights they started with)."""
    weight_from_desired: bool = False
    """Weigh each set by its workers that exist (created, Ready or not) instead of its ready ones: a new worker still
    loading its model already draws its share (broken)."""
    weight_counts_terminating: bool = False
    """Weigh each set by its workers whose Ready condition is True, terminating ones (``deletionTimestamp`` set) included: a
    deleted worker that is still up draws its share until its pod is gone (broken)."""
    weight_component_types: frozenset[str] | None = None
    """Weigh each set by its ready workers of these component types only (``{"decode"}``: the decode workers, which stream
    the tokens); None counts every worker, as seed 001 4.3.1's ``new_ready_workers`` does (a set is broken)."""
    weight_lag_workers: int = 0
    """The spec's set is weighted as if each of its components had this many fewer ready workers: a split lagging the
    ready ratio by that many steps (broken)."""

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"Behaviour.split {self.split!r} must be one of {SPLITS}")
        if self.worker_topology not in WORKER_TOPOLOGY:
            raise ValueError(f"Behaviour.worker_topology {self.worker_topology!r} must be one of {WORKER_TOPOLOGY}")
        if self.replica_readiness not in REPLICA_READINESS:
            raise ValueError(f"Behaviour.replica_readiness {self.replica_readiness!r} must be one of {REPLICA_READINESS}")


REFERENCE = Behaviour()


def load(spec: str) -> Behaviour:
    """``module:attribute`` naming a ``Behaviour``; a clear error otherwise."""
    return named_object.load(spec, "--behaviour", Behaviour)
