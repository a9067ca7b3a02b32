"""The Kubernetes connector: the planner patches the DGD's replicas and the operator does the rest.

``scale_to(prefill, decode)`` reads the DynamoGraphDeployment, and when the counts differ
patches ``spec.components[i].replicas`` of the prefill and decode components (a JSON patch
guarded by a ``test`` of the current value, so a concurrent edit is refused, not overwritten).
``in_progress`` is the pending-desired guard: true while the operator has not observed the
latest generation or a scaled component has fewer ready replicas than asked for (the operator's
``status.components[name].readyReplicas``). The kubernetes client is synchronous; every call
runs in a thread with a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from protocol import kube_names as kn
from reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED

log = logging.getLogger("servecert.planner.kubernetes")
TIMEOUT_S = 10


@dataclass
class KubernetesConnector:
    api: Any
    namespace: str
    dgd: str
    prefill_component: str = "prefill"
    decode_component: str = "decode"

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

    def _indexes(self, dgd: dict[str, Any]) -> dict[str, int]:
        names = [c["name"] for c in dgd["spec"]["components"]]
        missing = [n for n in (self.prefill_component, self.decode_component) if n not in names]
        if missing:
            raise LookupError(f"DGD {self.namespace}/{self.dgd} has no component(s) {missing}; its components: {names}")
        return {n: names.index(n) for n in (self.prefill_component, self.decode_component)}

    async def in_progress(self) -> bool:
        dgd = await self._read()
        status = dgd.get("status") or {}
        if status.get("observedGeneration", 0) < dgd["metadata"].get("generation", 1):
            return True
        for name, index in self._indexes(dgd).items():
            wanted = int(dgd["spec"]["components"][index].get("replicas", 1))
            ready = int(((status.get("components") or {}).get(name) or {}).get("readyReplicas", 0))
            if ready < wanted:
                return True
        return False

    async def timed_out(self) -> bool:
        """Never: the operator carries out every patch of the DGD, however long it takes."""
        return False

    async def scale_to(self, prefill: int, decode: int) -> str:
        dgd = await self._read()
        indexes = self._indexes(dgd)
        targets = {self.prefill_component: prefill, self.decode_component: decode}
        current = {name: int(dgd["spec"]["components"][i].get("replicas", 1)) for name, i in indexes.items()}
        if current == targets:
            return UNCHANGED
        if await self.in_progress():
            log.info("previous scaling of %s/%s not carried out yet; skipping", self.namespace, self.dgd)
            return AWAITING_ACK
        ops: list[dict[str, Any]] = []
        for name, index in indexes.items():
            ops.append({"op": "test", "path": f"/spec/components/{index}/name", "value": name})
            ops.append({"op": "replace", "path": f"/spec/components/{index}/replicas", "value": targets[name]})
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
        log.info("scaled %s/%s to prefill=%d decode=%d", self.namespace, self.dgd, prefill, decode)
        return ISSUED
