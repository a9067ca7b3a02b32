"""Every wait of the suite, in one settings object.

Implementations differ in how fast they deploy and converge, so waits must be tunable (gateway-api
#1287, GAIE #1048) — but a wait is also part of what conformance means: a router that takes a
minute to notice a new worker is not conformant however long the suite is willing to wait. So
each field says its unit, its default and the bound a conformant implementation must meet
(``bound``; None when the field paces the suite rather than the implementation), like
gateway-api ``conformance/utils/config/timeout.go``. Defaults < ``--timeouts-file`` (YAML mapping
of key to number) < ``--timeout KEY=VALUE``; an unknown key is an error that lists the known ones.
The report records overrides, and the ones beyond a conformant bound.
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


def _setting(default: float, unit: str, doc: str, *, bound: float | None = None, kind: str = MAXIMUM) -> Any:
    return field(default=default, metadata={"unit": unit, "doc": doc, "bound": bound, "kind": kind})


@dataclass(frozen=True)
class Timeouts:
    deploy_ready_s: float = _setting(
        30.0,
        "s",
        "From DeploymentSpec to a frontend that answers and every worker ready: ctx.deploy() fails after this. "
        "Conformant bound: 30 s in the process environment.",
        bound=30.0,
    )
    request_s: float = _setting(
        30.0,
        "s",
        "One HTTP request to the frontend, from sending to the last byte of the response. "
        "Conformant bound: 30 s for the suite's short prompts.",
        bound=30.0,
    )
    eventual_consistency_s: float = _setting(
        10.0,
        "s",
        "A worker joining or leaving is reflected in routing (required_consecutive_successes in a row) within this. "
        "Conformant bound: 10 s.",
        bound=10.0,
    )
    poll_interval_s: float = _setting(
        0.05, "s", "Pause between two polls of an eventually-consistent condition. Paces the suite; no bound."
    )
    test_s: float = _setting(
        120.0, "s", "One case of one test, deployment and checks included (cleanups excluded). Paces the suite; no bound."
    )
    cleanup_s: float = _setting(
        30.0, "s", "Each cleanup of a case (a deployment's close(), an add_cleanup callable) and the environment's close(). No bound."
    )
    required_consecutive_successes: int = _setting(
        3,
        "count",
        "Observations in a row that must agree before an eventually-consistent condition counts as reached. Conformant bound: at least 3.",
        bound=3,
        kind=MINIMUM,
    )
    # Cluster environment (OPERATOR-TOPOLOGY, INFERENCESERVICE-API).
    operator_reconcile_s: float = _setting(
        30.0,
        "s",
        "From applying a DGD or InferenceService (or changing it) to the operator's objects matching it, labels injected after "
        "binding, status updated. Conformant bound: 30 s on the embedded cluster.",
        bound=30.0,
    )
    pods_ready_s: float = _setting(
        60.0, "s", "From applying a resource to every pod it asks for being Ready on the embedded cluster. Paces the suite; no bound."
    )
    # ROLLOUT-ISOLATION.
    rollout_s: float = _setting(
        180.0,
        "s",
        "From changing the suite's DGD (1 frontend, 2 prefill, 2 decode) to only the final version's pods running, all Ready, "
        "under streaming load. Paces the suite; no bound.",
    )
    weight_follow_s: float = _setting(
        2.0,
        "s",
        "How far the traffic split may lag the ready ratio of old and new workers (seed 001 4.3.3: weights change as workers "
        "become ready). Conformant bound: 2 s.",
        bound=2.0,
    )
    # GANG-SCHEDULING.
    gang_bound_s: float = _setting(
        30.0,
        "s",
        "From a gang's pods existing (or the capacity it waits for appearing) to every pod the scheduler should place being "
        "bound. Conformant bound: 30 s on the embedded cluster.",
        bound=30.0,
    )
    gang_settle_s: float = _setting(
        5.0,
        "s",
        "How long the suite watches pods that must stay unbound (too little room for their gang) before it accepts that they "
        "do. Longer is stricter. Conformant bound: at least 3 s (15 cycles of the embedded Volcano).",
        bound=3.0,
        kind=MINIMUM,
    )
    gang_bind_window_s: float = _setting(
        2.0,
        "s",
        "Longest a replica, or a prefill replica without a decode replica, may be seen partly bound while the scheduler "
        "issues the bindings of one decision (they reach the API one by one). Conformant bound: at most 2 s.",
        bound=2.0,
    )
    # PLANNER-SCALING. Scenario times are simulated seconds; the suite divides them by planner_time_scale.
    planner_time_scale: float = _setting(
        4.0,
        "ratio",
        "Simulated seconds per real second in planner scenarios: engines' delays, the planner's intervals and model-load "
        "time all divide by it. Paces the suite; no bound.",
    )
    planner_load_interval_s: float = _setting(
        2.0, "simulated s", "The load (fast) interval given to the planner; other planner bounds count in it. Paces the suite; no bound."
    )
    planner_throughput_interval_s: float = _setting(
        6.0, "simulated s", "The throughput (slow, predictive) interval given to the planner. Paces the suite; no bound."
    )
    planner_engine_startup_s: float = _setting(
        3.0, "simulated s", "Model-load time of every worker the suite's harness adds. Paces the suite; no bound."
    )
    planner_step_intervals: int = _setting(
        2,
        "count",
        "Load intervals: after a load step that needs k more workers of a component, each of the k may take this many plus "
        "one engine start-up. Conformant bound: at most 2.",
        bound=2,
    )
    planner_settle_intervals: int = _setting(
        3,
        "count",
        "Load intervals added once to the step allowance above before requests must meet the SLA again. Conformant bound: at most 3.",
        bound=3,
    )
    planner_scale_down_intervals: int = _setting(
        4,
        "count",
        "Load intervals: after load falls, the first scale-down comes within 2 throughput intervals (the floor's window must "
        "pass) plus this many, and each further one needed within this many more. Conformant bound: at most 4.",
        bound=4,
    )
    planner_flap_window_intervals: int = _setting(
        10,
        "count",
        "Load intervals in which the direction of scaling may change at most planner_max_direction_changes times under "
        "steady load. Conformant bound: at least 10.",
        bound=10,
        kind=MINIMUM,
    )
    planner_max_direction_changes: int = _setting(
        1, "count", "Changes of scaling direction allowed per flap window under steady load. Conformant bound: at most 1.", bound=1
    )
    planner_sla_attainment: float = _setting(
        0.95,
        "ratio",
        "Share of requests sent after scaling settled that must meet both the TTFT and the ITL SLA. Conformant bound: at least 0.95.",
        bound=0.95,
        kind=MINIMUM,
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


def describe() -> list[str]:
    """One line per field: key, default with unit, and the documentation (for --help and the docs)."""
    return [f"{f.name} (default {f.default} {f.metadata['unit']}): {f.metadata['doc']}" for f in dataclasses.fields(Timeouts)]


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
