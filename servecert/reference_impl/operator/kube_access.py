"""The operator's API access: one kubernetes ApiClient from a kubeconfig, and kopf's login from the same file.

The operator is given a kubeconfig holding its ServiceAccount token (the suite's installer
writes it), so every call it makes is checked against its ClusterRole (``rbac.py``), never admin.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import kopf
import yaml
from kubernetes import client, config


def api_client(kubeconfig: Path) -> Any:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    return client.ApiClient(configuration)


def connection_info(kubeconfig: Path) -> kopf.ConnectionInfo:
    """kopf's credentials from the current context of ``kubeconfig`` (token or client cert)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    context_name = doc.get("current-context")
    context = next(c["context"] for c in doc["contexts"] if c["name"] == context_name)
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    ca_data = cluster.get("certificate-authority-data")
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_path=cluster.get("certificate-authority"),
        ca_data=base64.b64decode(ca_data) if ca_data else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        token=user.get("token"),
        certificate_path=user.get("client-certificate"),
        private_key_path=user.get("client-key"),
        default_namespace=context.get("namespace"),
    )
