"""Deliberately non-conforming gang setups for GANG-SCHEDULING.

* ``DefaultScheduler``: the reference operator, but its gang-scheduled pods name the default
  kube-scheduler (no gang support: it binds pod by pod wherever one fits; PodGroups and their
  network topology mean nothing to it).
* ``RoleTaskKeys``: the reference operator, but its PodGroup's ``minTaskMember`` is keyed by role
  (``prefill``, ``decode``) while the pods' ``volcano.sh/task-spec`` says ``{role}-{replica}``:
  Volcano finds no pods for those keys and holds the gang forever when the keys are enforced.
* ``SeedExamplePodGroup``: the reference operator, but its PodGroup is seed 004's example to the
  letter (``minMember`` = every pod of the service, ``minTaskMember`` per replica, no
  ``subGroupPolicy``). ``InferenceServicePodGroup`` leaves ``minMember`` to the implementation and
  passes it; what Volcano then does breaks the seed's own table (nothing binds on 64 GPUs, where
  the table runs 1 prefill + 1 decode replica), so ``GangSchedulingTable`` fails it.

* ``DropsNetworkTopology``: the reference operator, but the InferenceService's
  ``schedulingStrategy.networkTopology`` never reaches its PodGroup: Volcano places the gang
  anywhere, so a hard gang that no allowed domain holds is bound across the tree, and one that fits
  a domain lands outside it.
* ``DropsWorkerTopology``: the reference operator, but a role's ``multinode.workerNetworkTopology``
  never reaches its PodGroup: each replica's workers land wherever Volcano spreads them.
* ``WorkerTopologyOnReplica``: the reference operator, but the workers' network topology is put on
  the whole replica, leader included (seed 002's use case 4 leaves the leader free): on racks with
  room for the workers but not the leader too, nothing binds.

``tests/certify/test_gang_scheduling.py`` checks the suite fails each.
"""

from __future__ import annotations

from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.reference_impl.operator.behaviour import Behaviour

DEFAULT_SCHEDULER = "default-scheduler"


def _role_only(role: str, replica: int) -> str:
    return role  # Broken: seed 004 keys minTaskMember by {role}-{replica}, as the pods' task-spec says.


DEFAULT_SCHEDULER_BEHAVIOUR = Behaviour(scheduler_name=DEFAULT_SCHEDULER)
ROLE_TASK_KEYS = Behaviour(pod_group_key=_role_only)
SEED_EXAMPLE_POD_GROUP = Behaviour(pod_group_as_seed_example=True)
DROPS_NETWORK_TOPOLOGY = Behaviour(network_topology=False)
DROPS_WORKER_TOPOLOGY = Behaviour(worker_topology="drop")
WORKER_TOPOLOGY_ON_REPLICA = Behaviour(worker_topology="replica")
WORKER_TOPOLOGY_ALWAYS_SOFT = Behaviour(worker_topology_mode="soft")
WORKER_TOPOLOGY_ALWAYS_HARD = Behaviour(worker_topology_mode="hard")


def DefaultScheduler() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:DEFAULT_SCHEDULER_BEHAVIOUR")


def RoleTaskKeys() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:ROLE_TASK_KEYS")


def SeedExamplePodGroup() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:SEED_EXAMPLE_POD_GROUP")


def DropsNetworkTopology() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:DROPS_NETWORK_TOPOLOGY")


def DropsWorkerTopology() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:DROPS_WORKER_TOPOLOGY")


def WorkerTopologyOnReplica() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WORKER_TOPOLOGY_ON_REPLICA")


def WorkerTopologyAlwaysSoft() -> ReferenceImplementation:
    """The workers' sub-group is written soft whatever ``workerNetworkTopology.mode`` says: hard workers spread across racks."""
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WORKER_TOPOLOGY_ALWAYS_SOFT")


def WorkerTopologyAlwaysHard() -> ReferenceImplementation:
    """The workers' sub-group is written hard whatever the mode: soft workers wait for a rack that can never hold them."""
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WORKER_TOPOLOGY_ALWAYS_HARD")
