"""Deliberately non-conforming planners, built from the reference planner with one rule broken each.

The suite must fail every one of them (``tests/certify/test_planner_scaling.py``);
each names the rule it breaks and the conformance test expected to catch it. The breaks are made
through the reference adapter's hooks: ``planner_config_hook`` edits the planner's settings,
``planner_hook`` swaps its load rule (``Planner.decide_load``, or ``Planner.decide_aggregated`` in
aggregated mode); on a cluster ``planner_serve_hooks`` names the planner pod's ``Hooks``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.reference_impl.planner import load_scaling
from servecert.reference_impl.planner.config import AGG, PlannerConfig
from servecert.reference_impl.planner.connectors.kubernetes import DECODE, PREFILL, Components, DeploymentShapeError, by_type
from servecert.reference_impl.planner.connectors.protocol import ISSUED
from servecert.reference_impl.planner.connectors.virtual import VirtualConnector
from servecert.reference_impl.planner.load_scaling import LoadProposal
from servecert.reference_impl.planner.planner import Planner
from servecert.reference_impl.planner.reconcile import Targets, reconcile
from servecert.reference_impl.planner.serve import Hooks
from servecert.reference_impl.planner.traffic import TrafficSample


def _two_at_a_time(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        proposal = load_scaling.decide(current, estimates, after, sla, sens, low)
        # Broken: a step of two workers per interval.
        return LoadProposal(max(low, current + 2 * (proposal.target - current)), proposal.reason)

    planner.decide_load = decide


def _step_two(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, max_step=2)


def _no_budget(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, max_gpu_budget=1_000_000)


def _load_only(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, enable_throughput_scaling=False, down_stabilisation_ticks=1)


def _no_ack_wait(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, scaling_ack_timeout_s=0.0)  # Broken: never waits for an acknowledgement.


def _no_ack_timeout(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, scaling_ack_timeout_s=1e12)  # Broken: ignores the configured timeout; waits for ever.


def _gpus_as_workers(config: PlannerConfig) -> PlannerConfig:
    # Broken: every engine counted as one GPU, so the budget caps workers, not GPUs.
    return dataclasses.replace(config, prefill_engine_num_gpu=1, decode_engine_num_gpu=1)


def _floor_on_load_interval(config: PlannerConfig) -> PlannerConfig:
    # Broken: the throughput loop reads traffic over one load interval, so the floor follows every short lull.
    return dataclasses.replace(config, throughput_interval_s=config.load_interval_s)


def _no_min_endpoint(config: PlannerConfig) -> PlannerConfig:
    return dataclasses.replace(config, min_endpoint=1)  # Broken: the configured min_endpoint is not applied.


def _sheds_to_floor(planner: Planner) -> None:
    def constrain(current: Targets, load: Targets | None, floor: Targets | None, cfg: PlannerConfig) -> tuple[Targets, list[str]]:
        target, notes = reconcile(current, load, floor, cfg)
        if load is None or floor is None:
            return target, notes
        # Broken: once the load rule agrees to scale down, go straight down to the throughput floor (no step limit down).
        p = min(target.prefill, max(floor.prefill, cfg.min_endpoint)) if load.prefill < current.prefill else target.prefill
        d = min(target.decode, max(floor.decode, cfg.min_endpoint)) if load.decode < current.decode else target.decode
        return Targets(p, d), notes

    planner.constrain = constrain


def _floor_as_start(planner: Planner) -> None:
    def constrain(current: Targets, load: Targets | None, floor: Targets | None, cfg: PlannerConfig) -> tuple[Targets, list[str]]:
        # Broken: once the load loop proposes, its proposal wins; the throughput floor only matters without one.
        return reconcile(current, load, None, cfg) if load is not None else reconcile(current, None, floor, cfg)

    planner.constrain = constrain


def _decode_on_ttft(planner: Planner) -> None:
    seen: dict[str, tuple[list[float], list[float]]] = {}

    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        if sla == planner.config.ttft_ms:  # NB: the planner asks for prefill first, then decode, every tick
            seen["ttft"] = (list(estimates), list(after))
            return load_scaling.decide(current, estimates, after, sla, sens, low)
        ttfts, ttfts_after = seen.get("ttft", ([], []))
        # Broken: decode is judged on the prefill engines' TTFT against the TTFT SLA: one signal for both components.
        return load_scaling.decide(current, ttfts, ttfts_after, planner.config.ttft_ms, sens, low)

    planner.decide_load = decide


def _up_on_any(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        # Broken: one engine over the SLA is enough to add a worker (the seed asks for ALL of them).
        if estimates and any(e > sla for e in estimates):
            return LoadProposal(current + 1, load_scaling.UP)
        return load_scaling.decide(current, estimates, after, sla, sens, low)

    planner.decide_load = decide


def _aggregated_on_itl_only(planner: Planner) -> None:
    def decide(current: int, ttft: load_scaling.Signal, itl: load_scaling.Signal, sens: float, low: int) -> LoadProposal:
        # Broken: aggregated workers counted as decode workers, judged on ITL alone (TTFT never adds one).
        return load_scaling.decide(current, itl.estimates, itl.consolidated, itl.sla, sens, low)

    planner.decide_aggregated = decide


def _aggregated_on_ttft_only(planner: Planner) -> None:
    def decide(current: int, ttft: load_scaling.Signal, itl: load_scaling.Signal, sens: float, low: int) -> LoadProposal:
        # Broken: aggregated workers counted as prefill workers, judged on TTFT alone (ITL never adds one).
        return load_scaling.decide(current, ttft.estimates, ttft.consolidated, ttft.sla, sens, low)

    planner.decide_aggregated = decide


def _aggregated_down_on_either(planner: Planner) -> None:
    def decide(current: int, ttft: load_scaling.Signal, itl: load_scaling.Signal, sens: float, low: int) -> LoadProposal:
        proposal = load_scaling.decide_aggregated(current, ttft, itl, sens, low)
        if proposal.target > current:
            return proposal
        # Broken: one signal's consolidated estimates below SLA x sensitivity is enough to remove a worker.
        for signal in (ttft, itl):
            if current > low and signal.consolidated and all(c < signal.sla * sens for c in signal.consolidated):
                return LoadProposal(current - 1, load_scaling.DOWN)
        return proposal

    planner.decide_aggregated = decide


def _aggregated_never_down(planner: Planner) -> None:
    def decide(current: int, ttft: load_scaling.Signal, itl: load_scaling.Signal, sens: float, low: int) -> LoadProposal:
        proposal = load_scaling.decide_aggregated(current, ttft, itl, sens, low)
        # Broken: "only if both signal underload" read as "never": an aggregated worker, once added, stays.
        return proposal if proposal.target >= current else LoadProposal(current, load_scaling.HOLD)

    planner.decide_aggregated = decide


def _never_reads(metadata: str) -> Callable[[Planner], None]:
    """A planner hook that hides one field of runtime metadata from every traffic sample."""

    def hook(planner: Planner) -> None:
        measure = planner.traffic.sample

        async def sample(
            engines: Sequence[tuple[str, str]], seconds: float, prefilling: Collection[str] = (), decoding: Collection[str] = ()
        ) -> TrafficSample:
            # Broken: the metadata is never read, so capacity is sized as if it were at its cold-start value.
            return dataclasses.replace(await measure(engines, seconds, prefilling, decoding), **{metadata: None})

        planner.traffic.sample = sample  # type: ignore[method-assign]

    return hook


def _down_when_busy(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        # Broken: the scale-down test is read backwards — busy engines (above SLA x sensitivity) are "consolidated".
        if estimates and current > low and all(e > sla * sens for e in estimates):
            return LoadProposal(current - 1, "busy_engines_consolidated")
        return load_scaling.decide(current, estimates, after, sla, sens, low)

    planner.decide_load = decide


def _no_hysteresis(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        if estimates and all(e > sla for e in estimates):
            return LoadProposal(current + 1, load_scaling.UP)
        # Broken: down as soon as today's estimates are under the SLA — no sensitivity margin, no consolidation guard.
        if estimates and current > low and all(e < sla for e in estimates):
            return LoadProposal(current - 1, "below_sla")
        return LoadProposal(current, load_scaling.HOLD)

    planner.decide_load = decide


def StepsOfTwo() -> ReferenceImplementation:
    """Adds or removes two workers per load interval. Caught by PlannerScalingOneStepPerInterval."""
    return ReferenceImplementation(planner_config_hook=_step_two, planner_hook=_two_at_a_time)


def IgnoresGpuBudget() -> ReferenceImplementation:
    """Never clamps to max_gpu_budget. Caught by PlannerScalingGpuBudgetNeverExceeded."""
    return ReferenceImplementation(planner_config_hook=_no_budget)


def ScalesDownUnderLoad() -> ReferenceImplementation:
    """Removes workers while they are busy, with no throughput floor. Caught by PlannerScalingNeverBelowFloor."""
    return ReferenceImplementation(planner_config_hook=_load_only, planner_hook=_down_when_busy)


def Flaps() -> ReferenceImplementation:
    """Scales down as soon as estimates dip under the SLA (no hysteresis, guard or floor). Caught by PlannerScalingNoFlapping."""
    return ReferenceImplementation(planner_config_hook=_load_only, planner_hook=_no_hysteresis)


def _never_down(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        proposal = load_scaling.decide(current, estimates, after, sla, sens, low)
        # Broken: a proposal to remove a worker is never carried out.
        return proposal if proposal.target >= current else LoadProposal(current, load_scaling.HOLD)

    planner.decide_load = decide


def _never_up(planner: Planner) -> None:
    def decide(current: int, estimates: Sequence[float], after: Sequence[float], sla: float, sens: float, low: int) -> LoadProposal:
        proposal = load_scaling.decide(current, estimates, after, sla, sens, low)
        # Broken: load above the SLA never adds a worker.
        return proposal if proposal.target <= current else LoadProposal(current, load_scaling.HOLD)

    planner.decide_load = decide


def NeverScalesDown() -> ReferenceImplementation:
    """Keeps every worker once added. Caught by PlannerScalingScalesDownAfterLoadFalls."""
    return ReferenceImplementation(planner_config_hook=_load_only, planner_hook=_never_down)


def NeverScalesUp() -> ReferenceImplementation:
    """Adds no worker under load (and has no throughput floor). Caught by PlannerScalingStepReachesSla and
    PlannerScalingMeetsSlaAfterSettling."""
    return ReferenceImplementation(planner_config_hook=_load_only, planner_hook=_never_up)


def BudgetInWorkers() -> ReferenceImplementation:
    """Counts every engine as one GPU, so max_gpu_budget caps workers. Caught by PlannerScalingGpuBudgetNeverExceeded."""
    return ReferenceImplementation(planner_config_hook=_gpus_as_workers)


def IgnoresMinEndpoint() -> ReferenceImplementation:
    """Scales down to one worker whatever min_endpoint says. Caught by PlannerScalingNeverBelowFloor[min-endpoint-*]."""
    return ReferenceImplementation(planner_config_hook=_no_min_endpoint)


def ShedsToTheFloor() -> ReferenceImplementation:
    """Steps by one on the way up, but drops straight to the throughput floor on the way down.
    Caught by PlannerScalingOneStepPerInterval[fall]."""
    return ReferenceImplementation(planner_hook=_sheds_to_floor)


def IgnoresFloor() -> ReferenceImplementation:
    """Lets the load loop go below the throughput floor. Caught by PlannerScalingFloorFromPerfModel."""
    return ReferenceImplementation(planner_hook=_floor_as_start)


def FloorFollowsDips() -> ReferenceImplementation:
    """Predicts the floor from one load interval's traffic, not a longer window, so a short idle period removes it.
    Caught by PlannerScalingFloorFromPerfModel[short-dip]."""
    return ReferenceImplementation(planner_config_hook=_floor_on_load_interval)


def DecodeOnTtft() -> ReferenceImplementation:
    """Scales decode on the prefill engines' TTFT instead of decode's ITL. Caught by PlannerScalingLoadRulesPerComponent."""
    return ReferenceImplementation(planner_hook=_decode_on_ttft)


def UpOnAnyEngine() -> ReferenceImplementation:
    """Adds a worker when any engine, not all, is over the SLA. Caught by PlannerScalingLoadRulesPerComponent[decode-bound]."""
    return ReferenceImplementation(planner_hook=_up_on_any)

def IgnoresAcknowledgements() -> ReferenceImplementation:
    """Writes a new decision without waiting for the last one's acknowledgement. Caught by PlannerScalingAcknowledgementGuard."""
    return ReferenceImplementation(planner_config_hook=_no_ack_wait)


