"""Every wait of the suite, in one settings object.

Implementations differ in how fast they deploy and converge, so waits must be tunable (gateway-api
#1287, GAIE #1048) — but a wait is also part of what conformance means: a router that takes a
minute to notice a new worker is not conformant however long the suite is willing to wait. So
each field says its unit, its default and the bound a conformant implementation must meet
(``bound``; None when the field paces the suite rather than the implementation), like
gateway-api ``conformance/utils/config/timeout.go``. Defaults < ``--timeouts-file`` (YAML mapping
of key to number) < ``--timeout KEY=VALUE``; an unknown key is an error that lists the known ones.
The report records overrides, and the ones beyond a conformant bound. Each field also names its
``concern`` (``CONCERNS``: the suite, or the profile whose checks read it); the class holds them
grouped by concern, and ``describe`` and docs/suite.md list them so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAXIMUM = "max"  # a conformant implementation stays within the bound
MINIMUM = "min"  # the suite must demand at least this much


CONCERNS: dict[str, str] = {
    "suite": "The suite: deployments, requests, cases and cleanups",
    "router": "ROUTER-TOPOLOGY: routing that follows workers joining and leaving",
    "operator": "Cluster environment: OPERATOR-TOPOLOGY and INFERENCESERVICE-API",
    "gang": "GANG-SCHEDULING",
    "rollout": "ROLLOUT-ISOLATION",
    "planner": "PLANNER-SCALING (scenario times are simulated seconds; the suite divides them by planner_time_scale)",
}
"""Concern -> heading: each field belongs to one, and lists of the fields for humans group by it, in this order."""


def _setting(default: float, unit: str, doc: str, *, concern: str, bound: float | None = None, kind: str = MAXIMUM) -> Any:
    if concern not in CONCERNS:
        raise ValueError(f"timeout concern {concern!r} is none of {', '.join(CONCERNS)}")
    return field(default=default, metadata={"unit": unit, "doc": doc, "bound": bound, "kind": kind, "concern": concern})


@dataclass(frozen=True)
class Timeouts:
    # -- suite: deployments, requests, cases and cleanups.
    deploy_ready_s: float = _setting(
        30.0,
        "s",
        "From DeploymentSpec to a frontend that answers and every worker ready: ctx.deploy() fails after this "
        "(on a cluster, pods_ready_s bounds it). Conformant bound: 30 s in the process environment.",
        concern="suite",
        bound=30.0,
    )
    request_s: float = _setting(
        30.0,
        "s",
        "One HTTP request to the frontend, from sending to the last byte of the response. "
        "Conformant bound: 30 s for the suite's short prompts.",
        concern="suite",
        bound=30.0,
    )
    test_s: float = _setting(
        120.0,
        "s",
        "One case of one test, deployment and checks included (cleanups excluded); a planner scenario's case gets its "
        "scenario's real length (simulated length / planner_time_scale) on top. Paces the suite; no bound.",
        concern="suite",
    )
    cleanup_s: float = _setting(
        30.0,
        "s",
        "Each cleanup of a case (a deployment's close(), an add_cleanup callable) and the environment's close(). No bound.",
        concern="suite",
    )
    # -- router: ROUTER-TOPOLOGY, routing that follows workers joining and leaving.
    eventual_consistency_s: float = _setting(
        10.0,
        "s",
        "A worker joining or leaving is reflected in routing (required_consecutive_successes in a row) within this. "
        "Conformant bound: 10 s.",
        concern="router",
        bound=10.0,
    )
    poll_interval_s: float = _setting(
        0.05,
        "s",
        "Pause between two polls of an eventually-consistent condition. Paces the suite; no bound.",
        concern="router",
    )
    required_consecutive_successes: int = _setting(
        3,
        "count",
        "Observations in a row that must agree before an eventually-consistent condition counts as reached. Conformant bound: at least 3.",
        concern="router",
        bound=3,
        kind=MINIMUM,
    )
    cluster_routing_grace_s: float = _setting(
        3.0,
        "s",
        "Cluster environment, an implementation without a routing probe (servecert.adapters.contract.RoutingProbe): how long the "
        "suite waits, once every worker pod is Ready and registered and the DGD is Ready, before it sends a case's traffic. "
        "Paces the suite; no bound.",
        concern="router",
    )
    # -- operator: the cluster environment (OPERATOR-TOPOLOGY, INFERENCESERVICE-API).
    operator_reconcile_s: float = _setting(
        30.0,
        "s",
        "From applying a DGD or InferenceService (or changing it) to the operator's objects matching it, labels injected after "
        "binding, status updated. Conformant bound: 30 s on the embedded cluster.",
        concern="operator",
        bound=30.0,
    )
    pods_ready_s: float = _setting(
        60.0,
        "s",
        "From applying a resource to every pod it asks for being Ready on the embedded cluster. Paces the suite; no bound.",
        concern="operator",
    )
    operator_unbound_hold_s: float = _setting(
        3.0,
        "s",
        "How long OperatorTopologyLabelsAfterBinding keeps the DGD's workers unbound (no node has the resource they ask for yet) "
        "while the suite's watch looks for topology labels set before binding. Longer is stricter. Conformant bound: at least 3 s.",
        concern="operator",
        bound=3.0,
        kind=MINIMUM,
    )
    worker_topology_wait_s: float = _setting(
        10.0,
        "s",
        "DYN_TOPOLOGY_WAIT_SECONDS given to the workers of the WorkerTopologyStartup tests: the retry period a worker waits for"
        " its topology file before it must exit non-zero; the exit must come no sooner (within the API's 1 s timestamps), and a"
        " label patched at half the period must let the worker start. The suite waits this plus pods_ready_s for the exit. "
        "Longer tells a worker with no retry period apart better (its start-up alone took 2 s on a quiet machine, more on a "
        "busy one). Conformant bound: at least 10 s.",
        concern="operator",
        bound=10.0,
        kind=MINIMUM,
    )
    inference_service_unbound_hold_s: float = _setting(
        3.0,
        "s",
        "How long InferenceServiceStatus keeps every pod of the service unschedulable while status.components must report no "
        "ready pod and no Running phase. Longer is stricter. Conformant bound: at least 3 s.",
        concern="operator",
        bound=3.0,
        kind=MINIMUM,
    )
    inference_service_update_s: float = _setting(
        120.0,
        "s",
        "From an InferenceService's spec change to every pod it changed replaced, Ready, labelled with the new generation, and "
        "status.observedGeneration at it. The reference, replacing a role's replicas one at a time, took 17 s for story 2 (four "
        "decode replicas in turn) on a quiet machine. Conformant bound: 120 s on the embedded cluster.",
        concern="operator",
        bound=120.0,
    )
    # -- gang: GANG-SCHEDULING.
    gang_bound_s: float = _setting(
        30.0,
        "s",
        "From a gang's pods existing (or the capacity it waits for appearing) to every pod the scheduler should place being "
        "bound. Conformant bound: 30 s on the embedded cluster.",
        concern="gang",
        bound=30.0,
    )
    gang_settle_s: float = _setting(
        5.0,
        "s",
        "How long the suite watches pods that must stay unbound (too little room for their gang) before it accepts that they "
        "do. Longer is stricter. Conformant bound: at least 3 s (15 cycles of the embedded Volcano).",
        concern="gang",
        bound=3.0,
        kind=MINIMUM,
    )
    gang_bind_window_s: float = _setting(
        2.0,
        "s",
        "Longest a replica, or a prefill replica without a decode replica, may be seen partly bound while the scheduler "
        "issues the bindings of one decision (they reach the API one by one). Conformant bound: at most 2 s.",
        concern="gang",
        bound=2.0,
    )
    gang_nodes_ready_s: float = _setting(
        30.0,
        "s",
        "From creating a case's kwok nodes to kwok reporting them Ready; the gang tests wait for that so a scheduler that parks "
        "pods until a node event gets a fair start. Paces the suite; no bound.",
        concern="gang",
    )
    gang_node_step_s: float = _setting(
        1.0,
        "s",
        "GangReplicaAtomicity: the pause between two of story 4's nodes arriving, after which the bindings seen so far are "
        "checked. Shorter gives a scheduler that binds part of a replica less time to show it before the next node arrives. "
        "Conformant bound: at least 1 s.",
        concern="gang",
        bound=1.0,
        kind=MINIMUM,
    )
    # -- rollout: ROLLOUT-ISOLATION.
    rollout_s: float = _setting(
        180.0,
        "s",
        "From changing the suite's DGD (1 frontend, 2 prefill, 2 decode) to only the final version's pods running, all Ready, "
        "under streaming load. Paces the suite; no bound.",
        concern="rollout",
    )
    weight_follow_s: float = _setting(
        2.0,
        "s",
        "How far the traffic split may lag the ready ratio of old and new workers (seed 001 4.3.3: weights change as workers "
        "become ready). Conformant bound: 2 s.",
        concern="rollout",
        bound=2.0,
    )
    rollout_share_tolerance: float = _setting(
        0.05,
        "fraction",
        "How far the new version's share of the requests of one ratio phase of a rollout may stray from the ready ratio (allowing "
        "weight_follow_s), beyond three binomial standard errors, seed 001 4.3. Conformant bound: at most 0.1.",
        concern="rollout",
        bound=0.1,
    )
    rollout_ratio_grace_s: float = _setting(
        1.0,
        "s",
        "Longest a side of a rollout may run its prefill:decode ratio more than one worker off (seed 001 4.1.2): a controller "
        "creates one pod per API call, so one step passes through such a moment for a round trip. Conformant bound: at most 1 s.",
        concern="rollout",
        bound=1.0,
    )
    rollout_deleted_route_s: float = _setting(
        5.0,
        "s",
        "Longest requests may still reach a worker after its deletion began (seed 001 4.1.2 T4; its streams in flight finish, "
        "and frontends learn of it through discovery). Conformant bound: at most 5 s.",
        concern="rollout",
        bound=5.0,
    )
    rollout_starve_s: float = _setting(
        5.0,
        "s",
        "Longest a worker may be Ready, while traffic runs and its version could serve, without serving a request (seed 001 3.1: "
        "its model card discarded). Conformant bound: at most 5 s.",
        concern="rollout",
        bound=5.0,
    )
    rollout_warm_s: float = _setting(
        2.0,
        "s",
        "Streaming traffic runs this long before the suite changes the DGD; rollout_starve_s counts from there. Paces the suite; no bound.",
        concern="rollout",
    )
    rollout_tail_s: float = _setting(
        2.0,
        "s",
        "Streaming traffic keeps running this long after the rollout's end (the final version alone, all Ready); a request "
        "that fails then fails the case. Longer is stricter. Conformant bound: at least 2 s.",
        concern="rollout",
        bound=2.0,
        kind=MINIMUM,
    )
    rollout_pause_settle_s: float = _setting(
        2.0,
        "s",
        "RolloutPauseResume: time for the operator to see paused: true (a step decided just before may still land) before the "
        "suite counts the pods. Conformant bound: at most 2 s.",
        concern="rollout",
        bound=2.0,
    )
    rollout_pause_ready_s: float = _setting(
        60.0,
        "s",
        "RolloutPauseResume: at most this long for the workers already on their way up at the pause to become Ready (the suite "
        "then goes on; it does not fail). Paces the suite; no bound.",
        concern="rollout",
    )
    rollout_pause_hold_s: float = _setting(
        5.0,
        "s",
        "RolloutPauseResume: once those workers are Ready, the paused rollout must create and delete nothing for this long more. "
        "Longer is stricter. Conformant bound: at least 5 s.",
        concern="rollout",
        bound=5.0,
        kind=MINIMUM,
    )
    rollout_controller_dead_s: float = _setting(
        4.0,
        "s",
        "RolloutControllerRestart: the controller stays killed this long mid-rollout, and nothing may be created or deleted "
        "meanwhile. Longer is stricter. Conformant bound: at least 4 s.",
        concern="rollout",
        bound=4.0,
        kind=MINIMUM,
    )
    rollout_controller_restart_s: float = _setting(
        10.0,
        "s",
        "RolloutControllerRestart: how long a started-again controller may take to read the cluster and set the traffic split "
        "again; the split may lag by the outage plus this. Conformant bound: at most 10 s.",
        concern="rollout",
        bound=10.0,
    )
    rollout_proxy_replace_s: float = _setting(
        30.0,
        "s",
        "RolloutProxyReplicaLoss: once the rollout is over, how long the DGD's proxy Service may take to have again as many "
        "Ready endpoints as before a replica was deleted. Conformant bound: at most 30 s.",
        concern="rollout",
        bound=30.0,
    )
    # -- planner: PLANNER-SCALING. Scenario times are simulated seconds; the suite divides them by planner_time_scale.
    planner_time_scale: float = _setting(
        4.0,
        "ratio",
        "Simulated seconds per real second in planner scenarios: engines' delays, the planner's intervals and model-load "
        "time all divide by it. Paces the suite; no bound.",
        concern="planner",
    )
    planner_load_interval_s: float = _setting(
        2.0,
        "simulated s",
        "The load (fast) interval given to the planner; other planner bounds count in it. Paces the suite; no bound.",
        concern="planner",
    )
    planner_throughput_interval_s: float = _setting(
        6.0,
        "simulated s",
        "The throughput (slow, predictive) interval given to the planner. Paces the suite; no bound.",
        concern="planner",
    )
    planner_engine_startup_s: float = _setting(
        3.0,
        "simulated s",
        "Model-load time of every worker the suite's harness adds. Paces the suite; no bound.",
        concern="planner",
    )
    planner_step_intervals: int = _setting(
        2,
        "count",
        "Load intervals: after a load step that needs k more workers of a component, each of the k may take this many plus "
        "one engine start-up. Conformant bound: at most 2.",
        concern="planner",
        bound=2,
    )
    planner_settle_intervals: int = _setting(
        3,
        "count",
        "Load intervals added once to the step allowance above before requests must meet the SLA again. Conformant bound: at most 3.",
        concern="planner",
        bound=3,
    )
    planner_scale_down_intervals: int = _setting(
        4,
        "count",
        "Load intervals: after load falls, the first scale-down comes within 2 throughput intervals (the floor's window must "
        "pass) plus this many, and each further one needed within this many more. Conformant bound: at most 4.",
        concern="planner",
        bound=4,
    )
    planner_flap_window_intervals: int = _setting(
        10,
        "count",
        "Load intervals in which the direction of scaling may change at most planner_max_direction_changes times under "
        "steady load. Conformant bound: at least 10.",
        concern="planner",
        bound=10,
        kind=MINIMUM,
    )
    planner_max_direction_changes: int = _setting(
        1,
        "count",
        "Changes of scaling direction allowed per flap window under steady load. Conformant bound: at most 1.",
        concern="planner",
        bound=1,
    )
    planner_sla_attainment: float = _setting(
        0.95,
        "ratio",
        "Share of requests sent after scaling settled that must meet both the TTFT and the ITL SLA. Conformant bound: at least 0.95.",
        concern="planner",
        bound=0.95,
        kind=MINIMUM,
    )
    planner_validation_s: float = _setting(
        10.0,
        "s",
        "PlannerValidatesItsDgdAtStartUp: once the planner's container has started on a DGD it must refuse, how long the "
        "suite watches it neither turn Ready nor change the DGD. Longer is stricter. Conformant bound: at least 10 s.",
        concern="planner",
        bound=10.0,
        kind=MINIMUM,
    )
    planner_interval_jitter: float = _setting(
        0.25,
        "fraction",
        "Fraction of a load interval tolerated for timer jitter between two changes of one component: changes closer than "
        "(1 - this) load intervals are a violation. Conformant bound: at most 0.25.",
        concern="planner",
        bound=0.25,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if getattr(self, f.name) <= 0:
                raise TimeoutsError(f"timeout {f.name} must be > 0, got {getattr(self, f.name)}")

    def overrides(self) -> dict[str, float]:
        """The fields that differ from the defaults."""
        default = Timeouts()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(default, f.name)}

    def beyond_bounds(self) -> dict[str, float]:
        """The overridden fields that a conformant implementation is not held to any more."""
        out: dict[str, float] = {}
        for f in dataclasses.fields(self):
            bound, value = f.metadata["bound"], getattr(self, f.name)
            if bound is not None and (value > bound if f.metadata["kind"] == MAXIMUM else value < bound):
                out[f.name] = value
        return out


class TimeoutsError(ValueError):
    """A timeout override that cannot be applied; the message says which and lists the known keys."""


def keys() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Timeouts))


def by_concern() -> dict[str, tuple[str, ...]]:
    """Concern -> its keys, in ``CONCERNS`` order, each concern's keys in the class's order."""
    fields = dataclasses.fields(Timeouts)
    return {concern: tuple(f.name for f in fields if f.metadata["concern"] == concern) for concern in CONCERNS}


def describe() -> list[str]:
    """One line per field, grouped by concern: ``[concern] key (default with unit): documentation`` (for --help and the docs)."""
    fields = {f.name: f for f in dataclasses.fields(Timeouts)}
    return [
        f"[{concern}] {name} (default {fields[name].default} {fields[name].metadata['unit']}): {fields[name].metadata['doc']}"
        for concern, names in by_concern().items()
        for name in names
    ]


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (``;`` may also separate pairs, as in gateway-api) to a mapping."""
    out: dict[str, str] = {}
    for chunk in pairs:
        for pair in filter(None, (p.strip() for p in chunk.split(";"))):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise TimeoutsError(f"timeout override {pair!r} is not KEY=VALUE; known keys: {', '.join(keys())}")
            out[key.strip()] = value.strip()
    return out


