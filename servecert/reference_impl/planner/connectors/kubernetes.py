"""The Kubernetes connector: the planner patches the DGD's replicas and the operator does the rest.

Seed 003 (Connector Design, KubernetesConnector): "Directly PATCHes the DGD resource to update
replica counts. The operator watches for DGD changes and reconciles component deployments"; it
"Resolves services by subComponentType field (prefill/decode), with fallback to legacy component
names" and "Validates deployment structure on startup: checks that prefill and decode services
exist and model names match".

``validate()`` (at start-up) reads the DynamoGraphDeployment and resolves the components it
scales by their ``type`` (this CRD's subComponentType): prefill and decode, or in aggregated mode
the one ``worker`` set, scaled as the decode component; a DGD with no component of a type falls
back to a component named after it. Two components of one type, a missing one, or workers whose
``--model`` arguments differ raise ``DeploymentShapeError`` naming what to fix.
``asked()`` reads those components' replicas: a planner that starts beside workers still loading
plans from what the DGD asks for, not from the few registered yet. ``scale_to(prefill, decode)``
patches ``spec.components[i].replicas`` when the counts differ (a JSON patch guarded by a
``test`` of each component's name, so a concurrent reorder is refused, not overwritten).
``in_progress`` is the pending-desired guard: true while the operator has not observed the latest
generation or a scaled component has fewer ready replicas than asked for (the operator's
``status.components[name].readyReplicas``). The kubernetes client is synchronous; every call runs
in a thread with a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from servecert.protocol import kube_names as kn
from servecert.reference_impl.planner.config import AGG
from servecert.reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED

log = logging.getLogger("servecert.planner.kubernetes")
TIMEOUT_S = 10
PREFILL, DECODE = "prefill", "decode"
AGG_TYPE = "worker"
"""The DGD component type of aggregated workers: in ``--mode agg`` the planner scales it as decode."""


class DeploymentShapeError(LookupError):
    """The DGD is not a graph this planner can scale; the message names the components and what to change."""


Components = dict[str, int]
"""The planner's component (prefill, decode) -> its index in ``spec.components``."""
Resolve = Callable[[Sequence[Mapping[str, Any]], str], Components]


def by_type(components: Sequence[Mapping[str, Any]], mode: str) -> Components:
    """Seed 003: by subComponentType, with fallback to the legacy names; raises ``DeploymentShapeError``."""
    wanted = {DECODE: AGG_TYPE} if mode == AGG else {PREFILL: PREFILL, DECODE: DECODE}
    found: Components = {}
    for role, ctype in wanted.items():
        typed = [i for i, c in enumerate(components) if c.get("type") == ctype]
        named = [i for i, c in enumerate(components) if c.get("name") == role]
        chosen = typed or named
        if len(chosen) != 1:
            names = [f"{c.get('name')} ({c.get('type')})" for c in components]
            why = "several" if len(chosen) > 1 else "no"
            raise DeploymentShapeError(
                f"{why} component(s) of type {ctype!r} (or, lacking one, named {role!r}) to scale as {role}; components: "
                f"{names}. Give the graph exactly one {ctype} component."
            )
        found[role] = chosen[0]
    return found


def model_of(component: Mapping[str, Any]) -> str | None:
    """The ``--model`` (or ``--model=``) argument of a component's container, None when it names none."""
    args = [str(a) for a in component.get("args") or []]
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return None


