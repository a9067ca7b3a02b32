"""Listing a Dynamo namespace's WorkerMetadata objects: shared by the reference frontend and planner on a cluster.

Data flow: ``live_items(objects, namespace, dynamo_namespace, timeout_s)`` makes one list call of
servecert.io/v1alpha1 workermetadatas in ``namespace`` with the label
nvidia.com/dynamo-namespace=<dynamo_namespace> (bounded by ``timeout_s``) and returns the objects
without a deletionTimestamp; ``explain`` turns a failed call into a line that says what to check.

Why here: the frontend's discovery and the planner's worker count read the same objects the same
way, and the reference's parts may not import each other (import-linter's independence contract).
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.rest import ApiException

from servecert.protocol import kube_names


def live_items(objects: Any, namespace: str, dynamo_namespace: str, timeout_s: float) -> list[dict[str, Any]]:
    """The namespace's WorkerMetadata objects not being deleted; raises ValueError on an answer without ``items``."""
    result = objects.list_namespaced_custom_object(
        kube_names.WM_GROUP,
        kube_names.WM_VERSION,
        namespace,
        kube_names.WM_PLURAL,
        label_selector=f"{kube_names.DYNAMO_NAMESPACE_LABEL}={dynamo_namespace}",
        _request_timeout=timeout_s,
    )
    items = result.get("items") if isinstance(result, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"the list of {kube_names.WM_PLURAL} has no items: {str(result)[:200]}")
    return [item for item in items if not item["metadata"].get("deletionTimestamp")]


def explain(exc: BaseException, namespace: str, timeout_s: float, who: str) -> str:
    """What a failed listing means and what to check; ``who`` names the caller whose identity lists them."""
    where = f"{kube_names.WM_PLURAL}.{kube_names.WM_GROUP} in namespace {namespace}"
    status = getattr(exc, "status", None)
    if isinstance(exc, ApiException) and status == 404:
        return f"listing {where}: 404; is the WorkerMetadata CRD installed (servecert/harness/cluster/crds/)?"
    if isinstance(exc, ApiException) and status in (401, 403):
        return f"listing {where}: {status} {exc.reason}; may the {who}'s KUBECONFIG identity list them?"
    if isinstance(exc, ApiException):
        return f"listing {where}: {status} {exc.reason}"
    if isinstance(exc, TimeoutError):
        return f"listing {where}: no answer within {timeout_s:g}s; is the API server up?"
    return f"listing {where}: {type(exc).__name__}: {exc}; is the API server in KUBECONFIG reachable?"