def WaitsForAckForever() -> ReferenceImplementation:
    """Never proceeds past an unacknowledged decision, whatever scaling_ack_timeout_s. Caught by PlannerScalingAcknowledgementGuard."""
    return ReferenceImplementation(planner_config_hook=_no_ack_timeout)



def _doubling_ack_wait(planner: Planner) -> None:
    connector = planner.connector
    assert isinstance(connector, VirtualConnector), f"the ack timeout is the Virtual connector's, not {type(connector).__name__}'s"
    issue = connector.scale_to

    async def scale_to(prefill: int, decode: int) -> str:
        abandoned = await connector.timed_out()
        action = await issue(prefill, decode)
        if action == ISSUED and abandoned:
            connector.ack_timeout_s *= 2  # Broken: each abandoned decision doubles the wait for the next.
        return action

    connector.scale_to = scale_to  # type: ignore[method-assign]


def DoublingAckWait() -> ReferenceImplementation:
    """Waits twice as long after each abandoned decision (6, 12, 24 s against a 6 s timeout): it does not proceed "anyway".
    Caught by PlannerScalingAcknowledgementGuard[never-ack]."""
    return ReferenceImplementation(planner_hook=_doubling_ack_wait)


def AggregatedOnItlOnly() -> ReferenceImplementation:
    """Counts aggregated workers as decode: scales them on ITL alone. Caught by PlannerScalingAggregatedLoadRules[agg-ttft-bound]."""
    return ReferenceImplementation(planner_hook=_aggregated_on_itl_only)


