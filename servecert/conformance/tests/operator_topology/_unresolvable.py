"""The setup of the worker start-up tests: a DGD constrained to a topology level no node has a label for.

The suite makes a ClusterTopology whose second level names a label no node carries, and a DGD
(one prefill, one decode worker) whose frontend constrains KV transfers to that level. The
operator must still tell the workers to read their topology (``DYN_TOPOLOGY_ENABLED``, the level)
and project the level's label into a file; the injector cannot resolve the level, so the file
stays absent unless something else labels the pod. Every worker is given ``retry_s`` as its retry
period (``DYN_TOPOLOGY_WAIT_SECONDS``). The container status the checks read is the API server's,
written by the pod runner from the process it ran.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects

MISSING_LEVEL = "pod-rack"
DGD_NAME = "nolabel"
DECODE = f"{kn.DGD_NAME_LABEL}={DGD_NAME},{kn.COMPONENT_TYPE_LABEL}=decode"


async def deploy(env: ClusterEnvironment, retry_s: float) -> None:
    topology = f"{env.namespace}-unresolvable"
    levels = [
        {"domain": "zone", "labelKey": "topology.kubernetes.io/zone"},
        {"domain": MISSING_LEVEL, "labelKey": "servecert.io/no-node-has-this"},
    ]
    body = {"apiVersion": f"{kn.CT_GROUP}/{kn.CT_VERSION}", "kind": kn.CT_KIND, "metadata": {"name": topology}, "spec": {"levels": levels}}
    await kc.add_cluster_object(env, kc.CLUSTER_TOPOLOGY, body)
    dgd = manifests.dgd(DGD_NAME, level=MISSING_LEVEL, prefill=1, decode=1, cluster_topology=topology)
    for component in dgd["spec"]["components"]:
        component["env"] = [{"name": kn.ENV_TOPOLOGY_WAIT, "value": f"{retry_s:g}"}]
    await kc.create(env, kc.DGD, dgd)


def container(pod: kube_objects.Pod) -> dict[str, Any]:
    """The pod's one container status ({} before the runner reports it)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def first_run_end(pod: kube_objects.Pod) -> dict[str, Any] | None:
    """How the container's first run ended (``terminated``: exitCode, startedAt, finishedAt), if it has."""
    status = container(pod)
    ended = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
    return dict(ended) if ended else None


def run_seconds(ended: dict[str, Any]) -> float:
    started, finished = (datetime.fromisoformat(str(ended[key])) for key in ("startedAt", "finishedAt"))
    return (finished - started).total_seconds()
