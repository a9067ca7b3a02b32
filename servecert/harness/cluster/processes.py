"""Start, watch and end the cluster's processes by pid; pick free loopback ports; bounded waits.

Data flow::

    spawn(name, argv, logs/) -> Popen in its own session, stdout+stderr -> logs/<name>.log
        -> the pid goes into the cluster's state.json (servecert.harness.cluster.state)
    wait_for(check, what, log, timeout)   polls until check() or raises ClusterStartError
                                          quoting the component's log tail
    stop(pid, expect)                     SIGTERM, bounded wait, SIGKILL; only if /proc/<pid>/cmdline
                                          still contains ``expect`` (a reused pid is never signalled)

Why: ``servecert cluster down`` may run from another shell long after ``up`` exited, so a pid
and the binary path are all it has; checking the command line before signalling keeps it from
ending an unrelated process that inherited the pid. Each component gets its own session so a
Ctrl-C in the shell that ran ``up`` does not take the cluster down with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from servecert.protocol import waiting

POLL_S = 0.1
LOG_TAIL_LINES = 20


class ClusterStartError(RuntimeError):
    """A component did not come up in time; the message quotes its log and says where it is."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def spawn(
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        log.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )


def _cmdline(pid: int) -> str | None:
    # NB: right after spawn, /proc/<pid>/cmdline reads empty for a moment; wait up to 1 s for it.
    for _ in range(100):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if raw or _zombie(pid):
            break
        time.sleep(0.01)
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def alive(pid: int, expect: str | None = None) -> bool:
    """The process exists, is not a zombie, and (if given) its command line contains ``expect``."""
    if pid <= 0:
        return False
    cmdline = _cmdline(pid)
    if cmdline is None or _zombie(pid):
        _reap(pid)
        return False
    return expect is None or expect in cmdline


def stop(pid: int, expect: str | None, timeout: float = 10.0) -> bool:
    """End ``pid`` (SIGTERM, then SIGKILL after ``timeout``); True if it was ours and running."""
    if not alive(pid, expect):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    for _ in waiting.holding(timeout, POLL_S):
        if not alive(pid):
            return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in waiting.holding(5.0, POLL_S):
        if not alive(pid):
            break
    return True


def wait_for(
    check: Callable[[], bool],
    *,
    what: str,
    log: Path,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
) -> float:
    """Poll ``check`` until true; return the seconds it took. Fails fast if ``proc`` exits."""
    clock = waiting.Deadline(timeout)

    def ready() -> bool:
        with contextlib.suppress(Exception):
            if check():
                return True
        if proc is not None and proc.poll() is not None:
            raise ClusterStartError(
                f"{what}: the process exited with status {proc.returncode} before it was ready.\n"
                f"Last lines of {log}:\n{log_tail(log)}"
            )
        return False

    waiting.until(
        ready,
        timeout_s=timeout,
        what=f"{what} to be ready",
        interval_s=POLL_S,
        describe=lambda: f"look at {log}; its last lines:\n{log_tail(log)}",
        error=ClusterStartError,
    )
    return clock.elapsed()
