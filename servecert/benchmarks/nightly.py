"""The planner demo's verdict, and the nightly history: one point per night, a trend across nights.

``servecert planner demo --load PROFILE`` (``make nightly`` = the ``nightly`` profile) ends with
the load run's verdict (``servecert.load.verdict``: no failed request, 95% within the SLA) and the
harness's GPU-seconds. ``gpu_seconds_bound`` adds the planner's cost to the verdict: the
GPU-seconds of the smallest worker counts that serve the offered load at each second (one
engine serves ``engine_rps``; the calibration's conservative 1.2 requests per simulated second),
plus one worker of each component — PLANNER-SCALING's over-provisioning rule, integrated over
the run. A night then appends ``{date, passed, missed, sla_attainment, error_rate, gpu_seconds,
gpu_seconds_bound, ...}`` to ``reports/nightly/history.jsonl`` and writes ``nightly.html`` in the
night's folder: the verdict, links to the load and planner reports, and the trend of attainment,
errors and GPU-seconds against their bounds over every night kept (matplotlib, one PNG).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servecert.load.profiles import Profile

HISTORY = "history.jsonl"
PAGE = "nightly.html"
STEP_S = 1.0  # real seconds per step of the bound's integral


def gpu_seconds_bound(profile: Profile, users: int, time_scale: float, gpus: Mapping[str, int], engine_rps: float) -> float | None:
    """Simulated GPU-seconds of the least counts serving ``profile``'s offered load, plus one worker per component; None
    for a trace profile (its rate is the trace's, not the shape's)."""
    if profile.trace is not None:
        return None
    total = 0.0
    steps = math.ceil(profile.shape.duration_s / STEP_S)
    for i in range(steps):
        rps_real = users * profile.per_user_rps * profile.shape.level((i + 0.5) * STEP_S)
        workers = max(1, math.ceil(rps_real / time_scale / engine_rps - 1e-9)) + 1
        total += sum(workers * n for n in gpus.values()) * STEP_S * time_scale
    return total


def gpu_seconds_missed(used: float, bound: float | None) -> list[str]:
    if bound is None or used <= bound:
        return []
    return [f"gpu_seconds<={bound:.0f} (the least workers serving the offered load, plus one of each): measured {used:.0f}"]


def record(root: Path, point: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Append ``point`` to ``root``'s history; every point kept, oldest first."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / HISTORY
    with path.open("a") as f:
        f.write(json.dumps(point) + "\n")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_page(folder: Path, point: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> Path:
    verdict = ("<p style='color:green'><b>Passed</b></p>" if point["passed"] else
               "<p style='color:red'><b>Failed</b>:</p><ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in point["missed"]) + "</ul>")
    rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in point.items() if k != "missed")
    path = folder / PAGE
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>servecert nightly</title><style>body{font-family:sans-serif;"
        "margin:1em 2em}table{border-collapse:collapse}td{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
        f"<h1>Nightly {html.escape(str(point['date']))}</h1>{verdict}<table>{rows}</table>"
        "<p><a href='load/report.html'>load report</a> · <a href='planner.html'>planner report</a></p>"
        f"<h2>Trend over {len(history)} nights</h2><img src='data:image/png;base64,{_trend_png(history)}'/></body></html>"
    )
    return path


def _trend_png(history: Sequence[Mapping[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = list(range(len(history)))
    labels = [str(p.get("date", i)) for i, p in enumerate(history)]
    fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
    panels = (
        ("SLA attainment", "sla_attainment", "sla_attainment_bound"),
        ("error rate", "error_rate", None),
        ("GPU-seconds (simulated)", "gpu_seconds", "gpu_seconds_bound"),
    )
    for ax, (title, key, bound) in zip(axes, panels, strict=True):
        ax.plot(x, [p.get(key) if p.get(key) is not None else float("nan") for p in history], "o-", label=key)
        if bound:
            ax.plot(x, [p.get(bound) if p.get(bound) is not None else float("nan") for p in history], "r--", label="bound")
        for i, p in enumerate(history):
            if not p.get("passed"):
                ax.axvspan(i - 0.4, i + 0.4, color="red", alpha=0.1)
        ax.set_title(title)
        ax.legend(fontsize=7)
    axes[-1].set_xticks(x, labels, rotation=30, fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()
