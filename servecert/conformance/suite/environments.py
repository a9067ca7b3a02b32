"""Where a case runs: a fresh environment per case, created by name.

``process``: fake engines on loopback addresses in the suite's own process
(``servecert.harness.process_env.ProcessEnvironment``); router and planner profiles run here in seconds.
``cluster``: a namespace on a Kubernetes cluster where the implementation's operator runs
(``servecert.harness.cluster_env``). The cluster is provided once per process — by the plugin, which
starts or joins the embedded cluster for a ``--env cluster`` run, or by a test through
``use_cluster`` — and the operator is installed once per implementation on first use and
removed by ``close_sessions``. Each case gets its own environment so no engine, port, namespace
or ground-truth record leaks from one case to the next.

Every step of that setup that can fail (the cluster's bring-up, the operator's install, the
case's namespace) raises ``phases.SetupFailed`` naming the step, its time and its log, so the
report says where setup stopped. A bring-up that failed is not tried again by every later case
of the run: they fail at once, quoting the first failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from servecert.conformance.suite import phases

if TYPE_CHECKING:
    from servecert.harness.cluster.backends import Cluster
    from servecert.harness.cluster_env import ClusterSession
    from servecert.harness.environment import SuiteEnvironment


KNOWN = ("process", "cluster")
AVAILABLE = ("process", "cluster")
_cluster: Cluster | None = None
_provider: Callable[[], Cluster] | None = None
_sessions: dict[int, tuple[object, ClusterSession]] = {}
_bring_up_failed: phases.SetupFailed | None = None
T = TypeVar("T")


class EnvironmentUnavailable(Exception):
    """The environment is known but cannot be created here; the message says which ones can."""


def check_available(name: str) -> None:
    if name not in KNOWN:
        raise EnvironmentUnavailable(f"unknown environment {name!r}; known: {', '.join(KNOWN)}")
    if name not in AVAILABLE:
        raise EnvironmentUnavailable(f"the {name} environment is not available yet; available: {', '.join(AVAILABLE)}")


def unavailable_reason(name: str) -> str:
    """Why a test that runs only in ``name`` cannot run here (empty when it can)."""
    return "" if name in AVAILABLE else f"the {name} environment is not available yet"


def use_cluster(cluster: Cluster | None) -> None:
    """The cluster later ``cluster`` environments use (None: forget it, after closing sessions)."""
    global _cluster
    _cluster = cluster


def provide_cluster(provider: Callable[[], Cluster] | None) -> None:
    """Start (or join) a cluster through ``provider`` the first time a case needs one."""
    global _provider, _bring_up_failed
    _provider = provider
    _bring_up_failed = None


def _step(step: str, call: Callable[[], T]) -> T:
    """``call()``, its failure raised as ``SetupFailed`` naming ``step`` and how long it took."""
    started = time.monotonic()
    try:
        return call()
    except phases.SetupFailed:
        raise
    except Exception as exc:
        raise phases.SetupFailed(step, exc, time.monotonic() - started) from exc


def _provided(provider: Callable[[], Cluster]) -> Cluster:
    global _bring_up_failed
    if _bring_up_failed is not None:
        first = _bring_up_failed
        cause = RuntimeError(f"it failed earlier in this run, after {first.elapsed_s:.1f} s: {first.cause}")
        raise phases.SetupFailed(phases.CLUSTER_BRING_UP, cause, 0.0, first.log)
    try:
        return _step(phases.CLUSTER_BRING_UP, provider)
    except phases.SetupFailed as exc:
        _bring_up_failed = exc
        raise


def close_sessions() -> None:
    """Stop every operator this process installed."""
    while _sessions:
        _key, (_impl, session) = _sessions.popitem()
        session.close()


def _session(implementation: Any) -> ClusterSession:
    from servecert.harness.cluster_env import ClusterSession, ClusterUnavailable

    if _cluster is None and _provider is not None:
        use_cluster(_provided(_provider))
    if _cluster is None:
        raise ClusterUnavailable(
            "no cluster for the cluster environment: run through `servecert certify --env cluster` or call use_cluster()"
        )
    found = _sessions.get(id(implementation))
    if found is None:
        cluster = _cluster
        found = (implementation, _step(phases.OPERATOR_INSTALL, lambda: ClusterSession.start(cluster, implementation)))
        _sessions[id(implementation)] = found
    return found[1]


def create(name: str, implementation: Any = None) -> SuiteEnvironment:
    """A fresh environment for one case (call its ``close()`` afterwards)."""
    check_available(name)
    if name == "cluster":
        from servecert.harness.cluster_env import ClusterEnvironment

        session = _session(implementation)
        return _step(phases.CASE_NAMESPACE, lambda: ClusterEnvironment(session))
    from servecert.harness.process_env import ProcessEnvironment

    return ProcessEnvironment()
