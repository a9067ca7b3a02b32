"""What the suite asks of an environment: engines for an adapter, a deployment of a spec, and a close.

The adapter-facing half is the vendor contract's ``Environment`` (start and stop fake engines).
The suite-facing half is here: each environment owns how a ``DeploymentSpec`` becomes a running
deployment there, so the suite's ``TestContext.deploy`` only bounds the call and never switches on
the environment's type:

    process  ProcessEnvironment.deploy -> implementation.deploy(spec, env)      bound deploy_ready_s
    cluster  ClusterEnvironment.deploy -> a DGD the implementation's operator    bound pods_ready_s
             makes real (with a planner: the planned DGD), or the implementation
             deploys pods itself (``DeploysOnCluster``)

The bounds come from the suite's ``Timeouts``; the harness sees only the three it needs
(``DeployBounds``), so it stays below the suite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from servecert.adapters.contract import Deployment, DeploymentSpec, Environment, Implementation

Cleanup = Callable[[], Awaitable[object]]


class DeployBounds(Protocol):
    """The suite's bounds on a deployment (``Timeouts`` has them, and more)."""

    @property
    def deploy_ready_s(self) -> float: ...

    @property
    def pods_ready_s(self) -> float: ...

    @property
    def cluster_routing_grace_s(self) -> float: ...


class SuiteEnvironment(Environment, Protocol):
    """An adapter-facing ``Environment`` the suite can also deploy into and close."""

    def deploy_bound(self, bounds: DeployBounds) -> tuple[float, str]:
        """The bound on ``deploy`` here, and the name of the ``Timeouts`` field it comes from."""
        ...

    async def deploy(
        self, spec: DeploymentSpec, implementation: Implementation, bounds: DeployBounds, add_cleanup: Callable[[Cleanup], None]
    ) -> Deployment:
        """``spec`` deployed here by ``implementation``; what it started is handed to ``add_cleanup`` (even on failure)."""
        ...

    async def close(self) -> None: ...
