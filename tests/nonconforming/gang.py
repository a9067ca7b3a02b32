"""Deliberately non-conforming gang setups for GANG-SCHEDULING.

* ``DefaultScheduler``: the default kube-scheduler places the service's pods and the suite's
  gangs (no gang support: it binds pod by pod wherever one fits; PodGroups mean nothing to it).
* ``RoleTaskKeys``: the reference operator, but its PodGroup's ``minTaskMember`` is keyed by role
  (``prefill``, ``decode``) while the pods' ``volcano.sh/task-spec`` says ``{role}-{replica}``:
  Volcano finds no pods for those keys and holds the gang forever when the keys are enforced.

``tests/certify/test_gang_scheduling.py`` checks the suite fails each.
"""

from __future__ import annotations

from fixtures.reference.adapter import ReferenceImplementation
from reference_impl.operator.behaviour import Behaviour

DEFAULT_SCHEDULER = "default-scheduler"


def _role_only(role: str, replica: int) -> str:
    return role  # Broken: seed 004 keys minTaskMember by {role}-{replica}, as the pods' task-spec says.


DEFAULT_SCHEDULER_BEHAVIOUR = Behaviour(scheduler_name=DEFAULT_SCHEDULER)
ROLE_TASK_KEYS = Behaviour(pod_group_key=_role_only)


def DefaultScheduler() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:DEFAULT_SCHEDULER_BEHAVIOUR", gang_scheduler=DEFAULT_SCHEDULER)


def RoleTaskKeys() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:ROLE_TASK_KEYS")