def AggregatedOnTtftOnly() -> ReferenceImplementation:
    """Scales aggregated workers on TTFT alone. Caught by PlannerScalingAggregatedLoadRules[agg-itl-bound]."""
    return ReferenceImplementation(planner_hook=_aggregated_on_ttft_only)


def AggregatedDownOnEither() -> ReferenceImplementation:
    """Removes an aggregated worker when either signal allows it, not both.
    Caught by PlannerScalingAggregatedLoadRules[agg-ttft-bound]: ITL (target 2 s) always allows it there."""
    return ReferenceImplementation(planner_hook=_aggregated_down_on_either)


def AggregatedNeverScalesDown() -> ReferenceImplementation:
    """Never removes an aggregated worker (the disaggregated rule is intact).
    Caught by PlannerScalingScalesDownAfterLoadFalls[agg-load-only]."""
    return ReferenceImplementation(planner_hook=_aggregated_never_down)


def IgnoresKvHitRate() -> ReferenceImplementation:
    """Never reads the KV hit rate: sizes prefill for whole prompts. Caught by PlannerScalingFloorFromPerfModel[prefix-reuse]."""
    return ReferenceImplementation(planner_hook=_never_reads("kv_hit_rate"))


def IgnoresAcceptLength() -> ReferenceImplementation:
    """Never reads speculative decoding's accept length: sizes decode for one token a step.
    Caught by PlannerScalingFloorFromPerfModel[speculative]."""
    return ReferenceImplementation(planner_hook=_never_reads("accept_length"))


