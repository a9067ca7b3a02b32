"""One P/D router behind the vendor contract: what it declares, and where each environment deploys it.

In process the router runs beside the suite's fake engines (``deployment``); on a cluster it finds
labelled engine pods through its own service discovery (``discovery``, which builds on
``deployment``). This module sits above both, so neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servecert.adapters.contract import ClusterEnvironment, Deployment, DeploymentSpec, Environment, ImplementationMetadata, NoOperator
from servecert.adapters.pd_routers import deployment, discovery
from servecert.adapters.pd_routers.deployment import RouterDeployment, RouterKind


@dataclass
class RouterImplementation:
    """One router behind the adapter contract: what it declares, and ``deploy`` through ``kind``."""

    kind: RouterKind
    metadata: ImplementationMetadata
    supported_features: frozenset[str]

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> RouterDeployment:
        return await deployment.deploy(self.kind, spec, env)

    def install_operator(self, api: Any) -> NoOperator:
        """Nothing: the router ships no operator; on a cluster it finds the engine pods itself (``pd_routers.discovery``)."""
        return NoOperator(f"sc-{self.kind.name}-")

    async def deploy_on_cluster(self, spec: DeploymentSpec, env: ClusterEnvironment) -> Deployment:
        return await discovery.deploy(self.kind, spec, env)
