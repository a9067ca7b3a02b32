"""Kubernetes Events the operator posts about its resources (a rollout's steps), best effort.

kopf's own event posting is off (``run.settings_for``); the rollout controller posts one Event
per step itself, so ``kubectl describe dgd`` tells the rollout's story; ``eventTime``
(microseconds) orders steps taken within one second. An Event that cannot be posted is logged
and dropped: it is a report, never a reason to fail a reconciliation.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from typing import Any

from kubernetes.client.rest import ApiException

from servecert.protocol import kube_names as kn
from servecert.protocol.kube_objects import KubeObject

log = logging.getLogger("servecert.operator")
SOURCE = "servecert-reference-operator"
INSTANCE = f"{socket.gethostname()}-{os.getpid()}"
"""This operator process, as an Event's reportingInstance."""


def post(core: Any, obj: KubeObject, reason: str, message: str, kind: str = kn.DGD_KIND) -> None:
    meta = obj["metadata"]
    moment = datetime.datetime.now(datetime.UTC)
    now = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", f"{kn.DGD_GROUP}/{kn.DGD_VERSION}"),
            "kind": kind,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": SOURCE},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        # NB: eventTime orders a rollout's steps within a second; the API then asks for these three as well
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingComponent": SOURCE,
        "reportingInstance": INSTANCE,
        "action": "Reconcile",
    }
    log.info("%s %s/%s: %s", reason, meta["namespace"], meta["name"], message)
    try:
        core.create_namespaced_event(meta["namespace"], body, _request_timeout=10)
    except (ApiException, OSError) as exc:
        log.warning("could not post event %s for %s/%s: %s", reason, meta["namespace"], meta["name"], exc)
