"""Diagnostics: what the planner saw and decided each tick, as Prometheus gauges and records.

Each tick produces one ``TickRecord`` (Dynamo's TickDiagnostics): observed and desired counts,
the throughput floor, the mean estimated TTFT/ITL against the SLA, observed and predicted
request rate, each component's decision reason and the action taken. ``Diagnostics.record``
sets the gauges (``servecert_planner_estimated_ttft_ms``, ``..._estimated_itl_ms``,
``..._replicas{component,kind}``, ``..._predicted_rps``) and counts decisions by component and
reason (``servecert_planner_decisions_total``), and keeps the records (bounded) for the HTML
report (``report``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

MAX_RECORDS = 100_000


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
        self.ttft = Gauge("servecert_planner_estimated_ttft_ms", "Mean estimated TTFT of the prefill engines", registry=r)
        self.itl = Gauge("servecert_planner_estimated_itl_ms", "Mean estimated ITL of the decode engines", registry=r)
        self.replicas = Gauge("servecert_planner_replicas", "Workers by component and kind", ["component", "kind"], registry=r)
        self.predicted = Gauge("servecert_planner_predicted_rps", "Predicted requests per simulated second", registry=r)
        self.decisions = Counter(
            "servecert_planner_decisions", "Load-scaling decisions by component and reason", ["component", "reason"], registry=r
        )
        self.records: deque[TickRecord] = deque(maxlen=MAX_RECORDS)

    def record(self, rec: TickRecord) -> None:
        self.records.append(rec)
        if rec.ttft_ms is not None:
            self.ttft.set(rec.ttft_ms)
        if rec.itl_ms is not None:
            self.itl.set(rec.itl_ms)
        if rec.predicted_rps is not None:
            self.predicted.set(rec.predicted_rps)
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
        if rec.prefill_reason:
            self.decisions.labels("prefill", rec.prefill_reason).inc()
        if rec.decode_reason:
            self.decisions.labels("decode", rec.decode_reason).inc()
