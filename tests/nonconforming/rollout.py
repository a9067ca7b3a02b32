"""A deliberately non-conforming rollout: the reference operator rolling workers in place, in one dynamo namespace.

``InPlace``: every revision of the workers (and each new frontend) joins the DGD's one dynamo
namespace, as a plain Deployment's rolling update would leave them: old and new workers form one
pool, discovered by every frontend. Everything else — the steps, maxSurge/maxUnavailable, the
proxy's weights — is the reference's, so the only broken rule is seed 001 4.1.2's isolation.
The suite must fail it on each of seed 001's three modes (``tests/operator/test_certify_rollout.py``).
"""

from __future__ import annotations

from fixtures.reference_adapter import ReferenceImplementation
from reference_impl.operator.behaviour import Behaviour

IN_PLACE = Behaviour(isolate_rollouts=False)


def InPlace() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:IN_PLACE")
