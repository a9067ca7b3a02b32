"""``servecert load run PROFILE --host URL``: locust as a subprocess, then the report.

Data flow: the profile's settings go to the locustfile through the environment; locust runs
headless (``--workers K``: a master plus K local worker processes, locust's distributed mode on
a free loopback port) and writes its CSV (``locust_stats.csv``, ``locust_stats_history.csv``,
``locust_failures.csv``) into the report folder; every locust process appends exact per-request
samples to ``samples/``; ``report.write`` turns them into ``requests.csv``, ``summary.json`` (exact
percentiles, goodput, errors by kind, the verdict) and ``report.html`` (plots). The run is judged
against the profile's limits (``--limit`` replaces or adds, ``--no-limits`` only reports): exit 0
when it met them, 1 when it missed one (each printed with its measured value), 2 for a bad profile
or limit, else locust's own failure. locust is never imported here: it patches the process with
gevent on import.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import socket
import subprocess
import sys
from pathlib import Path

from servecert.load import profiles, report, verdict

LOCUSTFILE = Path(__file__).with_name("locustfiles") / "openai_stream.py"
GRACE_S = 120.0  # beyond the profile's duration before the run is stopped
# NB: the suite's: at the end of the run, requests in flight get this long to finish before locust cuts them
# (each cut one is a sample with error cut_at_end, reported as summary.json's unfinished_at_end, never a failure).
STOP_TIMEOUT_S = 60.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", help=f"one of: {', '.join(sorted(profiles.PROFILES))}")
    p.add_argument("--host", required=True, help="the frontend's base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--users", type=int, help="peak users (default: the profile's)")
    p.add_argument("--duration", type=float, help="seconds; stretches the profile's shape (default: the profile's)")
    p.add_argument("--workers", type=int, default=0, help="locust distributed mode with K local worker processes (0 = one process)")
    p.add_argument("--report-dir", type=Path, help="default reports/load/<profile>-<time>, or reports/nightly/<date>/ for nightly")
    p.add_argument("--model", help="served model name (default: the profile's)")
    p.add_argument("--spawn-rate", type=float, default=10.0, help="users started per second")
    p.add_argument("--ttft-ms", type=float, help="goodput TTFT threshold (default: the profile's)")
    p.add_argument("--itl-ms", type=float, help="goodput ITL threshold, judged per request on its mean ITL (default: the profile's)")
    p.add_argument("--limit", action="append", default=[], metavar="FIGURE<=BOUND",
                   help="judge a figure of summary.json, e.g. ttft_ms.p95<=1000, error_rate<=0.01, goodput.fraction>=0.9; "
                        "replaces the profile's limit on the same figure (repeatable)")
    p.add_argument("--no-limits", action="store_true", help="report only: judge nothing, exit 0 whatever the figures")


def default_dir(profile: str) -> Path:
    now = dt.datetime.now(dt.UTC)
    if profile == "nightly":
        return Path("reports") / "nightly" / now.strftime("%Y-%m-%d")
    return Path("reports") / "load" / f"{profile}-{now.strftime('%Y%m%d-%H%M%S')}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def commands(args: argparse.Namespace, folder: Path, duration: float) -> list[list[str]]:
    base = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING", "--stop-timeout", f"{STOP_TIMEOUT_S:g}"]
    # NB: no --run-time: the profile's shape class ends the run (locust ignores the flag with a shape and says so).
    if not args.workers:
        return [[*base, "--headless", "--host", args.host, "--csv", str(folder / "locust"), "--csv-full-history", "--only-summary"]]
    port = _free_port()
    master = [*base, "--headless", "--host", args.host, "--csv", str(folder / "locust"), "--csv-full-history", "--only-summary",
              "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
              "--expect-workers", str(args.workers)]
    worker = [*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    return [master, *([*worker] for _ in range(args.workers))]


def run(args: argparse.Namespace) -> int:
    try:
        profile = profiles.get(args.profile).with_duration(args.duration)
        limits = [] if args.no_limits else verdict.merged(profile.limits, args.limit)
    except (profiles.UnknownProfileError, verdict.LimitSyntaxError) as exc:
        print(f"servecert load run: error: {exc}", file=sys.stderr)
        return 2
    folder = args.report_dir or default_dir(args.profile)
    samples = folder / "samples"
    samples.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SERVECERT_LOAD_PROFILE": args.profile,
        "SERVECERT_LOAD_USERS": str(args.users or profile.users),
        "SERVECERT_LOAD_DURATION": str(profile.shape.duration_s),
        "SERVECERT_LOAD_MODEL": args.model or profile.model,
        "SERVECERT_LOAD_SAMPLES_DIR": str(samples.resolve()),
        "SERVECERT_LOAD_SPAWN_RATE": str(args.spawn_rate),
        "SERVECERT_LOAD_WORKERS": str(args.workers or 1),
    }
    print(f"servecert load run: {args.profile} against {args.host} for {profile.shape.duration_s:.0f} s, report in {folder}",
          file=sys.stderr, flush=True)
    code = _run_locust(commands(args, folder, profile.shape.duration_s), env, folder, profile.shape.duration_s + GRACE_S)
    thresholds = report.Thresholds(args.ttft_ms or profile.ttft_ms, args.itl_ms or profile.itl_ms)
    written, missed = report.write(folder, profile, thresholds, limits, host=args.host)
    print(f"wrote {written}", file=sys.stderr)
    if code != 0:
        return code
    for reason in missed:
        print(f"servecert load run: missed limit {reason}", file=sys.stderr)
    if limits:
        print(f"servecert load run: {'FAILED' if missed else 'passed'}: {len(limits) - len(missed)} of {len(limits)} limits met "
              f"({', '.join(map(str, limits))})", file=sys.stderr)
    return 1 if missed else 0


def _run_locust(cmds: list[list[str]], env: dict[str, str], folder: Path, limit_s: float) -> int:
    """Start every process (master first), wait up to ``limit_s``, stop the rest; the master's exit code."""
    logs = [(folder / f"locust-{i}.log").open("w") for i in range(len(cmds))]
    procs = [subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT) for cmd, log in zip(cmds, logs, strict=True)]
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            procs[0].wait(timeout=limit_s)  # NB: no poll loop; load is a leaf and may not import servecert.protocol.waiting
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
    code = procs[0].returncode
    # NB: locust exits 1 when any request failed; that is a figure for the report, not a failed run.
    return 0 if code in (0, 1) else code