# -- on a cluster: the planner pod's choices (``servecert.reference_impl.planner.serve.Hooks``, given as ``--hooks``) --------------


def _by_legacy_names(components: Sequence[Mapping[str, Any]], mode: str) -> Components:
    # Broken: the components are found by their legacy names only, never by type.
    names = [str(c.get("name")) for c in components]
    roles = ("decode",) if mode == AGG else ("prefill", "decode")
    missing = [role for role in roles if role not in names]
    if missing:
        raise DeploymentShapeError(f"no component named {missing}; components: {names}")
    return {role: names.index(role) for role in roles}


def _first_dgd_of_namespace(api: Any, namespace: str, name: str) -> str:
    from kubernetes import client

    from servecert.protocol import kube_names as kn

    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL)
    # Broken: DYN_PARENT_DGD_K8S_NAME is not read; the namespace's first DGD is taken for the planner's own.
    return str(sorted(item["metadata"]["name"] for item in listed["items"])[0])


def _whatever_is_there(components: Sequence[Mapping[str, Any]], mode: str) -> Components:
    try:
        return by_type(components, mode)
    except DeploymentShapeError:
        # Broken: a graph lacking a component is not refused; the planner goes on with the typed components it finds.
        return {role: i for i, c in enumerate(components) for role in (PREFILL, DECODE) if c.get("type") == role}


BY_LEGACY_NAMES = Hooks(resolve=_by_legacy_names)
WHATEVER_IS_THERE = Hooks(resolve=_whatever_is_there)
FIRST_DGD_OF_NAMESPACE = Hooks(parent_dgd=_first_dgd_of_namespace)


def ScalesComponentsByName() -> ReferenceImplementation:
    """On a cluster, scales the components named prefill and decode, whatever their type. Caught by
    PlannerScalesItsOwnDgdByType: it scales the suite's decoys."""
    return ReferenceImplementation(planner_serve_hooks=f"{__name__}:BY_LEGACY_NAMES")


def ScalesFirstDgdOfNamespace() -> ReferenceImplementation:
    """On a cluster, scales the namespace's first DGD, not the one in DYN_PARENT_DGD_K8S_NAME. Caught by
    PlannerScalesItsOwnDgdByType: it scales the bystander."""
    return ReferenceImplementation(planner_serve_hooks=f"{__name__}:FIRST_DGD_OF_NAMESPACE")


SKIPS_MODEL_CHECK = Hooks(check_models=False)


def SkipsModelCheck() -> ReferenceImplementation:
    """On a cluster, starts on a DGD whose prefill and decode components serve different models (it still needs both).
    Caught by PlannerValidatesItsDgdAtStartUp[model-mismatch]."""
    return ReferenceImplementation(planner_serve_hooks=f"{__name__}:SKIPS_MODEL_CHECK")


def StartsWithoutDecode() -> ReferenceImplementation:
    """On a cluster, starts on a DGD that has no decode component and scales the prefill one it finds (it still checks
    the models). Caught by PlannerValidatesItsDgdAtStartUp[no-decode]."""
    return ReferenceImplementation(planner_serve_hooks=f"{__name__}:WHATEVER_IS_THERE")
