"""Assertion helpers of the PLANNER-SCALING tests, named ``<object>_must_<condition>``.

Every helper judges a ``ScenarioRun`` by the suite's ground truth — the engines the harness
started, served with and stopped, and the requests as the suite's client saw them — and fails
with a message naming the component, the simulated time and what was seen. Times are simulated
seconds since the scenario started; "interval" is the load interval given to the planner.
"""

from __future__ import annotations

import itertools
import math

from servecert.conformance.tests.planner_scaling._checks import ScenarioRun, value_at
from servecert.harness.planner.scaling_harness import COMPONENTS
from servecert.protocol.perf_profile import PerfProfile


def _changes(run: ScenarioRun, component: str) -> list[tuple[float, int]]:
    """(time, +1 | -1) for every worker the harness started or stopped after t=0."""
    held = run.held(component)
    out: list[tuple[float, int]] = []
    before = value_at(held, 0.0)
    for t, n in held:
        if t <= 0:
            continue
        if n != before:
            out.append((t, n - before))
        before = n
    return out


def changes_must_be_one_worker_per_interval(run: ScenarioRun, floor_may_raise: bool = False) -> None:
    """No component gains or loses more than one worker within one load interval.

    ``floor_may_raise``: the throughput loop is on, so several workers added at once are the planner raising its count
    to the throughput lower bound it wrote (seed 003, Co-existence with Throughput-Based Scaling: "throughput-based
    scaling ... sets a lower bound on replicas while load-based scaling ... handles real-time adjustments above that
    floor"; the +/-1 is the load-based rule's). Such a rise may reach at most what the offered load of the last two
    throughput windows needs, plus one (``rise_bound``: the suite's number, the over-provisioning checks' bound). A
    floor never removes a worker, so removals are always one at a time."""
    window = run.load_interval * (1 - run.timeouts.planner_interval_jitter)  # NB: a fraction of an interval for timer jitter
    decisions = [
        (round(run.sim(d.seen_t), 1), d.decision.decision_id, d.decision.num_prefill_workers, d.decision.num_decode_workers)
        for d in run.harness.decisions
    ]
    for component in COMPONENTS:
        changes = _changes(run, component)
        for i, (t, _) in enumerate(changes):
            within = [d for t2, d in changes[i:] if t2 < t + window]
            moved = sum(abs(d) for d in within)
            if moved <= 1:
                continue
            reached = value_at(run.held(component), t - 1e-6) + sum(within)
            bound = rise_bound(run, t)
            if floor_may_raise and all(d > 0 for d in within) and reached <= bound:
                continue
            raise AssertionError(
                f"{component}: {moved} workers were added or removed within one load interval ({run.load_interval:g} s) "
                f"from t={t:.1f} s; changes were {[(round(a, 1), d) for a, d in changes]}; decisions (t, id, prefill, decode) were "
                f"{decisions}"
                + (
                    f"; a rise to a throughput floor may reach {bound} workers at most (what the offered load of "
                    f"the last two throughput windows needs, plus one: the suite's bound), and removals are one at a time"
                    if floor_may_raise
                    else "; the throughput loop is off, so every change is the load rule's +/-1"
                )
            )


def rise_bound(run: ScenarioRun, t: float) -> int:
    """The most workers a throughput floor written by ``t`` can justify: the peak need of the offered load over the
    last two throughput windows (engines' worth, rounded up), plus one."""
    span = 2 * run.planner.throughput_interval_s
    steps = 20
    return 1 + max(run.scenario.needed_at(max(0.0, t - span + span * k / steps)) for k in range(steps + 1))


def gpus_must_stay_within_budget(run: ScenarioRun) -> None:
    """GPUs held never exceed the budget; and the load drove the planner up to the budget (within one engine's
    GPUs), else the scenario never put the budget to the test."""
    budget = run.planner.max_gpu_budget
    line = run.gpus()

    def counts(t: float) -> str:
        return ", ".join(f"{c} {value_at(run.held(c), t)}" for c in COMPONENTS)

    over = [(t, g) for t, g in line if g > budget]
    assert not over, (
        f"GPUs held by prefill and decode workers exceeded max_gpu_budget={budget}: first at t={over[0][0]:.1f} s "
        f"({over[0][1]} GPUs: {counts(over[0][0])} workers at {run.planner.prefill_engine_num_gpu} and "
        f"{run.planner.decode_engine_num_gpu} GPUs each)"
    )
    widest = max(run.planner.prefill_engine_num_gpu, run.planner.decode_engine_num_gpu)
    peak = max((g for _, g in line), default=0)
    assert peak > budget - widest, (
        f"the load needs more GPUs than max_gpu_budget={budget}, yet the workers never held more than {peak}: the planner "
        "did not scale up to its budget"
    )


