"""kopf handlers of the reference operator, registered into a registry the caller owns.

Data flow: kopf watches DGDs, InferenceServices and pods cluster-wide, and every handler's
``when`` filter keeps the objects of the namespaces (globs) the operator is given — not kopf's own
namespace patterns, whose discovery of a namespace created after start-up was seen to lag past a
minute under load (no namespace or CRD scanning at all: ``run.settings_for``). On create/update/resume
of a DGD or InferenceService, and every ``resync_s`` on a timer, the handler calls the idempotent
``Reconciler`` (so a lost event or a restart only delays convergence), one call per object at a
time, on the object fetched afresh (``one_at_a_time``). A DGD's pod that changes readiness,
begins terminating or goes reconciles its DGD at once (``pod_triggers``: the proxy's weights
follow workers as they become ready, not the timer). Pod events of pods that ask for topology
labels go to the injector. The two validating handlers back the webhook: they raise
``kopf.AdmissionError`` with every error the ``admission`` module finds. Building the registry in
a function (not at import) lets tests and the broken variants in ``tests/nonconforming`` run the
same handlers with another ``Behaviour``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import kopf

from servecert.protocol import kube_names as kn
from servecert.protocol.kube_objects import as_dgd, as_inference_service, as_pod
from servecert.reference_impl.operator import admission, kube_access
from servecert.reference_impl.operator.dgd_pods import PROXY_LABEL
from servecert.reference_impl.operator.one_at_a_time import OneAtATime
from servecert.reference_impl.operator.pod_triggers import PodTriggers, dgd_owner
from servecert.reference_impl.operator.reconcile import Reconciler
from servecert.reference_impl.operator.topology_injection import CLUSTER_TOPOLOGY_ANNOTATION

DGD = (kn.DGD_GROUP, kn.DGD_VERSION, kn.DGD_PLURAL)
ISVC = (kn.IS_GROUP, kn.IS_VERSION, kn.IS_PLURAL)
VALIDATE_DGD = "validate-dgd"
VALIDATE_ISVC = "validate-isvc"
BACKOFF_S = 1.0  # NB: kopf retries a failed handler after 60 s by default; reconciliation is idempotent, retry soon


def build_registry(
    reconciler: Reconciler, kubeconfig: Path, resync_s: float = 1.0, namespaces: Sequence[str] = ("*",)
) -> kopf.OperatorRegistry:
    """``namespaces``: the globs this instance serves; kopf watches cluster-wide and every handler filters by them."""
    registry = kopf.OperatorRegistry()
    mine = _in_namespaces(namespaces)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kube_access.connection_info(kubeconfig)

    def reconcile_dgd(obj: Mapping[str, Any]) -> None:
        reconciler.reconcile_dgd(as_dgd(obj))

    def reconcile_isvc(obj: Mapping[str, Any]) -> None:
        reconciler.reconcile_inference_service(as_inference_service(obj))

    serial = OneAtATime()
    _reconcile_on(registry, DGD, reconciler, reconcile_dgd, resync_s, mine, serial)
    _reconcile_on(registry, ISVC, reconciler, reconcile_isvc, resync_s, mine, serial)

    triggers = PodTriggers()

    async def dgd_pod_event(body: kopf.Body, type: str | None, **_: Any) -> None:
        """A DGD's pod changed readiness, began terminating or went: reconcile its DGD now (weights follow workers)."""
        pod = as_pod(dict(body))
        owner = dgd_owner(pod)
        if owner is None or not triggers.seen(pod, type):
            return
        namespace, (name, uid) = body["metadata"]["namespace"], owner
        fetch = functools.partial(reconciler.latest, DGD, namespace, name, uid)
        await asyncio.to_thread(serial.run_soon, (DGD, namespace, name), fetch, reconcile_dgd)

    for label, handler_id in ((kn.DGD_NAME_LABEL, "dgd-pods"), (PROXY_LABEL, "dgd-proxy-pods")):
        kopf.on.event("", "v1", "pods", id=handler_id, labels={label: kopf.PRESENT}, when=mine, registry=registry)(dgd_pod_event)

    @kopf.on.event("", "v1", "pods", annotations={CLUSTER_TOPOLOGY_ANNOTATION: kopf.PRESENT}, when=mine, registry=registry)
    def pod_event(body: kopf.Body, type: str | None, **_: Any) -> None:
        if type != "DELETED":
            reconciler.inject_topology(as_pod(dict(body)))

    @kopf.on.validate(*DGD, id=VALIDATE_DGD, operations=["CREATE", "UPDATE"], registry=registry)
    def validate_dgd(body: kopf.Body, **_: Any) -> None:
        _refuse(admission.dgd_errors(as_dgd(dict(body)), reconciler, reconciler.behaviour))

    @kopf.on.validate(*ISVC, id=VALIDATE_ISVC, operations=["CREATE", "UPDATE"], registry=registry)
    def validate_isvc(body: kopf.Body, **_: Any) -> None:
        _refuse(admission.inference_service_errors(as_inference_service(dict(body))))

    return registry


def _in_namespaces(patterns: Sequence[str]) -> Callable[..., bool]:
    """A kopf ``when`` filter: the object lives in a namespace matching one of ``patterns`` (globs)."""

    def mine(namespace: str | None, **_: Any) -> bool:
        return namespace is not None and any(fnmatch.fnmatchcase(namespace, p) for p in patterns)

    return mine


def _reconcile_on(
    registry: kopf.OperatorRegistry,
    resource: tuple[str, str, str],
    reconciler: Reconciler,
    reconcile: Callable[[dict[str, Any]], None],
    resync_s: float,
    mine: Callable[..., bool],
    serial: OneAtATime,
) -> None:
    """Run ``reconcile`` on create, spec update and resume of ``resource``, and every ``resync_s``, in our namespaces.

    One at a time per object and on the object as it is now (``one_at_a_time``): kopf's timer runs
    beside its change handlers.
    """

    def handler(body: kopf.Body, **_: Any) -> None:
        meta = body["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        serial.run((resource, namespace, name), lambda: reconciler.latest(resource, namespace, name, uid), reconcile)

    plural = resource[2]
    kopf.on.resume(*resource, id=f"{plural}-resume", backoff=BACKOFF_S, when=mine, registry=registry)(handler)
    kopf.on.create(*resource, id=f"{plural}-create", backoff=BACKOFF_S, when=mine, registry=registry)(handler)
    kopf.on.update(*resource, id=f"{plural}-update", field="spec", backoff=BACKOFF_S, when=mine, registry=registry)(handler)
    kopf.timer(*resource, id=f"{plural}-resync", interval=resync_s, backoff=BACKOFF_S, when=mine, registry=registry)(handler)


def _refuse(errors: list[str]) -> None:
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)
