"""The reference operator's ClusterRole: only the verbs its handlers use (issue: least privilege).

Reads: its resources (watch), pods (watch, to inject topology and count readiness), nodes (get,
the injector's source of truth; list only for the broken before-binding variant), ClusterTopology
(get), the ClusterTopology CRD (get: "Grove installed?"), namespaces (list/watch; kept for
kopf's namespace patterns, which the reference no longer uses: it watches cluster-wide and filters
by namespace itself, see ``handlers``). Writes: pods (create, delete, patch labels), an InferenceService's headless Services (list, create,
delete), PodGroups, the status
subresources, Events (create only: one per rollout step). Nothing else: no secrets, no webhook
configurations (the installer, with admin rights, registers the webhook).
"""

from __future__ import annotations

from typing import Any

from servecert.protocol import kube_names as kn

WATCH = ["get", "list", "watch"]


def cluster_role(name: str) -> dict[str, Any]:
    rules = [
        {"apiGroups": [kn.DGD_GROUP], "resources": [kn.DGD_PLURAL], "verbs": [*WATCH, "patch"]},
        {"apiGroups": [kn.DGD_GROUP], "resources": [f"{kn.DGD_PLURAL}/status"], "verbs": ["get", "patch"]},
        {"apiGroups": [kn.IS_GROUP], "resources": [kn.IS_PLURAL], "verbs": [*WATCH, "patch"]},
        {"apiGroups": [kn.IS_GROUP], "resources": [f"{kn.IS_PLURAL}/status"], "verbs": ["get", "patch"]},
        {"apiGroups": [kn.CT_GROUP], "resources": [kn.CT_PLURAL], "verbs": ["get"]},
        # NB: get only: with list/watch kopf follows every CRD change and restarts its watches (a ~30 s stall seen in CI).
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": [*WATCH, "create", "delete", "patch"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "create", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [kn.PG_GROUP], "resources": [kn.PG_PLURAL], "verbs": ["get", "create", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