def workers_must_never_fall_below_min_endpoint(run: ScenarioRun) -> None:
    floor = run.planner.min_endpoint
    for component in run.scenario.components:
        low = [(t, n) for t, n in run.ready(component) if n < floor]
        assert not low, f"{component}: {low[0][1]} serving workers at t={low[0][0]:.1f} s, below min_endpoint={floor}"


def workers_must_cover_sustained_load(run: ScenarioRun, start: float, end: float) -> None:
    """From ``start`` to ``end`` (steady load), each component keeps at least the fewest workers that can serve the
    load within the SLA (``Scenario.floor_at``, from the engines' measured capacity, no margin): the least a
    throughput floor sized by the SLA can be, and what no load-based scale-down may cross."""
    step = run.load_interval / 4
    for component in run.scenario.components:
        ready = run.ready(component)
        for i in range(int((end - start) / step) + 1):
            t = start + i * step
            n, needed = value_at(ready, t), run.scenario.floor_at(t, component)
            rps, miss = run.scenario.engines_at(t) * run.scenario.engine_rps, run.scenario.miss_rate(component)
            assert n >= needed, (
                f"{component}: only {n} serving workers at t={t:.1f} s under a steady {rps:.2f} requests/s; one {component} "
                f"engine misses the SLA at {miss:.2f} requests/s, so at least {needed} are needed"
            )


def requests_must_meet_sla(run: ScenarioRun, start: float, end: float | None = None, what: str = "") -> None:
    share, n = run.attainment(start, end)
    need = run.timeouts.planner_sla_attainment
    assert n > 0, (
        f"{what or run.scenario.name}: no request was sent in the judged window from t={start:.1f} s to the scenario's end "
        f"at {run.end_s:.1f} s; the allowance counts an engine start-up of {run.engine_startup_s:.1f} s, so where added "
        "workers started that slowly the machine, not the planner, left nothing to judge: rerun it on a less loaded one"
    )
    assert share >= need, (
        f"{what or run.scenario.name}: {share:.1%} of {n} requests sent after scaling settled met TTFT<={run.planner.ttft_ms:g} ms "
        f"and ITL<={run.planner.itl_ms:g} ms; at least {need:.0%} must (excused after load rises: "
        f"{[(round(a, 1), round(b, 1)) for a, b in run.excused()]}); {run.misses(start, end)}; machine: {run.machine}; "
        f"by window: {run.timeline()}; {run.summary()}"
    )


def scaling_must_not_flap(run: ScenarioRun, start: float, end: float) -> None:
    """Within any flap window in [start, end), the scaling direction changes at most the allowed number of times."""
    t = run.timeouts
    window = t.planner_flap_window_intervals * t.planner_load_interval_s
    for component in COMPONENTS:
        signs = [(at, 1 if d > 0 else -1) for at, d in _changes(run, component) if start <= at < end]
        flips = [b[0] for a, b in itertools.pairwise(signs) if a[1] != b[1]]
        for i, at in enumerate(flips):
            within = [f for f in flips[i:] if f < at + window]
            assert len(within) <= t.planner_max_direction_changes, (
                f"{component}: the scaling direction changed {len(within)} times within {window:g} s from t={at:.1f} s under "
                f"steady load (at most {t.planner_max_direction_changes} allowed); changes were "
                f"{[(round(a, 1), d) for a, d in _changes(run, component)]}"
            )


