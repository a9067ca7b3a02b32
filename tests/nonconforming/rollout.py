"""Deliberately non-conforming rollouts: the reference operator with one rule of seed 001 broken each.

* ``InPlace``: every revision of the workers (and each new frontend) joins the DGD's one dynamo
  namespace, as a plain Deployment's rolling update would leave them: old and new workers form one
  pool, discovered by every frontend. The suite must fail it on each of seed 001's three modes.
* ``IgnoresPause``: ``spec.rolloutStrategy.paused`` is not honoured; the rollout steps on.
* ``ScalesDownFirst``: old workers go without waiting for new ones to be ready (maxUnavailable
  ignored), so ready capacity dips below the target.
* ``OldFrontendFirst``: the old frontend drains at once, before the new one is ready (and before
  its workers are gone), so for a while no frontend that can serve takes requests.
* ``FrontendJoinsOldWorkers``: a frontend-only change keeps the workers and puts the new frontend in
  their dynamo namespace (the reference before seed 001 4.1's "Final State: Frontend + Workers in
  NS B" was read as binding for frontend changes too): the new frontend serves through old workers.
* ``EvenSplit``: the proxy splits traffic evenly between the old and new frontend sets whenever
  both can serve, as the plain Service seed 001 4.3 warns of does.
* ``SwitchAtOnce``: all traffic goes to the new set as soon as it can serve (an instant switch).
* ``LaggingSplit``: the new set is weighted as if it had two fewer ready workers per component than
  it has, so the split trails the ready ratio by two steps.
* ``WeightsFromDesired``: each set weighted by the workers it has, Ready or not (its desired count),
  so a new worker still loading its model draws its share; seed 001 4.3 counts ready workers.
* ``CountsTerminatingWorkers``: each set weighted by its workers whose Ready condition is True, those
  being deleted included, so an old worker that stays up after its deletion (a drain, a preStop
  sleep) keeps its share until its pod is gone.
* ``WeightsFromDecode``: each set weighted by its ready decode workers alone (the workers that
  stream the tokens); seed 001 4.3.1 counts every ready worker, prefill included.
* ``NoSurgeLimit``: every new worker is created at once (maxSurge ignored), as a blue/green switch
  of the worker sets would.
* ``WorkersWithFrontend``: the new workers are created with the new frontend, not once it is ready.
* ``OneNewFrontend``: the new dynamo namespace's frontend starts at one replica and is grown to the spec's
  count only once the old workers are gone (seed 001 4.1 T1: "matching the replica count of the old
  frontend resource").
* ``CollectsOnRestart``: a started operator takes the other revision's workers for orphans and deletes
  them all on its first reconcile of each DGD: harmless on a fresh start, a capacity drop after a
  restart mid-rollout.
* ``ProxyNotReplaced``: the proxy replicas are made only while the DGD has none (the reference's
  shape when it ran one bare proxy pod), so a replica lost mid-rollout is never replaced and the
  DGD's Service is left with one.
* ``StaleProxyReplica``: each proxy replica is given the weights until it has a frontend weighted; only
  the first by name is kept up to date after that, so the other goes on splitting by the weights it
  started with (all to the old frontend). Configured "once, when it first answers", it passed in CI75:
  a replica that first answered before any frontend was ready took no weight, never became Ready,
  and left the split to the other.
* ``IgnoresRatio``: each component moves at its own pace (the prefill:decode ratio rule dropped): at
  4:2 the decodes finish first, leaving the old side two prefill and no decode for two steps.

Everything else — the steps, the proxy's weights, the drains — is the reference's.
``tests/certify/test_rollout_isolation.py`` certifies each on the tests that must catch it.
"""

from __future__ import annotations

from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.reference_impl.operator.behaviour import Behaviour

IN_PLACE = Behaviour(isolate_rollouts=False)
IGNORES_PAUSE = Behaviour(honour_pause=False)
SCALES_DOWN_FIRST = Behaviour(honour_max_unavailable=False)
OLD_FRONTEND_FIRST = Behaviour(new_frontend_first=False)
FRONTEND_JOINS_OLD_WORKERS = Behaviour(frontend_rolls_workers=False)
EVEN_SPLIT = Behaviour(split="even")
SWITCH_AT_ONCE = Behaviour(split="switch")
LAGGING_SPLIT = Behaviour(weight_lag_workers=2)
WEIGHTS_FROM_DESIRED = Behaviour(weight_from_desired=True)
COUNTS_TERMINATING = Behaviour(weight_counts_terminating=True)
WEIGHTS_FROM_DECODE = Behaviour(weight_component_types=frozenset({"decode"}))
NO_SURGE_LIMIT = Behaviour(honour_max_surge=False)
WORKERS_WITH_FRONTEND = Behaviour(workers_after_frontend=False)
ONE_NEW_FRONTEND = Behaviour(full_new_frontend=False)
IGNORES_RATIO = Behaviour(honour_ratio=False)
COLLECTS_ON_RESTART = Behaviour(resume_rollouts=False)
PROXY_NOT_REPLACED = Behaviour(replace_proxies=False)
STALE_PROXY_REPLICA = Behaviour(sync_every_proxy=False)


def InPlace() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:IN_PLACE")


def IgnoresPause() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:IGNORES_PAUSE")


def ScalesDownFirst() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:SCALES_DOWN_FIRST")


def OldFrontendFirst() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:OLD_FRONTEND_FIRST")


def FrontendJoinsOldWorkers() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:FRONTEND_JOINS_OLD_WORKERS")


def EvenSplit() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:EVEN_SPLIT")


def SwitchAtOnce() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:SWITCH_AT_ONCE")


def LaggingSplit() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:LAGGING_SPLIT")


def WeightsFromDesired() -> ReferenceImplementation:
    """Weights from the workers each set has, Ready or not: a new worker loading its model already draws traffic."""
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WEIGHTS_FROM_DESIRED")


def CountsTerminatingWorkers() -> ReferenceImplementation:
    """Weights from the workers whose Ready condition is True, terminating ones included: a deleted worker still up draws traffic."""
    return ReferenceImplementation(operator_behaviour=f"{__name__}:COUNTS_TERMINATING")


def WeightsFromDecode() -> ReferenceImplementation:
    """Weights from each set's ready decode workers alone: its prefill workers are left out of the ratio."""
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WEIGHTS_FROM_DECODE")


def NoSurgeLimit() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:NO_SURGE_LIMIT")


def WorkersWithFrontend() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:WORKERS_WITH_FRONTEND")


def IgnoresRatio() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:IGNORES_RATIO")


def CollectsOnRestart() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:COLLECTS_ON_RESTART")


def OneNewFrontend() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:ONE_NEW_FRONTEND")


def ProxyNotReplaced() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:PROXY_NOT_REPLACED")


def StaleProxyReplica() -> ReferenceImplementation:
    return ReferenceImplementation(operator_behaviour=f"{__name__}:STALE_PROXY_REPLICA")