def load_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TimeoutsError(f"cannot read timeouts file {path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TimeoutsError(f"timeouts file {path} must hold a mapping of key to number, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def apply(base: Timeouts, values: Mapping[str, Any], *, source: str) -> Timeouts:
    """``base`` with ``values`` applied; unknown keys and non-numbers raise TimeoutsError."""
    fields = {f.name: f for f in dataclasses.fields(Timeouts)}
    unknown = sorted(set(values) - fields.keys())
    if unknown:
        raise TimeoutsError(f"{source}: unknown timeout key(s) {', '.join(unknown)}; known keys: {', '.join(fields)}")
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        number_type = int if fields[key].type in (int, "int") else float
        try:
            changes[key] = number_type(raw)
        except (TypeError, ValueError):
            raise TimeoutsError(
                f"{source}: timeout {key} must be {'an integer' if number_type is int else 'a number'}, got {raw!r}"
            ) from None
    return dataclasses.replace(base, **changes)


def resolve(file: Path | None = None, pairs: Iterable[str] = (), *, flag: str = "--timeout") -> Timeouts:
    """Defaults, then the file, then the KEY=VALUE pairs (``flag`` names them in errors)."""
    result = Timeouts()
    if file is not None:
        result = apply(result, load_file(file), source=f"timeouts file {file}")
    return apply(result, parse_pairs(pairs), source=flag)