def workers_must_scale_down_after(run: ScenarioRun, fall: float, before_rise: float) -> None:
    """After load falls at ``fall``, each component that grew since ``before_rise`` sheds a worker
    within 2 throughput intervals + N load intervals, and is back at its earlier count (or
    min_endpoint) within N more load intervals per extra worker: per worker it held from the fall to
    its first removal. NB: a worker added after the fall, answering the backlog the rise left, is one
    more to remove. On a cluster (start-ups of 6-8 s) the reference's third decode worker came after
    the fall in ``step-up-and-down`` (t=39.5 s in one run), and counting only the workers serving at the
    fall left it no time to go: ScalesDownAfterLoadFalls[load-only] failed 5 of 7 runs ("2 workers at
    t=56.0 s")."""
    t = run.timeouts
    first_deadline = fall + 2 * t.planner_throughput_interval_s + t.planner_scale_down_intervals * t.planner_load_interval_s
    for component in COMPONENTS:
        ready, held = run.ready(component), run.held(component)
        base = max(value_at(ready, before_rise), run.planner.min_endpoint)
        changes = _changes(run, component)
        stops = [at for at, d in changes if at >= fall and d < 0]
        until = stops[0] if stops else run.end_s
        high = max([value_at(held, fall)] + [n for at, n in held if fall <= at < until])
        if high <= base:
            continue
        shown = [(round(a, 1), d) for a, d in changes]
        assert stops and stops[0] <= first_deadline, (
            f"{component}: load fell at t={fall:.1f} s with {high} workers held; the first scale-down must come by "
            f"t={first_deadline:.1f} s, " + (f"it came at t={stops[0]:.1f} s" if stops else "none came") + f"; changes were {shown}"
        )
        deadline = first_deadline + (high - base - 1) * t.planner_scale_down_intervals * t.planner_load_interval_s
        n = value_at(ready, deadline)
        assert n <= base, (
            f"{component}: {n} workers at t={deadline:.1f} s, {deadline - fall:.1f} s after load fell with {high} held; it had "
            f"{base} before the load rose and must be back there by then; changes were {shown}"
        )


def workers_must_have_moved(run: ScenarioRun, direction: int, least: int = 2) -> None:
    """Each component moved ``least`` workers in ``direction`` (+1 up, -1 down) over the scenario: the load called
    for it, and without it a step limit was never put to the test."""
    for component in COMPONENTS:
        moved = sum(abs(d) for _, d in _changes(run, component) if d * direction > 0)
        assert moved >= least, (
            f"{component}: the load called for at least {least} workers {'added' if direction > 0 else 'removed'}, the planner "
            f"{'added' if direction > 0 else 'removed'} {moved}; changes were {[(round(a, 1), d) for a, d in _changes(run, component)]}"
        )


def workers_must_stay_at_min_endpoint(run: ScenarioRun, component: str) -> None:
    """``component`` never holds more than min_endpoint workers: its own signal never called for more."""
    most = run.planner.min_endpoint
    grown = [(t, n) for t, n in run.held(component) if n > most]
    assert not grown, (
        f"{component}: {grown[0][1]} workers at t={grown[0][0]:.1f} s, though its own latency never needed more than "
        f"min_endpoint={most} (the load of {run.scenario.name} falls on the other component); changes were "
        f"{[(round(a, 1), d) for a, d in _changes(run, component)]}"
    )


def workers_must_not_over_provision(run: ScenarioRun, component: str, start: float) -> None:
    """From ``start`` on, ``component`` holds at most the smallest count that serves the scenario's load, plus one."""
    step = run.load_interval / 4
    held = run.held(component)
    for i in range(int((run.end_s - start) / step) + 1):
        t = start + i * step
        most = run.scenario.needed_at(t) + 1
        n = value_at(held, t)
        assert n <= most, (
            f"{component}: {n} workers at t={t:.1f} s under {run.scenario.engines_at(t):.1f} engines' worth of load "
            f"({run.scenario.engines_at(t) * run.scenario.engine_rps:.2f} requests/s); {run.scenario.needed_at(t)} serve it "
            f"within the SLA, so at most {most} may be held once scaling settled"
        )


