"""One container's process: start, notice exit, restart with back-off, stop with SIGTERM and a grace period.

A ``ContainerRun`` is driven by the runner's loop (``tick`` style, never blocking): the loop
asks ``exited()``, calls ``start()`` when ``due()``, and ``terminate()`` / ``kill_if_overdue()``
while a pod is being deleted. It keeps what a kubelet reports for the container: restart count,
the last termination (exit code, reason, times), the current state and readiness.

Each process runs in its own session (so the runner can end its whole process group) and
writes ``<pod dir>/<container>.pid`` as ``"<pid> <command line>"``, so ``servecert cluster down``
can end an engine whose runner died without mistaking a reused pid for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servecert.fakes.pod_runner.zygote import ForkedProcess, Zygote, ZygoteError
from servecert.protocol import waiting


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class ContainerRun:
    name: str
    image: str
    argv: list[str]
    """Empty for a container whose image the runner does not know: it counts as running and ready."""
    env: dict[str, str]
    cwd: Path
    health_url: str | None
    restart_policy: str = "Always"
    backoff_base: float = 0.5
    backoff_cap: float = 5.0
    zygote: Zygote | None = None
    """Forks ``python -m`` programs from a warm parent when given (``zygote``); else each starts as a subprocess."""
    proc: subprocess.Popen[bytes] | ForkedProcess | None = None
    started_at: str | None = None
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    terminated: dict[str, Any] | None = None
    ready: bool = False
    waiting_reason: str | None = "ContainerCreating"
    backoff: waiting.Deadline | None = None
    """CrashLoopBackOff: the next start waits until it has expired."""
    grace: waiting.Deadline | None = None
    """Set by terminate(): SIGKILL once it has expired."""
    probe: Any = None
    """The in-flight readiness probe (a concurrent.futures.Future[bool]) or None."""
    probe_wait: waiting.Deadline | None = None
    """The pause before the next readiness probe (none: probe now)."""
    history: list[int] = field(default_factory=list)
    """Exit codes of earlier runs (for logs and tests)."""

    @property
    def managed(self) -> bool:
        return bool(self.argv)

    @property
    def log_path(self) -> Path:
        return self.cwd / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.cwd / f"{self.name}.pid"

    @property
    def env_path(self) -> Path:
        """The env the program was started with, as JSON (a forked program's ``/proc/<pid>/environ`` shows the zygote's)."""
        return self.cwd / f"{self.name}.env.json"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def due(self) -> bool:
        return self.managed and self.proc is None and self.terminated is None and (self.backoff is None or self.backoff.expired)

    def start(self) -> None:
        self.cwd.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"# {now_rfc3339()} start (restart {self.restart_count}): {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = self._forked()
            if self.proc is None:
                self.proc = subprocess.Popen(
                    self.argv,
                    env=self.env,
                    cwd=self.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        self.pid_path.write_text(f"{self.proc.pid} {' '.join(self.argv)}")
        self.env_path.write_text(json.dumps(self.env, sort_keys=True))
        self.started_at = now_rfc3339()
        self.waiting_reason = None
        self.ready = False
        self.probe_wait = None

    def _forked(self) -> ForkedProcess | None:
        if self.zygote is None or not self.zygote.can_run(self.argv):
            return None
        try:
            return self.zygote.spawn(self.argv, self.env, self.cwd, self.log_path)
        except ZygoteError:
            return None  # NB: a plain subprocess then, as without a zygote

    def exited(self) -> int | None:
        """The exit code if the process ended since the last call (and clears it), else None."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        self.proc = None
        self.pid_path.unlink(missing_ok=True)
        self.history.append(code)
        return code

    def record_exit(self, code: int, stopping: bool) -> None:
        """Update kubelet-style state after an exit; schedule a restart when the policy asks."""
        finished = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at,
            "finishedAt": now_rfc3339(),
        }
        self.ready = False
        restart = not stopping and (self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0))
        if restart:
            self.restart_count += 1
            self.last_terminated = finished
            delay = min(self.backoff_cap, self.backoff_base * 2 ** (self.restart_count - 1))
            self.backoff = waiting.Deadline(delay)
            self.waiting_reason = "CrashLoopBackOff"
        else:
            self.terminated = finished

    def terminate(self, grace: float) -> None:
        if self.grace is not None:
            return
        self.grace = waiting.Deadline(grace)
        self._signal(signal.SIGTERM)

    def kill_if_overdue(self) -> None:
        if self.grace is not None and self.grace.expired:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def stop_now(self, timeout: float = 5.0) -> None:
        """Blocking stop for the runner's own shutdown: SIGTERM, wait, SIGKILL."""
        if self.proc is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5.0)
        self.exited()

    def status(self) -> dict[str, Any]:
        state: dict[str, Any]
        if self.running or (not self.managed and self.terminated is None):
            state = {"running": {"startedAt": self.started_at or now_rfc3339()}}
        elif self.terminated is not None:
            state = {"terminated": self.terminated}
        else:
            state = {"waiting": {"reason": self.waiting_reason or "ContainerCreating"}}
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "containerID": f"servecert://{self.proc.pid}" if self.proc is not None else "",
            "ready": self.ready,
            "started": self.running or not self.managed,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
        }
        return out
