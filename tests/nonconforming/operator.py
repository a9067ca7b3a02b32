"""Deliberately non-conforming operators: the reference operator with one rule broken each.

Each is a ``Behaviour`` the operator process loads (``--behaviour tests.nonconforming.operator:X``)
and an implementation factory the suite certifies; ``tests/certify/test_operator_profiles.py``
checks the named conformance test fails each.
"""

from __future__ import annotations

from collections.abc import Sequence

from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.reference_impl.operator.behaviour import Behaviour


def _flat_task_key(role: str, replica: int) -> str:
    return f"{role}{replica}"  # Broken: seed 004 says {role}-{replica}.


def _neighbour(bound: str, nodes: Sequence[str]) -> str:
    """Broken: the labels come from the next node in name order, not the one the pod is bound to."""
    others = [n for n in nodes if n != bound]
    return sorted(others)[0] if others else bound


def _zero_based_workers(lws: str, worker: int) -> str:
    return f"{lws}-{worker}"  # Broken: seed 004 names workers {lws}-0-{w}, w from 1.


WRONG_TASK_KEYS = Behaviour(task_key=_flat_task_key)
WRONG_POD_NAMES = Behaviour(pod_name=_zero_based_workers)
NO_TOPOLOGY_ENV = Behaviour(topology_env=False)
OPTIMISTIC_STATUS = Behaviour(status_from_pods=False)
LABELS_BEFORE_BINDING = Behaviour(inject_before_binding=True)
LABELS_FROM_WRONG_NODE = Behaviour(label_node=_neighbour)
ACCEPTS_BAD_LEVEL = Behaviour(check_level=False)
ACCEPTS_MISSING_TOPOLOGY = Behaviour(check_topology_exists=False)
NO_TOPOLOGY_RETRY = Behaviour(worker_topology_wait="0")
ACCEPTS_TOPOLOGY_ON_WORKERS = Behaviour(topology_refused_on=())
REFUSES_TOPOLOGY_ON_PD_ONLY = Behaviour(topology_refused_on=("prefill", "decode"))
DEFAULTS_TO_FALLBACK = Behaviour(default_mismatch_policy="fallback")
ADMITS_WITHOUT_GROVE = Behaviour(crd_required_for=())
ADMITS_FALLBACK_WITHOUT_GROVE = Behaviour(crd_required_for=("fail",))
IGNORES_UPDATES = Behaviour(roll_inference_services=False)
ROLLS_POD_BY_POD = Behaviour(replace_whole_replicas=False)
READY_BY_LEADER = Behaviour(replica_readiness="leader")
READY_BY_POD_COUNT = Behaviour(replica_readiness="pod-count")
READY_BY_EXISTING_PODS = Behaviour(replica_readiness="existing-pods")
TERMINATING_SERVES = Behaviour(terminating_serves=True)
NEVER_UNKNOWN = Behaviour(report_unknown=False)
NO_LEADER_SERVICE = Behaviour(leader_service=False)


def _variant(name: str) -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:{name}")


def WrongTaskKeys() -> ReferenceImplementation:
    return _variant("WRONG_TASK_KEYS")


def LabelsBeforeBinding() -> ReferenceImplementation:
    return _variant("LABELS_BEFORE_BINDING")


def LabelsFromWrongNode() -> ReferenceImplementation:
    return _variant("LABELS_FROM_WRONG_NODE")


def AcceptsBadLevel() -> ReferenceImplementation:
    return _variant("ACCEPTS_BAD_LEVEL")


def AcceptsMissingTopology() -> ReferenceImplementation:
    return _variant("ACCEPTS_MISSING_TOPOLOGY")


def AcceptsTopologyOnWorkers() -> ReferenceImplementation:
    return _variant("ACCEPTS_TOPOLOGY_ON_WORKERS")


def RefusesTopologyOnPdOnly() -> ReferenceImplementation:
    """Seed 000: topology is only valid on type frontend; this webhook refuses it on prefill and decode (the components that
    transfer KV) and admits it on worker and planner components."""
    return _variant("REFUSES_TOPOLOGY_ON_PD_ONLY")


def WrongPodNames() -> ReferenceImplementation:
    return _variant("WRONG_POD_NAMES")


def NoTopologyRetry() -> ReferenceImplementation:
    return _variant("NO_TOPOLOGY_RETRY")


def NoTopologyEnv() -> ReferenceImplementation:
    return _variant("NO_TOPOLOGY_ENV")


def OptimisticStatus() -> ReferenceImplementation:
    return _variant("OPTIMISTIC_STATUS")


def DefaultsToFallback() -> ReferenceImplementation:
    """Seed 000: an omitted mismatchPolicy is fail; this operator gives the frontend fallback (ROUTER-TOPOLOGY, cluster)."""
    return _variant("DEFAULTS_TO_FALLBACK")


def AdmitsWithoutGrove() -> ReferenceImplementation:
    """Seed 000's "Grove not installed" row: this webhook admits the topology it cannot check."""
    return _variant("ADMITS_WITHOUT_GROVE")


def AdmitsFallbackWithoutGrove() -> ReferenceImplementation:
    """Seed 000's "Grove not installed" row, whatever the policy: this webhook refuses fail there but admits fallback, as if
    a best-effort policy needed no ClusterTopology."""
    return _variant("ADMITS_FALLBACK_WITHOUT_GROVE")


def IgnoresUpdates() -> ReferenceImplementation:
    """An InferenceService's spec change never reaches its pods: they keep the generation that created them."""
    return _variant("IGNORES_UPDATES")


def RollsPodByPod() -> ReferenceImplementation:
    """A changed replica's pods are replaced one at a time, so the replica runs two templates at once."""
    return _variant("ROLLS_POD_BY_POD")


def ReadyByLeader() -> ReferenceImplementation:
    """A replica counts as ready when its leader is, whatever its workers say."""
    return _variant("READY_BY_LEADER")


def ReadyByPodCount() -> ReferenceImplementation:
    """Ready replicas are the ready pods divided by the pods of a replica: right while the unready pods share a replica."""
    return _variant("READY_BY_POD_COUNT")


def ReadyByExistingPods() -> ReferenceImplementation:
    """A replica counts as ready when the pods it has are all Ready: right until a replica loses a pod."""
    return _variant("READY_BY_EXISTING_PODS")


def TerminatingServes() -> ReferenceImplementation:
    """A pod being deleted counts by its Ready condition, which its kubelet leaves True until the container stops."""
    return _variant("TERMINATING_SERVES")


def NeverUnknown() -> ReferenceImplementation:
    """A role whose pod's state Kubernetes cannot obtain (phase Unknown) is reported Deploying, never Unknown."""
    return _variant("NEVER_UNKNOWN")


def NoLeaderService() -> ReferenceImplementation:
    """No headless Service per replica: the workers' ``LWS_LEADER_ADDRESS`` names a leader the cluster DNS cannot find."""
    return _variant("NO_LEADER_SERVICE")
