"""``servecert bench planner``: planners side by side on the same load traces: SLA attainment and GPU-seconds.

Data flow::

    --planners reference,dynamo-planner (the first is the baseline)
        -> for each: ``servecert certify --implementation P --env process --profile PLANNER-SCALING
           --run-test <--tests> --timeout planner_time_scale=<--time-scale> --workers 1`` in a subprocess,
           with ``SERVECERT_PLANNER_FIGURES`` naming <dir>/<P>/figures.jsonl: every scenario run appends its
           figures there (``servecert/conformance/tests/planner_scaling/_checks.py``); output in <dir>/<P>/output.log,
           a line on stderr when it starts, every ``HEARTBEAT_S`` and when it ends
        -> per scenario and planner: requests within the SLA (all of them, and those outside the scaling
           allowances the suite excuses), GPU-seconds (simulated, from the engines' ground truth), peak
           workers, decisions; and each planner's GPU-seconds over the baseline's, measured in the same run

The same traces: a scenario's arrivals are fixed by its shape and rate (``servecert.harness.load_generator``)
or by the replayed Mooncake trace, so both planners are sent the same requests at the same
simulated times. The default time scale is 2, not the suite's 4: Dynamo's planner takes its
intervals in whole seconds (2 simulated s = 1 s at scale 2). The default tests are the step
(``PlannerScalingStepReachesSla``) and the burst, diurnal and trace-replay scenarios
(``PlannerScalingMeetsSlaAfterSettling``). Figures only: it exits 0 whatever the verdicts,
and 2 when it could not run a planner at all.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from servecert.benchmarks import figures as figures_mod
from servecert.benchmarks import flakes_bench
from servecert.conformance.scenarios import PLANNER_FIGURES_ENV

PROFILE = "PLANNER-SCALING"
DEFAULT_TESTS = "PlannerScalingStepReachesSla,PlannerScalingMeetsSlaAfterSettling"
NAME_WIDTH = 54


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--planners", default="reference,dynamo-planner", help="implementations, comma-separated; the first is the baseline")
    p.add_argument("--tests", default=DEFAULT_TESTS, help="PLANNER-SCALING tests or cases to run (as certify's --run-test)")
    p.add_argument("--time-scale", type=float, default=2.0, help="simulated seconds per real second (Dynamo's planner needs whole seconds)")
    p.add_argument("--deploy-ready-s", type=float, default=120.0, help="deploy bound (Dynamo's planner takes ~40 s to its first decision)")
    p.add_argument("--run-timeout", type=float, default=1800.0, help="seconds one planner's runs may take before they are stopped")
    p.add_argument("--report-dir", type=Path, help="each planner's report, output and figures (default: reports/bench/planner-<time>)")
    p.add_argument("--json", type=Path, help="also write the figures here")


def _say(line: str) -> None:
    print(f"[planner bench] {line}", file=sys.stderr, flush=True)


def certify_command(args: argparse.Namespace, planner: str, folder: Path) -> list[str]:
    return [
        sys.executable, "-m", "servecert", "certify", "--implementation", planner, "--env", "process", "--profile", PROFILE,
        "--run-test", args.tests, "--workers", "1", "--report-dir", str(folder),
        "--timeout", f"planner_time_scale={args.time_scale:g}", "--timeout", f"deploy_ready_s={args.deploy_ready_s:g}",
    ]  # fmt: skip


def run_planner(args: argparse.Namespace, planner: str, folder: Path) -> dict[str, Any]:
    """One planner's certify run: its exit code, failed tests, assertions and every scenario's figures."""
    folder.mkdir(parents=True, exist_ok=True)
    sink, log = folder / "figures.jsonl", folder / "output.log"
    sink.unlink(missing_ok=True)
    started = time.monotonic()
    with log.open("wb") as out:
        env = {**os.environ, PLANNER_FIGURES_ENV: str(sink)}
        cmd = certify_command(args, planner, folder)
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        _say(f"{planner}: servecert certify started (pid {proc.pid}; output in {log})")
        code = flakes_bench.wait_with_heartbeat(proc, planner, args.run_timeout, _say)
    scenarios = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()] if sink.is_file() else []
    _say(f"{planner}: {len(scenarios)} scenario runs in {time.monotonic() - started:.0f}s (exit {code})")
    return {
        "exit_code": code,
        "failed_tests": flakes_bench.failed_tests(flakes_bench.report_profiles(folder / "conformance-report.yaml", PROFILE)),
        "assertions": flakes_bench.assertion_lines(log.read_text(errors="replace")),
        "scenarios": scenarios,
        "report": str(folder),
    }


def side_by_side(results: dict[str, dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """One row per scenario run (test and scenario), each planner's figures and its GPU-seconds over the baseline's."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for planner, result in results.items():
        for s in result["scenarios"]:
            row = rows.setdefault((s["test"], s["scenario"]), {"test": s["test"], "scenario": s["scenario"]})
            row[planner] = {k: s[k] for k in ("within_sla", "judged_within_sla", "gpu_seconds", "peak_workers", "decisions", "requests")}
    for row in rows.values():
        base = row.get(baseline)
        for planner in results:
            mine = row.get(planner)
            if mine is not None and base is not None and base["gpu_seconds"] > 0:
                mine["gpu_seconds_vs_baseline"] = mine["gpu_seconds"] / base["gpu_seconds"]
    return list(rows.values())


def table(rows: list[dict[str, Any]], planners: list[str]) -> str:
    lines = [f"{'scenario (test)':<{NAME_WIDTH}}" + "".join(f" | {p:>44}" for p in planners)]
    lines.append(f"{'':<{NAME_WIDTH}}" + "".join(f" | {'SLA all / judged, GPU-s (x baseline)':>44}" for _ in planners))
    for row in rows:
        cells = []
        for p in planners:
            f = row.get(p)
            if f is None:
                cells.append(f" | {'not run':>44}")
                continue
            ratio = f.get("gpu_seconds_vs_baseline")
            text = f"{f['within_sla']:.1%} / {f['judged_within_sla']:.1%}, {f['gpu_seconds']:.0f}" + (f" (x{ratio:.2f})" if ratio else "")
            cells.append(f" | {text:>44}")
        name = f"{row['scenario']} ({row['test'].removeprefix('PlannerScaling')})"
        lines.append(f"{name:<{NAME_WIDTH}.{NAME_WIDTH}}" + "".join(cells))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    planners = [p.strip() for p in args.planners.split(",") if p.strip()]
    if not planners:
        print("servecert bench planner: --planners names no implementation", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = args.report_dir or Path("reports/bench") / f"planner-{stamp}"
    results = {p: run_planner(args, p, folder / p) for p in planners}
    unrun = [p for p, r in results.items() if not r["scenarios"]]
    rows = side_by_side(results, planners[0])
    print(table(rows, planners), file=sys.stderr)
    figures = {"baseline": planners[0], "time_scale": args.time_scale, "tests": args.tests, "rows": rows, "runs": results}
    figures_mod.emit(figures, args.json)
    if unrun:
        _say(f"no scenario ran for {', '.join(unrun)}: see {', '.join(results[p]['report'] + '/output.log' for p in unrun)}")
        return 2
    return 0