def workers_must_hold_the_profile_floor(
    run: ScenarioRun, profile: PerfProfile, start: float, prefill_tokens: float | None = None, decode_steps: float | None = None
) -> None:
    """From ``start`` on, each component serves with at least ceil(offered load / the profile's capacity at the SLA)
    workers: the least throughput floor a planner given ``profile`` may write (seed 003, Step 4). The offered load at
    ``t`` is the lowest mean rate of any throughput window ending in the last two windows (one to write the floor, one
    for it to take effect): a floor predicted from a window is not removed by an idle period shorter than the window
    ("keeps capacity that was predicted for near-future demand from being removed because of short idle periods"),
    and under steady load it is the steady rate. ``prefill_tokens``: the tokens a request makes a prefill engine
    compute when the scenario's prompts hit the prefix cache (default: the whole ISL); ``decode_steps``: the decode
    steps a request takes when speculative decoding emits several tokens a step (default: the OSL)."""
    step = run.load_interval / 4
    spec = run.planner
    per_request = {
        "prefill": run.scenario.isl if prefill_tokens is None else prefill_tokens,
        "decode": run.scenario.osl if decode_steps is None else decode_steps,
    }
    sla = {"prefill": spec.ttft_ms, "decode": spec.itl_ms}
    gpus = {"prefill": spec.prefill_engine_num_gpu, "decode": spec.decode_engine_num_gpu}
    rates = _window_rates(run)
    for component in COMPONENTS:
        capacity = profile.capacity_per_gpu(component, sla[component]) * gpus[component]
        ready = run.ready(component)
        for i in range(int((run.end_s - start) / step) + 1):
            t = start + i * step
            rps, since = _lowest_window_rps(rates, t, spec.throughput_interval_s)
            floor = max(spec.min_endpoint, math.ceil(rps * per_request[component] / capacity - 1e-9))
            n = value_at(ready, t)
            assert n >= floor, (
                f"{component}: {n} serving workers at t={t:.1f} s; every {spec.throughput_interval_s:g} s throughput window "
                f"since t={since:.1f} s offered at least {rps:.2f} requests/s, and the profile the planner was given says one "
                f"engine serves {capacity:.0f} tokens/s within the SLA, so its throughput floor is at least "
                f"ceil({rps:.2f} x {per_request[component]} / {capacity:.0f}) = {floor}, and the load loop may not go below "
                f"it; serving {component} workers (t, count) were {[(round(a, 1), k) for a, k in ready]}"
            )


def workers_must_stay_below_the_blind_floor(run: ScenarioRun, profile: PerfProfile, component: str, start: float, why: str) -> None:
    """From ``start`` on, fewer ``component`` workers serve than a planner would hold that ignores the runtime
    metadata ``why`` names: ceil(offered requests/s x whole tokens per request (ISL for prefill, OSL for decode) / the
    profile's tokens/s at the SLA), with no headroom at all. The scenario makes that metadata cut the work by several
    times (prefix-cache hits, or speculative decoding's accept length), so the floor of a planner that applies it is
    far lower (seed 003: KV hit rate and accept length are "applied as input features" of capacity estimation)."""
    step = run.load_interval / 4
    spec = run.planner
    sla, gpus = (spec.ttft_ms, spec.prefill_engine_num_gpu) if component == "prefill" else (spec.itl_ms, spec.decode_engine_num_gpu)
    tokens = run.scenario.isl if component == "prefill" else run.scenario.osl
    capacity = profile.capacity_per_gpu(component, sla) * gpus
    ready = run.ready(component)
    for i in range(int((run.end_s - start) / step) + 1):
        t = start + i * step
        rps = run.scenario.engines_at(t) * run.scenario.engine_rps
        blind = math.ceil(rps * tokens / capacity - 1e-9)
        n = value_at(ready, t)
        assert n < blind, (
            f"{component}: {n} serving workers at t={t:.1f} s under {rps:.2f} requests/s ({why}); sized for {tokens} whole "
            f"tokens per request, the profile's {capacity:.0f} tokens/s per engine asks for ceil({rps:.2f} x {tokens} / "
            f"{capacity:.0f}) = {blind}, so holding {n} ignores it; serving {component} workers (t, count) were "
            f"{[(round(a, 1), k) for a, k in ready]}"
        )


def _window_rates(run: ScenarioRun) -> list[tuple[float, float]]:
    """(end, mean offered requests/s over the throughput window ending there), every quarter of a second from the end
    of the first whole window."""
    window = run.planner.throughput_interval_s
    dt = 0.25
    cumulative = list(itertools.accumulate((run.scenario.engines_at((k + 0.5) * dt) * dt for k in range(int(run.end_s / dt) + 1)),
                                           initial=0.0))
    width = max(1, round(window / dt))
    return [
        (k * dt, (cumulative[k] - cumulative[k - width]) / (width * dt) * run.scenario.engine_rps)
        for k in range(width, len(cumulative))
    ]


def _lowest_window_rps(rates: list[tuple[float, float]], t: float, window: float) -> tuple[float, float]:
    """(the lowest rate of a window ending in [t - 2 W, t], the start of the earliest such window); (0, t - W) before
    the first whole window."""
    chosen = [(end, rps) for end, rps in rates if t - 2 * window <= end <= t]
    if not chosen:
        return 0.0, t - window
    return min(rps for _, rps in chosen), chosen[0][0] - window
