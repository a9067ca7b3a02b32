"""Bring up what the suite needs before any test starts: the cluster binaries and HAProxy.

Data flow::

    make test / make certify           the venv ($(STAMP)) and Debian's haproxy (debian-packages)
      -> servecert setup --env cluster  ensure(): the implementation's tools (HAProxy)? cluster binaries built from Go
                                        modules into the cache (servecert.harness.cluster.binaries), with a
                                        line at least every HEARTBEAT_S on the terminal
      -> pytest / servecert certify     every test finds the binaries cached (a few stat calls)

``servecert certify --env cluster`` runs the same step itself before pytest starts, so a vendor
calling it directly never has a test wait on a build either.

Why its own step: a cold build takes about 6 min on 2 cores (337-365 s measured), longer than
any per-test timeout (300 s). Done inside the first cluster test's setup, pytest-timeout killed
it and the terminal showed nothing for 14 minutes; here it runs outside every timeout and says
what it does: the component, the time so far, the log, and on failure the log's last lines.

Overlap (``--start`` / ``--stop``): ``make certify`` starts the build in the background at idle
CPU priority (SCHED_IDLE, inherited by go and its compilers), certifies the process profiles
meanwhile, and the cluster certify's own setup step then waits for the build under its lock.
Idle priority means the build only takes CPU the certify run leaves unused, so the process
profiles' verdicts are not judged on a machine the build keeps busy.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from servecert.harness.cluster import binaries
from servecert.protocol import waiting

HEARTBEAT_S = 10.0
"""Longest silence on the terminal while the step works (the issue's bound is 15 s)."""
COLD_ESTIMATE = "about 5-10 min on 2 cores with empty Go caches, under a minute with a warm GOCACHE"
STOP_WAIT_S = 30.0
ENVIRONMENTS = ("process", "cluster")

Printer = Callable[[str], None]
ToolCheck = Callable[[], str]  # why a tool an implementation needs is missing, "" when present


class PrerequisiteError(RuntimeError):
    """Something the suite needs could not be provided; the message names it, its log, and what to do."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Heartbeat:
    """Prefixes each progress line with the time so far, and fills any silence longer than ``every_s``.

    The builder reports each component and a heartbeat of its own; stretches it does not cover
    (module downloads, copying sources) are filled here, so the terminal never goes quiet.
    """

    def __init__(self, out: Printer, every_s: float | None = None, logs: Path | None = None) -> None:
        self.out = out
        self.every_s = every_s or HEARTBEAT_S
        self.logs = logs
        self.started = self.last = time.monotonic()
        self.step = "starting"
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def __call__(self, line: str) -> None:
        with self.lock:
            now = time.monotonic()
            self.last = now
            if "still running" not in line and "waiting for" not in line:
                self.step = line
            self.out(f"[servecert setup {_clock(now - self.started)}] {line}")

    def _tick(self) -> None:
        while not self.stopped.wait(min(1.0, self.every_s / 4)):
            if time.monotonic() - self.last >= self.every_s:
                where = f"; logs in {self.logs}" if self.logs else ""
                self(f"still working on: {self.step}{where}")

    @contextlib.contextmanager
    def running(self) -> Iterator[Heartbeat]:
        thread = threading.Thread(target=self._tick, name="servecert-setup-heartbeat", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopped.set()
            thread.join(timeout=5)


def cluster_binaries(progress: Printer) -> binaries.BinarySet:
    """The embedded cluster's binaries, built now when any is missing (see servecert.harness.cluster.binaries)."""
    missing = binaries.missing()
    if not missing:
        progress(f"cluster binaries: cached in {binaries.bin_dir()}")
        return binaries.ensure(progress=progress)
    progress(
        f"cluster binaries: building {len(missing)} missing ({', '.join(missing)}) from Go modules; "
        f"{COLD_ESTIMATE}; go's output in {binaries.cache_root() / 'logs'}"
    )
    try:
        return binaries.ensure(progress=progress)
    except binaries.BinaryBuildError as exc:
        raise PrerequisiteError(f"the cluster binaries could not be built: {exc}") from None


def ensure(env: str, out: Printer = _stderr, *, tools: Sequence[ToolCheck] = ()) -> None:
    """Provide what ``env`` needs, printing progress; raise PrerequisiteError naming what failed.

    ``tools``: checks of what an implementation runs beside the cluster, each returning why it
    is missing ('' when present). ``servecert setup`` passes the reference's (Debian's haproxy,
    which its DGD proxy runs); a vendor's implementation may need none, so the suite's own
    setup step (``servecert certify``) passes none.
    """
    if env not in ENVIRONMENTS:
        raise PrerequisiteError(f"unknown environment {env!r}; known: {', '.join(ENVIRONMENTS)}")
    if env != "cluster":
        return
    heartbeat = Heartbeat(out, logs=binaries.cache_root() / "logs")
    with heartbeat.running():
        for why in (check() for check in tools):
            if why:
                raise PrerequisiteError(why)
        cluster_binaries(heartbeat)
        heartbeat(f"ready for the {env} environment")


def _pid_file() -> Path:
    return binaries.cache_root() / "setup-background.pid"


def _idle_priority() -> None:
    """Take CPU only when nothing else wants it; go and its compilers inherit the policy."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def start_background(env: str, out: Printer = _stderr) -> int | None:
    """Start ``ensure(env)`` in a child at idle priority when a build is needed; its pid, or None."""
    if env != "cluster" or not binaries.missing():
        out(f"[servecert setup] nothing to build for the {env} environment")
        return None
    argv = [sys.executable, "-m", "servecert.harness.prerequisites", "--env", env, "--idle"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)  # NB: same terminal and process group: Ctrl-C reaches it
    path = _pid_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{proc.pid}\n")
    out(f"[servecert setup] building the cluster binaries in the background at idle priority (pid {proc.pid}); {COLD_ESTIMATE}")
    return proc.pid


def _ours(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"servecert.harness.prerequisites" in cmdline


def stop_background(out: Printer = _stderr) -> None:
    """End the background build this step started (by the pid it recorded), if it still runs."""
    path = _pid_file()
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return
    path.unlink(missing_ok=True)
    if not _ours(pid):
        return
    out(f"[servecert setup] stopping the background build (pid {pid})")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    for _ in waiting.holding(STOP_WAIT_S, 0.2):
        if not _ours(pid):
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", choices=ENVIRONMENTS, default="cluster", help="the environment to prepare (default: cluster)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--start", action="store_true", help="start the build in the background at idle priority and return")
    mode.add_argument("--stop", action="store_true", help="end a background build that --start began")
    p.add_argument("--idle", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, stream: TextIO | None = None, tools: Sequence[ToolCheck] = ()) -> int:
    """``servecert setup``: exit 0 when everything is ready, 1 with the reason when not."""
    if args.stop:
        stop_background()
        return 0
    if args.start:
        start_background(args.env)
        return 0
    if args.idle:
        _idle_priority()
    try:
        ensure(args.env, tools=tools)
    except PrerequisiteError as exc:
        print(f"servecert setup: error: {exc}", file=stream or sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("servecert setup: interrupted; go was stopped, nothing half-written was kept", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servecert.harness.prerequisites", description="Prepare what the suite needs.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
