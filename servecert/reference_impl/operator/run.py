"""``servecert operator run``: the reference operator as a process (kopf, its webhook server over TLS).

The installer (``servecert.adapters.reference.operator_install``) gives it a kubeconfig with its ServiceAccount's
token, a namespace glob to watch, a port and a certificate for the webhook (whose
ValidatingWebhookConfiguration the installer registers by URL). kopf runs standalone (no
peering objects); events are not posted, so the ClusterRole needs no ``events`` verbs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from servecert.reference_impl.operator import behaviour as behaviour_mod
from servecert.reference_impl.operator import dgd_pods

if TYPE_CHECKING:
    import kopf

CANCELLATION_POLLING_S = 0.5
"""How often kopf looks again whether a deleted object's timer has exited, so that its finalizer can go."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", type=Path, required=True, help="credentials of the operator's ServiceAccount")
    p.add_argument("--namespaces", action="append", required=True, help="namespace name or glob to watch (repeatable)")
    p.add_argument("--webhook-port", type=int, required=True, help="port of the validating webhook on 127.0.0.1")
    p.add_argument("--cert", type=Path, required=True, help="the webhook's TLS certificate (PEM)")
    p.add_argument("--key", type=Path, required=True, help="the webhook's TLS private key (PEM)")
    p.add_argument("--behaviour", default="servecert.reference_impl.operator.behaviour:REFERENCE", help="module:ATTRIBUTE of a Behaviour")
    p.add_argument("--resync", type=float, default=1.0, help="seconds between level-based resyncs of each resource")
    p.add_argument("--frontend-image", default=dgd_pods.Images.frontend)
    p.add_argument("--worker-image", default=dgd_pods.Images.worker)


def instance_prefix(namespaces: Sequence[str]) -> str:
    """The annotation domain of the operator instance that watches ``namespaces``."""
    return f"{hashlib.sha256(','.join(sorted(namespaces)).encode()).hexdigest()[:8]}.servecert.io"


def finalizer_of(namespaces: Sequence[str]) -> str:
    """The finalizer of the operator instance that watches ``namespaces`` (its timers need one on each object)."""
    return f"{instance_prefix(namespaces)}/kopf-finalizer"


def settings_for(args: argparse.Namespace) -> kopf.OperatorSettings:
    import kopf

    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 15
    settings.networking.request_timeout = 10
    settings.networking.connect_timeout = 5
    # NB: no namespace or CRD scanning: the operator watches cluster-wide and filters by namespace itself
    # (handlers.build_registry). With kopf's own namespace patterns, a namespace created after start-up was seen
    # unserved for over a minute under load (make test: DGDs not reconciled within 60 s), and its CRD watch is
    # refused by design (CRDs: get only) and retried for ~54 s. Short API retries: reconciliation is level-based.
    settings.scanning.disabled = True
    settings.networking.error_backoffs = (0.2, 0.5, 1.0)
    # NB: cluster-wide, kopf annotates every DGD/InferenceService it sees, other instances' too: each instance keeps
    # its state under its own annotation prefix, so two operators on one cluster never read each other's progress.
    prefix = instance_prefix(args.namespaces)
    # NB: and its own finalizer. With kopf's default one, shared by every instance, each other operator on the cluster
    # removed "as there are no handlers requiring it" the finalizer the owner's timer needs, and the owner put it back:
    # 503 removals and 268 additions in 40 s with three operators (each PATCH through the owner's webhook), a third of
    # the API server's requests in make test.
    settings.persistence.finalizer = finalizer_of(args.namespaces)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=prefix, key="last-handled-configuration")
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1", port=args.webhook_port, host="127.0.0.1", certfile=str(args.cert), pkeyfile=str(args.key), cafile=str(args.cert)
    )
    settings.admission.managed = None
    settings.execution.max_workers = 8
    # NB: a deleted object keeps its finalizer until its timer has exited. A timer in the middle of a (sync) reconcile
    # does not exit at once, and unless another event of the object comes (a reconcile of a settled object patches
    # nothing new), kopf looks again only after cancellation_polling, 60 s by default. With a reconcile slowed to
    # 0.8 s, 3 of 8 InferenceServices deleted at a random moment stayed 60 s; at 0.5 s, 12 of 12 went within 1.2 s.
    # CI failed twice on it: a gang's InferenceService, or the pods a reconcile in flight made again, outlived 30 s.
    settings.background.cancellation_polling = CANCELLATION_POLLING_S
    return settings


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    for noisy in ("kopf.objects", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        behaviour = behaviour_mod.load(args.behaviour)
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in (args.kubeconfig, args.cert, args.key):
        if not path.is_file():
            print(f"error: {path} is missing; the reference's adapter writes it (adapters/reference/operator_install.py)", file=sys.stderr)
            return 2
    import kopf

    from servecert.reference_impl.operator import handlers, kube_access
    from servecert.reference_impl.operator.reconcile import Reconciler

    reconciler = Reconciler(kube_access.api_client(args.kubeconfig), behaviour, dgd_pods.Images(args.frontend_image, args.worker_image))
    registry = handlers.build_registry(reconciler, args.kubeconfig, args.resync, args.namespaces)
    asyncio.run(kopf.operator(registry=registry, settings=settings_for(args), standalone=True, clusterwide=True))
    return 0
