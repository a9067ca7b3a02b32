"""The planner's HTML report: replicas, load and estimated latency against the SLA over time.

Reads the ``TickRecord``s and renders four matplotlib figures (Agg backend, PNG embedded as
base64, so the page is one self-contained file) plus the list of decisions. matplotlib is
imported here only, when a report is written.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servecert.reference_impl.planner.config import PlannerConfig
from servecert.reference_impl.planner.diagnostics import TickRecord


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def figures(records: Sequence[TickRecord], cfg: PlannerConfig) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r.t_s for r in records]
    out: list[tuple[str, str]] = []

    fig, ax = plt.subplots(figsize=(10, 3.2))
    for attr, label, style in (
        ("prefill", "prefill (ready)", "-"),
        ("decode", "decode (ready)", "-"),
        ("desired_prefill", "prefill (desired)", "--"),
        ("desired_decode", "decode (desired)", "--"),
        ("floor_prefill", "prefill floor", ":"),
        ("floor_decode", "decode floor", ":"),
    ):
        ax.step(t, [getattr(r, attr) if getattr(r, attr) is not None else float("nan") for r in records], style, where="post", label=label)
    ax.set_xlabel("simulated s")
    ax.set_ylabel("workers")
    ax.legend(loc="upper left", fontsize=7, ncols=3)
    out.append(("Replicas", _png(fig)))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 3.2))
    ax.plot(t, [r.observed_rps if r.observed_rps is not None else float("nan") for r in records], "o-", ms=3, label="observed")
    ax.plot(t, [r.predicted_rps if r.predicted_rps is not None else float("nan") for r in records], "x--", ms=3, label="predicted")
    ax.set_xlabel("simulated s")
    ax.set_ylabel("requests / simulated s")
    ax.legend(fontsize=7)
    out.append(("Load (throughput windows)", _png(fig)))
    plt.close(fig)

    for attr, sla, title in (("ttft_ms", cfg.ttft_ms, "Estimated TTFT"), ("itl_ms", cfg.itl_ms, "Estimated ITL")):
        fig, ax = plt.subplots(figsize=(10, 3.2))
        values = [getattr(r, attr) if getattr(r, attr) is not None else float("nan") for r in records]
        ax.plot(t, values, label="estimate (mean of engines)")
        ax.axhline(sla, color="red", label="SLA")
        ax.axhline(sla * cfg.scale_down_sensitivity, color="orange", ls="--", label="SLA x sensitivity")
        ax.set_xlabel("simulated s")
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
        out.append((title, _png(fig)))
        plt.close(fig)
    return out


def write_html(records: Sequence[TickRecord], cfg: PlannerConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    images = "".join(f"<h2>{html.escape(title)}</h2><img src='data:image/png;base64,{data}'/>" for title, data in figures(records, cfg))
    rows = "".join(
        f"<tr><td>{r.t_s:.1f}</td><td>{r.prefill}->{r.desired_prefill}</td><td>{r.decode}->{r.desired_decode}</td>"
        f"<td>{html.escape(r.prefill_reason)}</td><td>{html.escape(r.decode_reason)}</td><td>{html.escape(r.action)}</td>"
        f"<td>{html.escape(', '.join(r.notes))}</td></tr>"
        for r in records
        if r.action == "issued"
    )
    settings = html.escape(
        f"TTFT SLA {cfg.ttft_ms:g} ms, ITL SLA {cfg.itl_ms:g} ms, load interval {cfg.load_interval_s:g} s, throughput interval "
        f"{cfg.throughput_interval_s:g} s, min_endpoint {cfg.min_endpoint}, GPU budget {cfg.max_gpu_budget}, predictor "
        f"{cfg.predictor}, time scale {cfg.time_scale:g}"
    )
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>servecert planner report</title>"
        "<style>body{font-family:sans-serif;margin:1em 2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px}</style>"
        f"</head><body><h1>Reference planner</h1><p>{settings}</p>{images}"
        "<h2>Decisions</h2><table><tr><th>simulated s</th><th>prefill</th><th>decode</th><th>prefill reason</th>"
        f"<th>decode reason</th><th>action</th><th>constraints</th></tr>{rows}</table></body></html>"
    )
    return path