@dataclass
class KubernetesConnector:
    api: Any
    namespace: str
    dgd: str
    mode: str = "disagg"
    resolve: Resolve = by_type
    check_models: bool = True
    """Seed 003's start-up check that the scaled components serve one model (False: a broken planner skips it)."""
    components: dict[str, str] = field(default_factory=dict)
    """The planner's component -> the DGD component's name, resolved by ``validate``."""

    @property
    def _custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    async def _read(self) -> dict[str, Any]:
        found: dict[str, Any] = await asyncio.to_thread(
            self._custom.get_namespaced_custom_object,
            kn.DGD_GROUP,
            kn.DGD_VERSION,
            self.namespace,
            kn.DGD_PLURAL,
            self.dgd,
            _request_timeout=TIMEOUT_S,
        )
        return found

    async def validate(self) -> dict[str, str]:
        """Resolve the scaled components once, at start-up; raises ``DeploymentShapeError`` naming what to fix."""
        components = (await self._read())["spec"]["components"]
        resolved = self.resolve(components, self.mode)
        models = {role: model_of(components[i]) for role, i in resolved.items()}
        if self.check_models and len({m for m in models.values() if m is not None}) > 1:
            raise DeploymentShapeError(f"DGD {self.namespace}/{self.dgd}: the scaled components serve different models {models}")
        self.components = {role: str(components[i]["name"]) for role, i in resolved.items()}
        return self.components

    def _indexes(self, dgd: dict[str, Any]) -> dict[str, int]:
        """The resolved components' indexes now (a reorder since start-up is followed; a removal is an error)."""
        names = [str(c["name"]) for c in dgd["spec"]["components"]]
        if not self.components or any(name not in names for name in self.components.values()):
            raise DeploymentShapeError(
                f"DGD {self.namespace}/{self.dgd} has none of {sorted(self.components.values()) or 'the resolved components'} "
                f"(validate() resolves them at start-up); its components: {names}"
            )
        return {role: names.index(name) for role, name in self.components.items()}

    async def in_progress(self) -> bool:
        dgd = await self._read()
        status = dgd.get("status") or {}
        if status.get("observedGeneration", 0) < dgd["metadata"].get("generation", 1):
            return True
        for index in self._indexes(dgd).values():
            component = dgd["spec"]["components"][index]
            wanted = int(component.get("replicas", 1))
            ready = int(((status.get("components") or {}).get(component["name"]) or {}).get("readyReplicas", 0))
            if ready < wanted:
                return True
        return False

    async def asked(self) -> tuple[int, int] | None:
        """The DGD's replicas of the scaled components (aggregated: prefill 0): what the operator is making real."""
        dgd = await self._read()
        spec = dgd["spec"]["components"]
        counts = {role: int(spec[i].get("replicas", 1)) for role, i in self._indexes(dgd).items()}
        return counts.get(PREFILL, 0), counts.get(DECODE, 0)

    async def timed_out(self) -> bool:
        """Never: the operator carries out every patch of the DGD, however long it takes."""
        return False

    async def scale_to(self, prefill: int, decode: int) -> str:
        dgd = await self._read()
        indexes = self._indexes(dgd)
        asked = {PREFILL: prefill, DECODE: decode}
        targets = {role: asked[role] for role in indexes}
        spec = dgd["spec"]["components"]
        current = {role: int(spec[i].get("replicas", 1)) for role, i in indexes.items()}
        if current == targets:
            return UNCHANGED
        if await self.in_progress():
            log.info("previous scaling of %s/%s not carried out yet; skipping", self.namespace, self.dgd)
            return AWAITING_ACK
        ops: list[dict[str, Any]] = []
        for role, index in indexes.items():
            ops.append({"op": "test", "path": f"/spec/components/{index}/name", "value": spec[index]["name"]})
            ops.append({"op": "replace", "path": f"/spec/components/{index}/replicas", "value": targets[role]})
        await asyncio.to_thread(
            self._custom.patch_namespaced_custom_object,
            kn.DGD_GROUP,
            kn.DGD_VERSION,
            self.namespace,
            kn.DGD_PLURAL,
            self.dgd,
            ops,
            _request_timeout=TIMEOUT_S,
            _content_type="application/json-patch+json",
        )
        log.info("scaled %s/%s to %s", self.namespace, self.dgd, ", ".join(f"{r}={n}" for r, n in targets.items()))
        return ISSUED
