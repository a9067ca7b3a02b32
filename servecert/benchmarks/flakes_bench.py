"""``servecert bench flakes``: certify the same implementation N times in a row and report every failure.

Data flow::

    --runs N, --profile P|ALL, --implementation I, --env E [--run-test T] [--stress K] [--neighbour K]
        -> (with --stress K) Debian's ``stress --cpu K`` runs for the whole measurement; (with
           --neighbour K) ``stress --cpu K`` at nice 10: a neighbour, as a developer's other work is
        -> N times: ``servecert certify ...`` in a subprocess, its output kept in run-<i>/output.log,
           its report in run-<i>/conformance-report.yaml; a line on stderr when it starts, every
           ``HEARTBEAT_S`` while it runs, and when it ends
        -> figures: runs, certified, failed; seconds per run; for each failed run the tests the
           report names as failed and the assertion lines of the output (the diagnostics)

Why: a verdict a busy machine flips is a defect of the suite or of the implementation, and one
run shows neither. This is how the suite's notes count "10 consecutive certifications quiet and
5 under ``stress --cpu 2``". ``--profile ALL`` certifies every profile the environment runs, as
``make certify`` does. With ``--run-test`` a run counts as certified when every selected test ran
and passed (certify itself exits 1 then: the rest of the profile is unrun).
Figures only: it exits 0 whatever the runs concluded, and 2 when it could
not run them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from servecert.benchmarks import figures as figures_mod

HEARTBEAT_S = 30.0
ALL = "ALL"
"""``--profile ALL``: every profile the environment runs (certify without ``--profile``)."""
NEIGHBOUR_NICE = 10
ASSERTION_LINES = 3
"""Assertion lines kept per failed run (each cut to ``ASSERTION_CHARS``)."""
ASSERTION_CHARS = 600


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="ROLLOUT-ISOLATION", help=f"the conformance profile to certify each time ({ALL}: every one)")
    p.add_argument("--runs", type=int, default=5, help="certifications in a row")
    p.add_argument("--implementation", default="reference", help="as for servecert certify")
    p.add_argument("--env", default="cluster", help="as for servecert certify")
    p.add_argument("--run-test", help="as for servecert certify: only these tests")
    p.add_argument("--stress", type=int, default=0, help="keep `stress --cpu K` (Debian's stress) running throughout (0: quiet)")
    p.add_argument(
        "--neighbour", type=int, default=0, help=f"keep `stress --cpu K` at nice {NEIGHBOUR_NICE} running throughout: a neighbour"
    )
    p.add_argument("--run-timeout", type=float, default=1800.0, help="seconds one certification may take before it is stopped")
    p.add_argument("--report-dir", type=Path, help="where each run's report and output go (default: reports/flakes/<profile>-<time>)")
    p.add_argument("--json", type=Path, help="also write the figures here")


def _say(line: str) -> None:
    print(f"[flakes] {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stressed(cpus: int, nice: int = 0) -> Iterator[None]:
    """``stress --cpu cpus`` at ``nice`` for the duration (nothing when 0); stopped by its process group, which only it is
    in."""
    if cpus <= 0:
        yield
        return
    binary = shutil.which("stress")
    if binary is None:
        raise SystemExit("servecert bench flakes: --stress and --neighbour need Debian's `stress` (apt-get install stress)")
    command = ["nice", "-n", str(nice), binary, "--cpu", str(cpus)] if nice else [binary, "--cpu", str(cpus)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _say(f"{' '.join(command)} running (pid {proc.pid})")
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def certify_command(args: argparse.Namespace, report_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "servecert", "certify", "--implementation", args.implementation, "--env", args.env]
    cmd += (["--profile", args.profile] if args.profile != ALL else []) + ["--report-dir", str(report_dir)]
    return cmd + (["--run-test", args.run_test] if args.run_test else [])


def wait_with_heartbeat(
    proc: subprocess.Popen[bytes], label: str, timeout_s: float, say: Callable[[str], None] | None = None
) -> int | None:
    """The exit code, with a heartbeat line (through ``say``, default this bench's); None (stopped) past ``timeout_s``."""
    say = say or _say
    started = time.monotonic()
    while True:
        try:
            return proc.wait(timeout=HEARTBEAT_S)
        except subprocess.TimeoutExpired:
            waited = time.monotonic() - started
            if waited > timeout_s:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # NB: certify and what it started (its own session)
                proc.wait()
                return None
            say(f"{label}: {waited:.0f}s ...")


def assertion_lines(output: str) -> list[str]:
    """The output's assertion lines (pytest's ``E   AssertionError: ...``), first ``ASSERTION_LINES``, deduplicated."""
    found: list[str] = []
    for line in output.splitlines():
        text = line.removeprefix("E").strip()
        if line.startswith("E ") and text.startswith("AssertionError") and text[:ASSERTION_CHARS] not in found:
            found.append(text[:ASSERTION_CHARS])
    return found[:ASSERTION_LINES]


def report_profiles(report_path: Path, profile: str) -> list[dict[str, Any]]:
    """The report's entries for ``profile`` (every one for ALL); none when no report was written."""
    if not report_path.is_file():
        return []
    report = yaml.safe_load(report_path.read_text()) or {}
    return [p for p in report.get("profiles") or [] if profile in (ALL, p.get("name"))]


def failed_tests(found: Sequence[dict[str, Any]]) -> list[str] | None:
    """Those entries' failed tests (core, then extended); None when there are none (no report for the profile)."""
    if not found:
        return None
    return [t for p in found for level in ("core", "extended") for t in (p.get(level) or {}).get("failedTests") or []]


def passed_tests(found: Sequence[dict[str, Any]]) -> int:
    """Those entries' passed tests (core and extended)."""
    return sum(int(((p.get(level) or {}).get("statistics") or {}).get("passed") or 0) for p in found for level in ("core", "extended"))


def run_passed(code: int | None, failed: list[str] | None, passed: int, run_test: str | None) -> bool:
    """Certified; with ``--run-test``, every selected test ran and passed (certify exits 1 then: the profile is partial)."""
    if not run_test:
        return code == 0
    return code in (0, 1) and failed == [] and passed > 0


def one_run(args: argparse.Namespace, folder: Path, label: str) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "output.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(certify_command(args, folder), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _say(f"{label}: servecert certify started (pid {proc.pid}; output in {log})")
        code = wait_with_heartbeat(proc, label, args.run_timeout)
    seconds = round(time.monotonic() - started, 1)
    found = report_profiles(folder / "conformance-report.yaml", args.profile)
    failed = failed_tests(found)
    ok = run_passed(code, failed, passed_tests(found), args.run_test)
    run: dict[str, Any] = {"exit_code": code, "seconds": seconds, "certified": ok, "report": str(folder)}
    if not ok:
        run["failed_tests"] = failed if failed is not None else "no report for the profile (see output.log)"
        run["assertions"] = assertion_lines(log.read_text(errors="replace"))
    if code is None:
        _say(f"{label}: stopped after {args.run_timeout:g}s")
    else:
        _say(f"{label}: {'certified' if ok else 'NOT certified: ' + str(run['failed_tests'])} in {seconds:.0f}s")
    return run


def summary(runs: Sequence[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    seconds = [r["seconds"] for r in runs]
    return {
        "profile": args.profile,
        "implementation": args.implementation,
        "env": args.env,
        "run_test": args.run_test,
        "stress_cpus": args.stress,
        "neighbour_cpus": args.neighbour,
        "runs": len(runs),
        "certified": sum(1 for r in runs if r["certified"]),
        "failed": sum(1 for r in runs if not r["certified"]),
        "seconds_per_run": seconds,
        "median_seconds": statistics.median(seconds) if seconds else None,
        "failures": [{"run": i + 1, **r} for i, r in enumerate(runs) if not r["certified"]],
    }


def run(args: argparse.Namespace) -> int:
    if args.runs < 1:
        print("servecert bench flakes: --runs must be at least 1", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = args.report_dir or Path("reports/flakes") / f"{args.profile}-{stamp}"
    runs: list[dict[str, Any]] = []
    with stressed(args.stress), stressed(args.neighbour, NEIGHBOUR_NICE):
        for i in range(args.runs):
            runs.append(one_run(args, folder / f"run-{i + 1}", f"run {i + 1}/{args.runs}"))
    figures = summary(runs, args)
    _say(f"{figures['certified']} of {figures['runs']} certified; median {figures['median_seconds']}s per run; reports in {folder}")
    return figures_mod.emit(figures, args.json)
