"""Installing an operator on a cluster for the suite: RBAC, a token, a TLS webhook registered by URL, the process.

Data flow (``install``, with the suite's admin credentials)::

    Namespace servecert-system-<id>, ServiceAccount, ClusterRole (the operator's own rbac.py), binding
    TokenRequest for the ServiceAccount -> <dir>/kubeconfig        (the operator never runs as admin)
    openssl: self-signed cert for IP 127.0.0.1 -> <dir>/tls.{crt,key}
    ValidatingWebhookConfiguration servecert-operator-<id>: url https://127.0.0.1:<port>/<handler>,
        caBundle = the cert, namespaceSelector servecert.io/operator-instance=<id>
    process: python -m servecert operator run ... --namespaces sc-<id>-*
    <dir> = <cache root>/operators/<id>-*/ (operator.log; the newest 20 are kept; the cache root
            is $SERVECERT_CACHE, else ~/.cache/servecert)
    wait until the webhook port answers

Why scoped by an instance id: the suite's xdist workers and its self-tests with broken operators
share one cluster; each operator watches only namespaces ``sc-<id>-*`` and its webhook only sees
namespaces labelled with its id, so two operators never act on the same object. ``close`` ends
the process (by pid) and removes everything ``install`` created.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.harness.cluster import binaries
from servecert.protocol import waiting
from servecert.reference_impl.operator import handlers, rbac, run

INSTANCE_LABEL = "servecert.io/operator-instance"
SERVICE_ACCOUNT = "servecert-operator"
READY_TIMEOUT_S = 60.0
KEEP_DIRS = 20  # the newest operator directories (logs, token kubeconfig, TLS) kept for debugging
STOP_TIMEOUT_S = 10.0


class OperatorInstallError(RuntimeError):
    """The operator could not be installed or did not come up; the message quotes its log."""


@dataclass
class InstalledOperator:
    instance: str
    namespace_prefix: str
    directory: Path
    process: subprocess.Popen[bytes]
    api: Any
    port: int
    created: list[tuple[str, str]] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)
    """How it was started: ``start_again`` starts it the same way."""

    @property
    def log_path(self) -> Path:
        return self.directory / "operator.log"

    def namespace_labels(self) -> dict[str, str]:
        return {INSTANCE_LABEL: self.instance}

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL the process, mid-whatever, and wait until it is gone (``contract.RestartableOperator``)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_TIMEOUT_S)

    def start_again(self) -> None:
        """Start it as it was started; back when its webhook answers."""
        self.process = _spawn(self.argv, self.log_path)
        wait_ready(self, self.port)

    def restart(self) -> None:
        """Kill it and start it again with the same arguments."""
        self.kill()
        self.start_again()

    def close(self) -> None:
        _stop(self.process)
        _delete_created(self.api, self.created)  # NB: its webhook first: with it, a PATCH of its objects would fail
        _release_objects(self.api, self.namespace_prefix)


def operators_dir() -> Path:
    """Where each operator keeps its kubeconfig, certificate and log: under the cache root
    (``$SERVECERT_CACHE``), so a run pointed at an empty cache leaves nothing in ``~/.cache``."""
    return binaries.cache_root() / "operators"


def _prune(base: Path) -> None:
    dirs = sorted((d for d in base.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime, reverse=True)
    for old in dirs[KEEP_DIRS:]:
        shutil.rmtree(old, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    cmd = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
    cmd += ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise OperatorInstallError(f"openssl could not make the webhook certificate: {done.stderr.strip()}")
    return cert, key


def _token_kubeconfig(api: Any, namespace: str, directory: Path) -> Path:
    request = {"spec": {"expirationSeconds": 86400}}
    token = client.CoreV1Api(api).create_namespaced_service_account_token(SERVICE_ACCOUNT, namespace, request).status.token
    conf = api.configuration
    ca = Path(conf.ssl_ca_cert).read_bytes() if conf.ssl_ca_cert else b""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": conf.host, "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "c", "user": SERVICE_ACCOUNT}}],
        "current-context": "operator",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def _webhook_configuration(instance: str, port: int, cert: Path) -> dict[str, Any]:
    ca = base64.b64encode(cert.read_bytes()).decode()

    def hook(handler_id: str, group: str, version: str, plural: str) -> dict[str, Any]:
        return {
            "name": f"{handler_id}.{instance}.servecert.io",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/{handler_id}", "caBundle": ca},
            "rules": [{"apiGroups": [group], "apiVersions": [version], "resources": [plural], "operations": ["CREATE", "UPDATE"]}],
            "namespaceSelector": {"matchLabels": {INSTANCE_LABEL: instance}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"servecert-operator-{instance}"},
        "webhooks": [
            hook(handlers.VALIDATE_DGD, *handlers.DGD[:2], handlers.DGD[2]),
            hook(handlers.VALIDATE_ISVC, *handlers.ISVC[:2], handlers.ISVC[2]),
        ],
    }


def operator_argv(directory: Path, prefix: str, port: int, behaviour: str | None) -> list[str]:
    argv = [sys.executable, "-m", "servecert", "operator", "run", "--kubeconfig", str(directory / "kubeconfig")]
    argv += [
        "--namespaces",
        f"{prefix}*",
        "--webhook-port",
        str(port),
        "--cert",
        str(directory / "tls.crt"),
        "--key",
        str(directory / "tls.key"),
    ]
    return argv + (["--behaviour", behaviour] if behaviour else [])


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def install(api: Any, behaviour: str | None = None, root: Path | None = None) -> InstalledOperator:
    """Install and start an operator."""
    instance = uuid.uuid4().hex[:8]
    base = root or operators_dir()
    base.mkdir(parents=True, exist_ok=True)
    _prune(base)
    directory = Path(tempfile.mkdtemp(prefix=f"{instance}-", dir=base))
    system_ns = f"servecert-system-{instance}"
    created: list[tuple[str, str]] = []
    try:
        _create_rbac(api, instance, system_ns, created)
        _token_kubeconfig(api, system_ns, directory)
        cert, _key = _self_signed(directory)
        port = _free_port()
        webhook = _webhook_configuration(instance, port, cert)
        client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(webhook)
        created.append(("webhook", webhook["metadata"]["name"]))
        argv = operator_argv(directory, f"sc-{instance}-", port, behaviour)
        process = _spawn(argv, directory / "operator.log")
    except BaseException:
        _delete_created(api, created)
        raise
    operator = InstalledOperator(instance, f"sc-{instance}-", directory, process, api, port, created, argv)
    try:
        wait_ready(operator, port)
    except BaseException:
        operator.close()
        raise
    return operator


def wait_ready(operator: InstalledOperator, port: int, timeout: float = READY_TIMEOUT_S) -> None:
    def listening() -> bool:
        if not operator.alive():
            raise OperatorInstallError(
                f"the operator exited with {operator.process.returncode}; log {operator.log_path}:\n{operator.log_tail()}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
        return False

    waiting.until(
        listening,
        timeout_s=timeout,
        what=f"the operator's webhook to listen on 127.0.0.1:{port}",
        interval_s=0.2,
        describe=lambda: f"log {operator.log_path}:\n{operator.log_tail()}",
        error=OperatorInstallError,
    )


def _create_rbac(api: Any, instance: str, system_ns: str, created: list[tuple[str, str]]) -> None:
    core, authz = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespace({"metadata": {"name": system_ns}})
    created.append(("namespace", system_ns))
    core.create_namespaced_service_account(system_ns, {"metadata": {"name": SERVICE_ACCOUNT}})
    role = rbac.cluster_role(f"servecert-operator-{instance}")
    authz.create_cluster_role(role)
    created.append(("clusterrole", role["metadata"]["name"]))
    binding = {
        "metadata": {"name": role["metadata"]["name"]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": system_ns}],
    }
    authz.create_cluster_role_binding(binding)
    created.append(("clusterrolebinding", role["metadata"]["name"]))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)


def _release_objects(api: Any, namespace_prefix: str) -> None:
    """Remove the stopped operator's finalizer from the DGDs and InferenceServices left in its namespaces.

    Each instance has a finalizer of its own (``run.finalizer_of``), so no other operator removes it:
    an object still being deleted when its operator stopped would keep its namespace Terminating.
    """
    finalizer = run.finalizer_of([f"{namespace_prefix}*"])
    custom = client.CustomObjectsApi(api)
    for group, version, plural in (handlers.DGD, handlers.ISVC):
        with contextlib.suppress(ApiException):
            for obj in custom.list_cluster_custom_object(group, version, plural).get("items", []):
                meta = obj["metadata"]
                kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
                if meta["namespace"].startswith(namespace_prefix) and kept != (meta.get("finalizers") or []):
                    with contextlib.suppress(ApiException):
                        patch = {"metadata": {"finalizers": kept or None, "resourceVersion": meta["resourceVersion"]}}
                        custom.patch_namespaced_custom_object(group, version, meta["namespace"], plural, meta["name"], patch)


def _delete_created(api: Any, created: list[tuple[str, str]]) -> None:
    deleters = {
        "webhook": client.AdmissionregistrationV1Api(api).delete_validating_webhook_configuration,
        "clusterrolebinding": client.RbacAuthorizationV1Api(api).delete_cluster_role_binding,
        "clusterrole": client.RbacAuthorizationV1Api(api).delete_cluster_role,
        "namespace": client.CoreV1Api(api).delete_namespace,
    }
    for kind, name in reversed(created):
        with contextlib.suppress(ApiException):
            deleters[kind](name)
    created.clear()
