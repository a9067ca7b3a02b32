"""Steps shared by the PLANNER-SCALING tests: deploy with a planner, drive a scenario, keep the truth.

A ``Scenario`` is a load shape in simulated seconds whose level is scaled to ``peak_engines``
engines' worth of load (``planner_calibration.ENGINE_RPS`` requests per simulated second per
engine), or a Mooncake trace. ``run`` deploys one prefill and one decode worker with the planner
on the Virtual connector, starts the suite's ``ScalingHarness`` as the external system (new
workers load their model for ``planner_engine_startup_s``), sends the scenario's requests with
the suite's open-loop generator, and returns a ``ScenarioRun``: every request as the client saw
it and every engine as the harness started, served with and stopped it. On a cluster the
implementation's planner scales its DGD itself (``servecert.harness.cluster_planned``; every worker loads
for the start-up time) and the engines' record is the suite's watch of their pods
(``_cluster.PodScaling``); the checks read both alike. All times in a
``ScenarioRun`` are simulated seconds since the scenario started.

A request meets the SLA when its TTFT and TPOT, less what the fake engines serving it ran behind
their timing model (``servecert.harness.planner.host_delay``, from the engines' ground truth), meet the targets:
at time scale 4 a second of CPU the machine withheld from an engine is four seconds of latency no
planner caused, and counting it failed the reference on a busy machine (TPOT 114-125 ms against
100 in ``agg-itl-bound``, where the model gives three engines 54-67).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp

from servecert.adapters.contract import AGG, DISAGG, Deployment, DeploymentSpec, PlannedDeployment, PlannerSpec, WorkerSpec, sends_token_ids
from servecert.conformance.suite.test_case import TestContext
from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.planner_scaling._cluster import PodScaling
from servecert.harness import cpu_priority, gc_deferral, load_generator, observe
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.harness.loop_lag import LoopLag
from servecert.harness.planner import calibration as cal
from servecert.harness.planner.fpm_record import FpmRecord
from servecert.harness.planner.host_delay import Behind, HostDelays, pod_records
from servecert.harness.planner.scaling_harness import AGG_ROLE, COMPONENTS, START, ScalingHarness, count_at
from servecert.load.shapes import Shape
from servecert.load.shapes.trace import TraceReplay

DEFAULT_BUDGET = 10
FIGURES_ENV = "SERVECERT_PLANNER_FIGURES"
ALGORITHM_JUDGED_IN = frozenset({"process"})
"""Where the rules of the planner's own algorithm are judged (load rules, floor, bounds, stability, settled SLA): the
process environment, which drives the same planner code and scenarios through the Virtual connector. A cluster adds
the Kubernetes connector, pods and the operator, and judges them in the tests that need them
(``PlannerScalesItsOwnDgdByType``, ``PlannerValidatesItsDgdAtStartUp``, ``PlannerScalingStepReachesSla`` with real
start-ups, ``PlannerScalingGpuBudgetNeverExceeded`` on the pods' GPUs); judging every algorithm rule again there
added nothing to them and cost about 9 minutes of each ``make certify``, in which a busy machine's slow pods, not the
planner, failed scale-down deadlines (``docs/suite.md``, "Which environment judges what")."""


@dataclass(frozen=True)
class Scenario:
    name: str
    shape: Shape
    peak_engines: float
    trace: TraceReplay | None = None
    block_tokens: int = 64
    isl: int = cal.ISL  # the mean prompt length: each request's is isl ± isl_spread (a fraction), deterministic
    osl: int = cal.OSL
    isl_spread: float = cal.ISL_SPREAD
    engine_rps: float = cal.ENGINE_RPS  # one engine's worth of this scenario's request mix, requests per simulated second
    miss_rps: tuple[float, float] = (cal.PREFILL_MISS_RPS, cal.DECODE_MISS_RPS)  # per prefill, decode engine: measured to miss the SLA
    mode: str = DISAGG  # AGG: the workers are one aggregated set, the decode component (seed 003 "--mode agg")
    sla_ms: tuple[float, float] = (cal.TTFT_MS, cal.ITL_MS)  # the planner's TTFT and ITL targets for this scenario
    spec_accept_length: float = 1.0  # tokens a decoding engine emits per step (speculative decoding; 1 = none)

    @property
    def components(self) -> tuple[str, ...]:
        """The components the planner scales: aggregated workers are the decode component, and there is no prefill."""
        return ("decode",) if self.mode == AGG else COMPONENTS

    def role_of(self, component: str) -> str:
        return AGG_ROLE if self.mode == AGG else component

    @property
    def duration_s(self) -> float:
        return self.trace.duration_s if self.trace is not None else self.shape.duration_s

    def engines_at(self, t: float) -> float:
        """Offered load at ``t`` in engines' worth."""
        return self.shape.level(t) * self.peak_engines

    def needed_at(self, t: float) -> int:
        return max(1, math.ceil(self.engines_at(t) - 1e-9))

    def floor_at(self, t: float, component: str) -> int:
        """The fewest ``component`` workers that can serve the load at ``t`` within the SLA: with fewer, each engine
        would take at least the rate it was measured to miss the SLA at (``planner_calibration.*_MISS_RPS``)."""
        return max(1, math.ceil(self.engines_at(t) * self.engine_rps / self.miss_rate(component) - 1e-9))

    def miss_rate(self, component: str) -> float:
        return self.miss_rps[0] if component == "prefill" else self.miss_rps[1]

    def arrivals(self, scale: float) -> list[load_generator.Arrival]:
        if self.trace is not None:
            return load_generator.trace_schedule(self.trace, scale, self.block_tokens)
        return load_generator.schedule(self.shape, self.peak_engines * self.engine_rps, scale, self.isl, self.osl, self.isl_spread)


def planner_spec(t: Timeouts, **changes: object) -> PlannerSpec:
    spec = PlannerSpec(
        ttft_ms=cal.TTFT_MS,
        itl_ms=cal.ITL_MS,
        mode=DISAGG,
        isl=cal.ISL,
        osl=cal.OSL,
        load_interval_s=t.planner_load_interval_s,
        throughput_interval_s=t.planner_throughput_interval_s,
        min_endpoint=1,
        max_gpu_budget=DEFAULT_BUDGET,
        prefill_engine_num_gpu=1,
        decode_engine_num_gpu=1,
    )
    return replace(spec, **changes)  # type: ignore[arg-type]


def worker(role: str, startup_s: float = 0.0, accept_length: float = 1.0) -> WorkerSpec:
    """A scenario engine; ``accept_length`` > 1 makes a decoding one (decode or aggregated) speculate."""
    return WorkerSpec(
        role=role,
        domains=cal.DOMAINS,
        startup_seconds=startup_s,
        max_num_batched_tokens=cal.MAX_NUM_BATCHED_TOKENS,
        spec_accept_length=accept_length if role != "prefill" else 1.0,
    )


def deployment_spec(
    t: Timeouts, planner: PlannerSpec, prefill: int = 1, decode: int = 1, accept_length: float = 1.0, startup_s: float = 0.0
) -> DeploymentSpec:
    """``prefill`` + ``decode`` workers; in aggregated mode ``decode`` aggregated workers and no prefill."""
    if planner.mode == AGG:
        workers: tuple[WorkerSpec, ...] = tuple(worker(AGG_ROLE, startup_s, accept_length) for _ in range(decode))
    else:
        workers = (
            *(worker("prefill", startup_s) for _ in range(prefill)),
            *(worker("decode", startup_s, accept_length) for _ in range(decode)),
        )
    return DeploymentSpec(model=cal.MODEL, workers=workers, time_scale=t.planner_time_scale, timing=cal.TIMING, planner=planner)


@dataclass
class ScenarioRun:
    scenario: Scenario
    timeouts: Timeouts
    planner: PlannerSpec
    results: list[load_generator.Result]
    harness: ScalingHarness | PodScaling
    end_s: float
    log: list[str] = field(default_factory=list)
    machine: str = ""  # how the machine treated the scenario: CPU priority and event-loop lag
    lag_worst_s: float = 0.0  # the harness's latest event-loop wake-up (real seconds): how late it could have looked
    passes: FpmRecord | None = None  # the forward passes of the engines there at t=0, as they published them
    delays: HostDelays = field(default_factory=lambda: HostDelays({}))  # what the engines ran behind their model

    @property
    def scale(self) -> float:
        return self.timeouts.planner_time_scale

    def sim(self, t_real: float) -> float:
        return t_real * self.scale

    @property
    def load_interval(self) -> float:
        return self.timeouts.planner_load_interval_s

    def ready(self, component: str) -> list[tuple[float, int]]:
        return [(self.sim(t), n) for t, n in self.harness.ready_counts(component)]

    def held(self, component: str) -> list[tuple[float, int]]:
        return [(self.sim(t), n) for t, n in self.harness.held_counts(component)]

    def gpus(self) -> list[tuple[float, int]]:
        return [(self.sim(t), g) for t, g in self.harness.gpu_timeline()]

    def gpu_seconds(self) -> float:
        return self.sim(self.harness.gpu_seconds(self.end_s / self.scale))

    def judged_timings(self, r: load_generator.Result) -> tuple[float | None, float | None]:
        """(TTFT, TPOT) in simulated ms as judged: as the client saw them, less the engines' lateness."""
        ttft, tpot = self.delays.timings(r)
        return (None if ttft is None else self.sim(ttft) * 1000), (None if tpot is None else self.sim(tpot) * 1000)

    def within_sla(self, r: load_generator.Result) -> bool:
        ttft_ms, tpot_ms = self.judged_timings(r)
        if not r.ok or ttft_ms is None:
            return False
        return ttft_ms <= self.planner.ttft_ms and (tpot_ms or 0.0) <= self.planner.itl_ms

    @property
    def engine_startup_s(self) -> float:
        """One engine start-up in the allowances (simulated s): the model-load time the suite gives every added worker;
        on a cluster, the median time an added worker pod took from first seen to Ready, when longer. NB: a pod's
        scheduling, its start by the kubelet (the suite's pod runner) and its readiness probe cost real time, which the
        time scale multiplies: under `stress --cpu 2` they made a pod's start-up 4.7 simulated s, not 3, and the
        reference's fourth decode worker (one step per start-up, as it waits for the DGD's readyReplicas) came a
        second after an allowance counting 3 s (PlannerScalingStepReachesSla, 93.7%). The operator's own delay, from
        the planner's patch to the pod, still counts against the implementation."""
        configured = self.timeouts.planner_engine_startup_s
        measured = sorted(self.harness.startups()) if isinstance(self.harness, PodScaling) else []
        return max(configured, self.sim(measured[len(measured) // 2])) if measured else configured

    @property
    def startup_beyond_model_load_s(self) -> float:
        """Simulated seconds an engine start-up took beyond the model load (0 in the process environment): what a check
        that names a fixed moment counting one start-up adds to it."""
        return self.engine_startup_s - self.timeouts.planner_engine_startup_s

    @property
    def worker_allowance(self) -> float:
        """Simulated seconds a conformant planner may take to have one more worker serving, once the need is there."""
        return self.timeouts.planner_step_intervals * self.load_interval + self.engine_startup_s

    @property
    def guard_turn(self) -> float:
        """Simulated seconds of one decision's turn through the pending-desired guard: an engine start-up, then up to a
        load interval until the next tick sees it done."""
        return self.load_interval + self.engine_startup_s

    def step_allowance(self, added: int, components: int = 1) -> float:
        """Simulated seconds a conformant planner may take to add ``added`` workers of each of ``components`` components
        and settle. With more than one, one more ``guard_turn``: seed 003's guard ("no new scaling action is issued until
        the previous one completes") holds the whole graph, and decode sees a step only as prefill passes it on, so its
        need shows (to the load rule, or to the throughput floor at its next window) after prefill's first decision is
        in flight. NB: on a cluster the reference's first decode worker then came one turn late whenever the floor's
        window ended just before the step, and PlannerScalingStepReachesSla failed 1 run in 3 (91.9%, idle)."""
        turns = self.guard_turn if components > 1 else 0.0
        return added * self.worker_allowance + turns + self.timeouts.planner_settle_intervals * self.load_interval

    def overload_seen_at(self) -> float | None:
        """Simulated s: the end of the first load interval over which, by ground truth, every engine there at t=0 was
        above an SLA (seed 003's "ALL TTFT > SLA" or "ALL ITL > SLA"), before the planner added a worker; None if
        never, or if that truth is missing (an engine published no forward passes).
        - ITL: each engine's time from one decoding iteration to the next (its ``/events/fpm``, ``FpmRecord``);
        - TTFT: the median TTFT of the requests sent in the interval (the suite's client).
        NB: a check that names a fixed moment for a scale-up assumes when the load overloads the engines. Under a load
        that overloads them slowly (``agg-itl-bound``: the decode KV builds for ~13 s per sequence) that moment moved
        from run to run, and the reference decided at t=16.3-18.3 in the process environment, 17.9-21.0 on a cluster."""
        if self.passes is None:
            return None
        engines = self.passes.engines()
        if len(engines) < len(self.passes.followed):
            return None
        added = min((self.sim(e.t) for e in self.harness.events if e.t > 0 and e.kind == START), default=self.end_s)
        step, span = self.load_interval / 4, self.load_interval
        for i in range(int(added / step) + 1):
            end = i * step
            if end < span:
                continue
            steps = [self.passes.decode_cadence_s(e, (end - span) / self.scale, end / self.scale) for e in engines]
            if all(s is not None and self.sim(s) * 1000 > self.planner.itl_ms for s in steps):
                return end
            ttfts = sorted(self.sim(r.ttft_s) * 1000 for r in self.judged(end - span, end, []) if r.ttft_s is not None)
            if ttfts and ttfts[len(ttfts) // 2] > self.planner.ttft_ms:
                return end
        return None

    def excused(self, initial: int = 1) -> list[tuple[float, float]]:
        """Windows after each rise in needed engines in which the SLA need not hold yet."""
        out: list[tuple[float, float]] = []
        needed, step = initial, self.load_interval / 4
        for i in range(int(self.scenario.duration_s / step) + 1):
            t = i * step
            now = self.scenario.needed_at(t)
            if now > needed:
                out.append((t, t + self.step_allowance(now - needed, len(self.scenario.components))))
            needed = now
        return out

    def judged(
        self, start: float = 0.0, end: float | None = None, excused: list[tuple[float, float]] | None = None
    ) -> list[load_generator.Result]:
        """The requests sent in [start, end) (simulated s) outside the excused windows."""
        end = self.end_s if end is None else end
        windows = self.excused() if excused is None else excused
        return [
            r for r in self.results
            if start <= self.sim(r.sent_s) < end and not any(a <= self.sim(r.sent_s) < b for a, b in windows)
        ]

    def misses(self, start: float = 0.0, end: float | None = None, most: int = 5) -> str:
        """The judged requests that missed the SLA, worst TTFT first: sent at (s), TTFT and TPOT (simulated ms)."""
        missed = [r for r in self.judged(start, end) if not self.within_sla(r)]
        missed.sort(key=lambda r: -(r.ttft_s if r.ttft_s is not None else float("inf")))

        def ms(value: float | None) -> str:
            return "-" if value is None else f"{self.sim(value) * 1000:.0f}"

        def judged(r: load_generator.Result) -> str:
            if self.delays.behind(r) == Behind():
                return ""
            ttft, tpot = self.delays.timings(r)
            return f" (less the engines' lateness: ttft={ms(ttft)} tpot={ms(tpot)})"

        def why(r: load_generator.Result) -> str:
            return "" if r.ok else f" failed: {r.error} {r.detail[:200]}".rstrip()

        shown = [f"t={self.sim(r.sent_s):.1f}s ttft={ms(r.ttft_s)} tpot={ms(r.tpot_s)}{judged(r)}{why(r)}" for r in missed[:most]]
        return f"{len(missed)} missed: " + ", ".join(shown) if missed else "none missed"

    def attainment(
        self, start: float = 0.0, end: float | None = None, excused: list[tuple[float, float]] | None = None
    ) -> tuple[float, int]:
        """(share within SLA, count) of the requests sent in [start, end) outside the excused windows."""
        chosen = self.judged(start, end, excused)
        if not chosen:
            return 1.0, 0
        return sum(self.within_sla(r) for r in chosen) / len(chosen), len(chosen)

    def timeline(self, step: float = 8.0) -> str:
        """Per window: requests, share within SLA, TTFT and TPOT medians (simulated ms; as the client saw them, then as
        judged), serving workers."""
        rows = []
        for i in range(int(self.end_s / step) + 1):
            a, b = i * step, (i + 1) * step
            rs = [r for r in self.results if a <= self.sim(r.sent_s) < b]
            if not rs:
                continue
            ttft = median(self.sim(r.ttft_s) * 1000 for r in rs if r.ttft_s is not None)
            tpot = median(self.sim(r.tpot_s) * 1000 for r in rs if r.tpot_s is not None)
            judged = [self.judged_timings(r) for r in rs]
            ttft_j, tpot_j = median(x for x, _ in judged if x is not None), median(y for _, y in judged if y is not None)
            ok = sum(self.within_sla(r) for r in rs) / len(rs)
            workers = "/".join(str(value_at(self.ready(c), a)) for c in COMPONENTS)
            rows.append(
                f"[{a:.0f},{b:.0f}) n={len(rs)} sla={ok:.0%} ttft50={ttft:.0f}/{ttft_j:.0f} tpot50={tpot:.0f}/{tpot_j:.0f} p/d={workers}"
            )
        return "; ".join(rows)

    def peaks(self) -> dict[str, int]:
        """The most workers of each component held at once."""
        return {c: max((k for _, k in self.held(c)), default=0) for c in COMPONENTS}

    def summary(self) -> str:
        share, n = self.attainment(excused=[])
        peaks = self.peaks()
        return (
            f"scenario {self.scenario.name}: {len(self.results)} requests, {share:.1%} of {n} within SLA overall, "
            f"{len(self.harness.decisions)} decisions, peak workers {peaks}, {self.gpu_seconds():.0f} GPU-seconds (simulated); "
            f"engine start-up in the allowances {self.engine_startup_s:.1f} s; "
            f"machine: {self.machine or 'not recorded'}; {self.delays.summary()}; held workers (t, count): "
            + "; ".join(f"{c} {[(round(t, 1), n) for t, n in self.held(c)]}" for c in COMPONENTS)
        )


async def run(
    ctx: TestContext,
    scenario: Scenario,
    planner: PlannerSpec | None = None,
    prefill: int = 1,
    decode: int = 1,
    tweak: Callable[[PlannerSpec], PlannerSpec] | None = None,
    ack_delay_s: float = 0.0,
    acknowledge: bool = True,
    record_passes: bool = False,
) -> ScenarioRun:
    """Deploy, drive ``scenario``, return what happened. ``ack_delay_s`` (simulated) delays the harness's
    acknowledgements; ``acknowledge=False`` makes it a dead external system (``ScalingHarness``); ``record_passes``
    keeps the first engines' forward passes (``ScenarioRun.passes``: one more subscriber per engine, so only for the
    checks that read them)."""
    t = ctx.timeouts
    spec = planner or planner_spec(
        t, isl=scenario.isl, osl=scenario.osl, mode=scenario.mode, ttft_ms=scenario.sla_ms[0], itl_ms=scenario.sla_ms[1]
    )
    if tweak is not None:
        spec = tweak(spec)
    gpus = {"prefill": spec.prefill_engine_num_gpu, "decode": spec.decode_engine_num_gpu}
    if isinstance(ctx.env, ClusterEnvironment):
        # NB: on a cluster every worker, those the planner adds too, loads its model for the start-up time.
        deployment = await ctx.deploy(deployment_spec(t, spec, prefill, decode, scenario.spec_accept_length, t.planner_engine_startup_s))
        if ack_delay_s or not acknowledge:
            raise AssertionError(f"{ctx.name}: acknowledgements are the Virtual connector's; run this case with --env process")
        harness: ScalingHarness | PodScaling = PodScaling(ctx.env, str(getattr(deployment, "name", "")), gpus)
    else:
        deployment = await ctx.deploy(deployment_spec(t, spec, prefill, decode, scenario.spec_accept_length))
        if not isinstance(deployment, PlannedDeployment) or getattr(deployment, "decisions", None) is None:
            raise AssertionError(
                f"{ctx.name}: the deployment has no 'decisions' store; a planner on the Virtual connector must expose its "
                "DecisionStore (servecert.protocol.planner_decisions) as Deployment.decisions"
            )
        templates = {
            c: worker(scenario.role_of(c), t.planner_engine_startup_s, scenario.spec_accept_length) for c in scenario.components
        }
        harness = ScalingHarness(
            deployment, templates, gpus, t0=time.monotonic(), ack_delay_s=ack_delay_s / t.planner_time_scale, acknowledge=acknowledge
        )
    # NB: test_s bounds what the implementation does; the scenario's own length is the time scale's.
    ctx.extend_deadline(scenario.duration_s / t.planner_time_scale, f"the scenario's {scenario.duration_s:g} simulated s")
    arrivals = scenario.arrivals(t.planner_time_scale)
    if sends_token_ids(deployment):
        arrivals = load_generator.as_token_ids(arrivals)
    lag = LoopLag()
    with cpu_priority.raised() as priority, gc_deferral.deferred():
        lag.start(scenario.duration_s / t.planner_time_scale + t.request_s)
        try:
            results, end, passes = await _drive(ctx, deployment, harness, scenario, arrivals, record_passes)
        finally:
            await lag.stop()
    delays = HostDelays.of(await _engine_records(ctx, deployment), results)
    outcome = ScenarioRun(scenario, t, spec, results, harness, end * t.planner_time_scale,
                          machine=f"{priority.outcome}, {lag.summary()}", lag_worst_s=lag.worst_s, passes=passes, delays=delays)
    ctx.log.info(outcome.summary())
    ctx.log.info(outcome.timeline())
    _record_figures(ctx, outcome)
    assert not harness.errors, f"{ctx.name}: the harness could not carry out the planner's decisions: {harness.errors[:3]}"
    return outcome


async def _engine_records(ctx: TestContext, deployment: Deployment) -> list[dict[str, Any]]:
    """The ground truth of every engine that served the scenario: on a cluster the files its pods left; in the process
    environment the engines the suite ran (those stopped too), and over HTTP those it did not run that are still up (an
    implementation's own worker processes). A worker gone without a file has no records: its requests are judged as
    the client saw them."""
    if isinstance(ctx.env, ClusterEnvironment):
        pods_dir = ctx.env.pods_dir
        return pod_records(pods_dir, ctx.env.namespace) if pods_dir is not None else []
    engines = getattr(ctx.env, "engines", [])
    records = [r.to_dict() for e in engines for r in e.log.since(0)]
    inside = {e.engine_id for e in engines}
    outside = [w for w in deployment.workers if w.engine_id not in inside]
    if not outside:
        return records
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ctx.timeouts.request_s)) as session:
        truth = observe.GroundTruth(session)
        for worker in outside:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                await truth.refresh([worker])
    return records + truth.records


def median(values: Iterable[float]) -> float:
    """The upper median, -1 when there are none (a window without that timing)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else -1.0


def _record_figures(ctx: TestContext, run: ScenarioRun) -> None:
    """With ``$SERVECERT_PLANNER_FIGURES`` set, append the run's figures to that JSON-lines file (``servecert bench
    planner`` reads them): SLA attainment of every request and of those outside the allowances, GPU-seconds."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    overall, sent = run.attainment(excused=[])
    judged, counted = run.attainment()
    figures = {
        "test": ctx.name,
        "scenario": run.scenario.name,
        "requests": sent,
        "within_sla": overall,
        "judged_requests": counted,
        "judged_within_sla": judged,
        "gpu_seconds": run.gpu_seconds(),
        "decisions": len(run.harness.decisions),
        "peak_workers": run.peaks(),
        "time_scale": run.scale,
        "machine": run.machine,
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(figures) + "\n")


async def _drive(
    ctx: TestContext, deployment: Deployment, harness: ScalingHarness | PodScaling, scenario: Scenario,
    arrivals: list[load_generator.Arrival], record_passes: bool,
) -> tuple[list[load_generator.Result], float, FpmRecord | None]:
    """Start the harness, send every arrival, wait out the scenario, stop the harness: the client's results, the
    scenario's end (real seconds on the harness's clock) and, with ``record_passes``, the first engines' forward
    passes."""
    t = ctx.timeouts
    started = time.perf_counter()
    harness.start()
    ctx.add_cleanup(harness.close)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        passes = FpmRecord(session, t0=harness.t0) if record_passes else None
        if passes is not None:
            passes.follow(deployment.workers)
        try:
            results = await load_generator.run(session, deployment.frontend_url, cal.MODEL, arrivals, started=started,
                                               timeout_s=t.request_s)
            remaining = started + scenario.duration_s / t.planner_time_scale - time.perf_counter()
            if remaining > 0:
                await asyncio.sleep(remaining)
        finally:
            if passes is not None:
                await passes.close()
    end = harness.now()
    await harness.close()
    return results, end, passes


def value_at(steps: list[tuple[float, int]], t: float) -> int:
    return count_at(steps, t)
