"""The load report: per-request CSV, a JSON summary with exact percentiles, an HTML page with plots.

Reads the exact samples the locust processes wrote (``samples/*.jsonl``) and writes, next to
locust's own CSV: ``requests.csv`` (one row per request), ``summary.json``
(``metrics.summarise``: rates, exact TTFT/TPOT/ITL/E2E percentiles, errors by kind, goodput with
the thresholds used; the verdict: each limit and those missed), and ``report.html`` — the
verdict, latency over time (TTFT and TPOT per request with their rolling p50/p95), throughput
(requests and output tokens per second) and errors per kind over time, as PNG images embedded in
one self-contained page (matplotlib, Agg backend).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from servecert.load.metrics import Sample, Thresholds, read_samples, summarise
from servecert.load.profiles import Profile
from servecert.load.verdict import Limit, judge

__all__ = ["Thresholds", "write"]
BIN_S = 10.0


def write(folder: Path, profile: Profile, thresholds: Thresholds, limits: Sequence[Limit] = (), host: str = "") -> tuple[Path, list[str]]:
    """The reports of the run in ``folder``; the page's path and the limits the run missed (one sentence each)."""
    samples = read_samples(sorted((folder / "samples").glob("*.jsonl")))
    _csv(folder / "requests.csv", samples)
    summary = {"profile": profile.name, "description": profile.description, "host": host, **summarise(samples, thresholds)}
    missed = judge(summary, limits)
    summary["verdict"] = {"limits": [str(limit) for limit in limits], "missed": missed, "passed": not missed}
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
    return _html(folder / "report.html", profile, samples, summary), missed


def _csv(path: Path, samples: Sequence[Sample]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["start", "ok", "error", "ttft_ms", "tpot_ms", "e2e_ms", "output_tokens", "input_tokens"])
        for s in samples:
            w.writerow([f"{s.start:.3f}", int(s.ok), s.error, _fmt(s.ttft_ms), _fmt(s.tpot_ms), f"{s.e2e_ms:.3f}", s.output_tokens,
                        s.input_tokens])


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _rolling(t: np.ndarray, v: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    if len(t) == 0:
        return t, v
    edges = np.arange(t.min(), t.max() + BIN_S, BIN_S)
    mids, out = [], []
    for a in edges:
        sel = v[(t >= a) & (t < a + BIN_S)]
        if len(sel):
            mids.append(a + BIN_S / 2)
            out.append(np.percentile(sel, q))
    return np.asarray(mids), np.asarray(out)


def figures(samples: Sequence[Sample], thresholds: Thresholds) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = samples[0].start if samples else 0.0
    ok = [s for s in samples if s.ok]
    out: list[tuple[str, str]] = []
    for attr, label, limit in (("ttft_ms", "TTFT", thresholds.ttft_ms), ("tpot_ms", "TPOT (mean ITL per request)", thresholds.itl_ms)):
        pts = [(s.start - t0, getattr(s, attr)) for s in ok if getattr(s, attr) is not None]
        t, v = np.asarray([p[0] for p in pts]), np.asarray([p[1] for p in pts])
        fig, ax = plt.subplots(figsize=(10, 3.2))
        ax.plot(t, v, ".", ms=2, alpha=0.4, label="request")
        for q, style in ((50, "-"), (95, "--")):
            mt, mv = _rolling(t, v, q)
            ax.plot(mt, mv, style, label=f"p{q} per {BIN_S:g} s")
        if limit is not None:
            ax.axhline(limit, color="red", label="goodput threshold")
        ax.set_xlabel("s")
        ax.set_ylabel("ms")
        ax.set_title(f"{label} over time")
        ax.legend(fontsize=7)
        out.append((f"{label} over time", _png(fig)))
        plt.close(fig)

    end = max((s.start - t0 + s.e2e_ms / 1000 for s in samples), default=0.0)
    edges = np.arange(0.0, end + BIN_S, BIN_S)
    done = np.asarray([s.start - t0 + s.e2e_ms / 1000 for s in ok])
    tokens = np.asarray([s.output_tokens for s in ok], dtype=float)
    counts, _ = np.histogram(done, bins=edges) if len(edges) > 1 else (np.zeros(0), edges)
    toks, _ = np.histogram(done, bins=edges, weights=tokens) if len(edges) > 1 else (np.zeros(0), edges)
    fig, ax = plt.subplots(figsize=(10, 3.2))
    ax.step(edges[:-1], counts / BIN_S, where="post", label="requests/s")
    ax2 = ax.twinx()
    ax2.step(edges[:-1], toks / BIN_S, where="post", color="green", label="output tokens/s")
    ax.set_xlabel("s")
    ax.set_ylabel("requests/s")
    ax2.set_ylabel("output tokens/s")
    ax.set_title("Throughput")
    out.append(("Throughput", _png(fig)))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 3.2))
    kinds = sorted({s.error for s in samples if not s.ok})
    for kind in kinds:
        at = np.asarray([s.start - t0 for s in samples if s.error == kind])
        n, _ = np.histogram(at, bins=edges) if len(edges) > 1 else (np.zeros(0), edges)
        ax.step(edges[:-1], n, where="post", label=kind)
    ax.set_xlabel("s")
    ax.set_ylabel(f"errors per {BIN_S:g} s")
    ax.set_title("Errors by kind" + ("" if kinds else " (none)"))
    if kinds:
        ax.legend(fontsize=7)
    out.append(("Errors", _png(fig)))
    plt.close(fig)
    return out


def _table(summary: dict[str, Any]) -> str:
    rows = []
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        p = summary.get(key) or {}
        cells = "".join(f"<td>{p.get(c, float('nan')):.1f}</td>" for c in ("p50", "p90", "p95", "p99", "mean", "max"))
        rows.append(f"<tr><td>{key}</td>{cells}</tr>")
    return ("<table><tr><th>metric</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th><th>max</th></tr>"
            + "".join(rows) + "</table>")


def _verdict(summary: dict[str, Any]) -> str:
    v = summary.get("verdict") or {}
    if not v.get("limits"):
        return "<p><b>No limits judged</b> (--no-limits).</p>"
    if v.get("passed"):
        return f"<p style='color:green'><b>Passed</b>: {html.escape(', '.join(v['limits']))}</p>"
    return "<p style='color:red'><b>Failed</b>:</p><ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in v["missed"]) + "</ul>"


def _html(path: Path, profile: Profile, samples: Sequence[Sample], summary: dict[str, Any]) -> Path:
    thresholds = Thresholds(**summary["goodput"]["thresholds_ms"]) if "goodput" in summary else Thresholds()
    images = "".join(f"<h2>{html.escape(t)}</h2><img src='data:image/png;base64,{d}'/>" for t, d in figures(samples, thresholds))
    good = summary.get("goodput", {})
    head = (
        f"{summary.get('requests', 0)} requests, {summary.get('failed', 0)} failed, "
        f"{summary.get('request_throughput', 0):.2f} req/s, {summary.get('output_token_throughput', 0):.1f} output tokens/s, "
        f"goodput {good.get('request_goodput', 0):.2f} req/s ({good.get('fraction', 0):.1%} of requests within "
        f"TTFT {thresholds.ttft_ms} ms and ITL {thresholds.itl_ms} ms); errors: {summary.get('errors', {})}"
    )
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>servecert load report</title><style>body{font-family:sans-serif;"
        "margin:1em 2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
        f"<h1>Load run: {html.escape(profile.name)}</h1><p>{html.escape(profile.description)}</p>{_verdict(summary)}"
        f"<p>{html.escape(head)}</p>"
        f"{_table(summary)}{images}</body></html>"
    )
    return path
