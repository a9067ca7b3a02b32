"""Diagnostics: what the planner saw and decided each tick, as Prometheus gauges and records.

Each tick produces one ``TickRecord`` (Dynamo's TickDiagnostics): observed and desired counts,
the throughput floor, the mean estimated TTFT/ITL against the SLA, observed and predicted
request rate, each component's decision reason and the action taken. ``Diagnostics.record``
sets the gauges under seed 003's names (Diagnostics: "Sets Prometheus gauges (e.g.
dynamo_planner_estimated_ttft_ms and related estimates) - Records enum metrics for load-scaling
decision reasons (dynamo_planner_load_scaling_decision)"; "Per-engine FPM queue depths ... are
exported as labeled Prometheus gauges"): ``dynamo_planner_estimated_{ttft,itl}_ms``,
``..._num_{prefill,decode}_replicas``, ``..._{observed,predicted}_requests_per_second``,
``..._load_scaling_decision{component}`` (an enum of ``DECISIONS``), per engine
``..._engine_queued_prefill_tokens`` and ``..._engine_inflight_decode_kv_tokens``
``{worker_id,dp_rank}``; and the suite's own ``..._replicas{component,kind}`` (observed, desired,
floor) and ``..._load_scaling_decisions_total{component,reason}``. It keeps the records (bounded)
for the HTML report (``report``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge

from servecert.reference_impl.planner.estimate import EngineLoad

MAX_RECORDS = 100_000
PREFIX = "dynamo_planner"
OTHER = "other"  # a reason outside DECISIONS (a planner built on the reference may add its own)
DECISIONS = (
    "unset",
    "no_observations",
    "scaling_in_progress",
    "worker_count_mismatch",
    "within_band",
    "all_above_sla",
    "consolidation_below_sla",
    "scale_down_stabilising",
    "load_rising",
    "load_scaling_disabled",
    OTHER,
)
ENGINE_LABELS = ("worker_id", "dp_rank")


@dataclass(frozen=True)
class TickRecord:
    t_s: float  # simulated seconds since the planner started
    prefill: int
    decode: int
    desired_prefill: int
    desired_decode: int
    floor_prefill: int | None = None
    floor_decode: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    observed_rps: float | None = None
    predicted_rps: float | None = None
    prefill_reason: str = ""
    decode_reason: str = ""
    action: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    ttft_after_ms: float | None = None  # the estimate after consolidating N engines into N-1 (the scale-down guard)
    itl_after_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


class Diagnostics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        r = self.registry
        self.ttft = Gauge(f"{PREFIX}_estimated_ttft_ms", "Mean estimated TTFT of the prefill engines (ms)", registry=r)
        self.itl = Gauge(f"{PREFIX}_estimated_itl_ms", "Mean estimated ITL of the decode engines (ms)", registry=r)
        self.num = {c: Gauge(f"{PREFIX}_num_{c}_replicas", f"Current number of {c} workers", registry=r) for c in ("prefill", "decode")}
        self.replicas = Gauge(f"{PREFIX}_replicas", "Workers by component and kind (observed, desired, floor)", ["component", "kind"],
                              registry=r)
        self.observed = Gauge(f"{PREFIX}_observed_requests_per_second", "Requests per simulated second, last window", registry=r)
        self.predicted = Gauge(f"{PREFIX}_predicted_requests_per_second", "Requests per simulated second planned for", registry=r)
        self.decision = Enum(f"{PREFIX}_load_scaling_decision", "Load-based scaling decision reason", ["component"], states=list(DECISIONS),
                             registry=r)
        self.decisions = Counter(f"{PREFIX}_load_scaling_decisions", "Load-scaling decisions by component and reason",
                                 ["component", "reason"], registry=r)
        self.queued_prefill = Gauge(f"{PREFIX}_engine_queued_prefill_tokens", "Time-weighted waiting prefill tokens per engine (FPM)",
                                    ENGINE_LABELS, registry=r)
        self.inflight_decode = Gauge(f"{PREFIX}_engine_inflight_decode_kv_tokens",
                                     "Time-weighted scheduled decode KV tokens per engine (FPM)", ENGINE_LABELS, registry=r)
        self._engines: set[str] = set()
        self.records: deque[TickRecord] = deque(maxlen=MAX_RECORDS)

    def record(self, rec: TickRecord, engines: Sequence[EngineLoad] = ()) -> None:
        """Keep ``rec`` and set the gauges from it and from this tick's per-engine ``engines`` loads."""
        self.records.append(rec)
        for gauge, value in ((self.ttft, rec.ttft_ms), (self.itl, rec.itl_ms), (self.observed, rec.observed_rps),
                             (self.predicted, rec.predicted_rps)):
            if value is not None:
                gauge.set(value)
        self.num["prefill"].set(rec.prefill)
        self.num["decode"].set(rec.decode)
        for component, kind, value in (
            ("prefill", "observed", rec.prefill),
            ("decode", "observed", rec.decode),
            ("prefill", "desired", rec.desired_prefill),
            ("decode", "desired", rec.desired_decode),
            ("prefill", "floor", rec.floor_prefill),
            ("decode", "floor", rec.floor_decode),
        ):
            if value is not None:
                self.replicas.labels(component, kind).set(value)
        for component, reason in (("prefill", rec.prefill_reason), ("decode", rec.decode_reason)):
            if reason:
                self.decision.labels(component).state(reason if reason in DECISIONS else OTHER)
                self.decisions.labels(component, reason).inc()
        self._engine_gauges(engines)

    def _engine_gauges(self, engines: Sequence[EngineLoad]) -> None:
        """One series per engine seen this tick; an engine gone since the last tick loses its series."""
        seen = {e.engine_id for e in engines}
        for gone in self._engines - seen:
            self.queued_prefill.remove(gone, "0")
            self.inflight_decode.remove(gone, "0")
        for e in engines:
            self.queued_prefill.labels(e.engine_id, "0").set(e.waiting_prefill_tokens)
            self.inflight_decode.labels(e.engine_id, "0").set(e.active_decode_kv_tokens)
        self._engines = seen
