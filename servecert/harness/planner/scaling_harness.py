"""The Virtual connector's external system, played by the suite, and the ground truth it records.

A planner on the Virtual connector only writes decisions (``servecert.protocol.planner_decisions``); it
takes an external system to start and stop workers. In the process environment that system is
this harness, so the suite — not the planner — decides what "scaled" means and records it:

    planner --put_decision--> store --poll--> ScalingHarness._apply
        removals: deployment.remove_worker (newest first), engine stops ........ "stop"
        additions: deployment.add_worker; the engine starts ..................... "start"
                   (holds its GPUs, loads its model for the start-up time), then is
                   registered and serving when add_worker returns ............... "ready"
        (a decision's removals and additions run at once, as an operator applies replica counts)
    --put_scaled_decision_id--> store --> planner may decide again

How the external system acknowledges is the scenario's to choose (seed 003: "Planner sees
scaled_decision_id >= decision_id and proceeds"; "If scaling isn't acknowledged within 1800s
(configurable), the planner proceeds with new decisions anyway"): at once (default), ``ack_delay_s``
real seconds after carrying a decision out (the loop keeps polling meanwhile, so a decision written
before the acknowledgement is seen when it is written), or never (``acknowledge=False``: a dead
system that records decisions and carries out none).

Every event is stamped with the real time since the scenario's start (``t0``). The verdicts read
``EngineEvent``s — which engines existed, loading or serving, when — never the planner's own
account: ``ready_counts`` (serving workers over time), ``held_counts`` (workers holding GPUs:
loading or serving), ``gpu_seconds``, and the ``decisions`` as written with the moment each was
seen and acknowledged. A failing add or remove is kept in ``errors`` and the decision is not
acknowledged (a real orchestrator that failed would not claim success either).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from servecert.adapters.contract import PlannedDeployment, WorkerRef, WorkerSpec
from servecert.protocol import event_loop
from servecert.protocol.planner_decisions import ScalingDecision

log = logging.getLogger("servecert.planner_harness")
COMPONENTS = ("prefill", "decode")
AGG_ROLE = "agg"  # aggregated workers are the decode component (seed 003 "--mode agg"; Dynamo scales them as decode)
START, READY, STOP = "start", "ready", "stop"


def component_of(role: str) -> str:
    return "decode" if role == AGG_ROLE else role


@dataclass(frozen=True)
class EngineEvent:
    t: float
    component: str
    kind: str  # START | READY | STOP
    engine_id: str


@dataclass
class DecisionRecord:
    seen_t: float
    decision: ScalingDecision
    acked_t: float | None = None


class EngineViews:
    """Ground-truth views over ``events`` (EngineEvents) and ``gpus_per_engine``, shared by every scaling record."""

    events: list[EngineEvent]
    gpus_per_engine: Mapping[str, int]

    def _counts(self, component: str, kinds: tuple[str, str]) -> list[tuple[float, int]]:
        up, down = kinds
        steps: list[tuple[float, int]] = []
        n = 0
        for e in sorted((e for e in self.events if e.component == component), key=lambda e: e.t):
            if e.kind == up:
                n += 1
            elif e.kind == down and (up == START or any(x.kind == READY and x.engine_id == e.engine_id for x in self.events)):
                n -= 1
            else:
                continue
            if steps and steps[-1][0] == e.t:
                steps[-1] = (e.t, n)
            else:
                steps.append((e.t, n))
        return steps

    def startups(self) -> list[float]:
        """Seconds each engine started after t=0 took from its start to ready (the ones there at t=0 are left out)."""
        started = {e.engine_id: e.t for e in self.events if e.kind == START and e.t > 0}
        return [e.t - started[e.engine_id] for e in self.events if e.kind == READY and e.engine_id in started]

    def ready_counts(self, component: str) -> list[tuple[float, int]]:
        """(time, serving workers) at every change."""
        return self._counts(component, (READY, STOP))

    def held_counts(self, component: str) -> list[tuple[float, int]]:
        """(time, workers holding GPUs: loading or serving) at every change."""
        return self._counts(component, (START, STOP))

    def gpu_timeline(self) -> list[tuple[float, int]]:
        times = sorted({t for c in COMPONENTS for t, _ in self.held_counts(c)})
        return [(t, sum(count_at(self.held_counts(c), t) * self.gpus_per_engine[c] for c in COMPONENTS)) for t in times]

    def gpu_seconds(self, until: float) -> float:
        """GPU-seconds held from t=0 to ``until`` (real seconds)."""
        line = self.gpu_timeline()
        total = 0.0
        for (t, g), (t_next, _) in zip(line, [*line[1:], (until, 0)], strict=False):
            total += g * max(0.0, min(t_next, until) - t)
        return total


@dataclass
class ScalingHarness(EngineViews):
    deployment: PlannedDeployment
    templates: Mapping[str, WorkerSpec]  # component -> the worker spec of a new worker (aggregated: decode only)
    gpus_per_engine: Mapping[str, int]
    t0: float = field(default_factory=time.monotonic)
    poll_s: float = 0.01
    ack_delay_s: float = 0.0
    acknowledge: bool = True
    events: list[EngineEvent] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    live: dict[str, list[WorkerRef]] = field(default_factory=dict)
    _handled: int = -1
    _task: asyncio.Task[None] | None = None
    _acks: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self) -> None:
        """Adopt the deployment's current workers (started and ready at t=0) and begin polling."""
        for component in COMPONENTS:
            self.live[component] = [w for w in self.deployment.workers if component_of(w.role) == component]
            for w in self.live[component]:
                self.events += [EngineEvent(0.0, component, START, w.engine_id), EngineEvent(0.0, component, READY, w.engine_id)]
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="scaling-harness")

    async def close(self) -> None:
        await event_loop.cancel(self._task)
        self._task = None
        for task in list(self._acks):
            await event_loop.cancel(task)

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def _loop(self) -> None:
        store = self.deployment.decisions
        while True:
            decision = await store.get_decision()
            if decision is not None and decision.decision_id > self._handled:
                record = DecisionRecord(self.now(), decision)
                self.decisions.append(record)
                self._handled = decision.decision_id
                if self.acknowledge and await self._apply(decision):
                    task = asyncio.get_running_loop().create_task(self._ack(record), name=f"ack-{decision.decision_id}")
                    self._acks.add(task)
                    task.add_done_callback(self._acks.discard)
            await asyncio.sleep(self.poll_s)

    async def _ack(self, record: DecisionRecord) -> None:
        if self.ack_delay_s > 0:
            await asyncio.sleep(self.ack_delay_s)
        record.acked_t = self.now()
        await self.deployment.decisions.put_scaled_decision_id(record.decision.decision_id)

    async def _apply(self, decision: ScalingDecision) -> bool:
        targets = {"prefill": decision.num_prefill_workers, "decode": decision.num_decode_workers}
        try:
            for component, target in targets.items():
                if target and component not in self.templates:
                    raise ValueError(
                        f"the decision asks for {target} {component} workers, but this deployment has no {component} component "
                        f"(aggregated: its one worker set is scaled through num_decode_workers)"
                    )
            removals = []
            for component, target in targets.items():
                live = self.live[component]
                while target is not None and len(live) > target:
                    ref = live.pop()
                    # NB: stamped when removal starts: the worker stops serving then; the engine's shutdown grace follows.
                    self.events.append(EngineEvent(self.now(), component, STOP, ref.engine_id))
                    removals.append(self.deployment.remove_worker(ref))
            adds = [self._add(c) for c, target in targets.items() if target is not None for _ in range(target - len(self.live[c]))]
            # NB: one decision's removals and additions together, as an operator applies both replica counts at once:
            # adding only after a removed worker had exited delayed a mixed decision's new worker by its exit (2.4 s).
            await asyncio.gather(*removals, *adds)
        except Exception as exc:
            self.errors.append(f"decision {decision.decision_id}: {exc!r}")
            log.exception("harness could not carry out decision %s", decision)
            return False
        return True

    async def _add(self, component: str) -> None:
        started = self.now()
        ref = await self.deployment.add_worker(self.templates[component])
        self.events += [EngineEvent(started, component, START, ref.engine_id), EngineEvent(self.now(), component, READY, ref.engine_id)]
        self.live[component].append(ref)


def count_at(steps: list[tuple[float, int]], t: float) -> int:
    """The value of a step function ``[(time, value), ...]`` at ``t`` (0 before the first step)."""
    value = 0
    for at, n in steps:
        if at > t:
            break
        value = n
    return value
