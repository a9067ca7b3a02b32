"""PLANNER-SCALING's ground truth on a cluster: the worker pods as the API server had them, and the DGD's patches.

In the process environment the suite's ``ScalingHarness`` starts and stops every engine and
records it. On a cluster the implementation's planner patches the DGD and its operator makes the
pods, so the record comes from the suite's own watch of the namespace (``PodHistory``), stamped
when each pod version arrived:

    a worker pod first seen, not terminating ........................... "start" (it holds its GPUs)
    its Ready condition first True (its engine answers /health) ........ "ready"
    its deletionTimestamp set, or the pod gone ......................... "stop" (it stops serving)

and the DGD read every ``DGD_POLL_S``: each change of the scaled components' ``replicas`` is a
``DecisionRecord`` (``decision_id`` = the DGD's generation), as the planner wrote it to the API
server. The views (``ready_counts``, ``held_counts``, ``gpu_seconds``) are the harness's
(``EngineViews``), so every PLANNER-SCALING check reads both environments alike. Pods that were
there when the record started count from t=0.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from servecert.conformance.utils.kube import PodHistory
from servecert.harness.cluster import kube
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.harness.cluster_planned import DECODE_COMPONENT, PREFILL_COMPONENT, component_of
from servecert.harness.planner.scaling_harness import READY, START, STOP, DecisionRecord, EngineEvent, EngineViews
from servecert.protocol import event_loop, kube_objects
from servecert.protocol import kube_names as kn
from servecert.protocol.planner_decisions import ScalingDecision

DGD_POLL_S = 0.1
LISTED = "LISTED"
"""``PodHistory``'s kind for the pods there when it started: they count from t=0, as the harness's first workers do."""


@dataclass
class PodScaling(EngineViews):
    env: ClusterEnvironment
    dgd: str
    gpus_per_engine: Mapping[str, int]
    t0: float = field(default_factory=time.monotonic)
    decisions: list[DecisionRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _pods: PodHistory | None = None
    _task: asyncio.Task[None] | None = None
    _closed: list[EngineEvent] | None = None
    """The events, converted once when the record closed: every view reads them many times."""

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        self._pods = PodHistory(self.env).start()
        self._task = asyncio.get_running_loop().create_task(self._watch_dgd(), name=f"dgd-{self.dgd}")

    async def close(self) -> None:
        await event_loop.cancel(self._task)
        self._task = None
        if self._pods is not None:
            await asyncio.to_thread(self._pods.stop)
        self._closed = self._convert()

    @property
    def events(self) -> list[EngineEvent]:  # type: ignore[override]
        """The worker pods' starts, readiness and stops, from the watch, in seconds since ``t0``."""
        return self._closed if self._closed is not None else self._convert()

    def _convert(self) -> list[EngineEvent]:
        history = list(self._pods.events) if self._pods is not None else []
        out: list[EngineEvent] = []
        seen: dict[str, set[str]] = {}
        for received, kind, pod in history:
            meta = pod["metadata"]
            component = component_of(pod)
            if component is None or (meta.get("labels") or {}).get(kn.DGD_NAME_LABEL) != self.dgd:
                continue
            t = 0.0 if kind == LISTED else max(0.0, received - self.t0)
            name, done = str(meta["name"]), seen.setdefault(str(meta["uid"]), set())
            gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
            for step, now in ((START, not gone), (READY, not gone and kube_objects.condition_true(pod, "Ready")), (STOP, gone)):
                if now and step not in done and (step == START or START in done):
                    done.add(step)
                    out.append(EngineEvent(t, component, step, name))
        return out

    async def _watch_dgd(self) -> None:
        last: tuple[int, int] | None = None
        while True:  # ends with close()
            dgd = await asyncio.to_thread(kube.get_dgd, self.env.api, self.env.namespace, self.dgd)
            counts = _replicas(dgd) if dgd else None
            if counts is not None and counts != last:
                if last is not None:
                    generation = int(dgd["metadata"].get("generation", 0)) if dgd else 0
                    self.decisions.append(DecisionRecord(self.now(), ScalingDecision(counts[0], counts[1], generation)))
                last = counts
            await asyncio.sleep(DGD_POLL_S)


def _replicas(dgd: kube_objects.DynamoGraphDeployment) -> tuple[int, int]:
    """(prefill, decode) replicas of the suite's two worker components (aggregated: no prefill, 0)."""
    found = {str(c["name"]): int(c.get("replicas", 1)) for c in (dgd.get("spec") or {}).get("components") or []}
    return found.get(PREFILL_COMPONENT, 0), found.get(DECODE_COMPONENT, 0)
