"""Processes an adapter starts (Dynamo, vllm-router, sglang-router): each with its own log file, ended by its pid.

Part of the vendor contract: ``servecert.adapters.contract`` re-exports ``Proc``,
``ProcessStartError``, ``wait_for`` and ``free_port``; import them from there.

``Proc.start`` launches one command (its output to a log file, in a new session so a signal
sent to the suite's terminal does not reach it) and remembers its pid; ``stop`` sends SIGTERM to
that pid, waits a bounded time, then SIGKILL, and waits again. Nothing here ends a process by
name or by group. ``wait_for`` polls a condition to a deadline and fails naming what it waited
for and the log file to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from servecert.protocol import waiting

TERM_GRACE_S = 10.0  # SIGTERM to SIGKILL
KILL_WAIT_S = 5.0
TAIL_BYTES = 2000


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` the kernel says is free now (another process may take it before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ProcessStartError(Exception):
    """A process an adapter started did not come up; the message names it and its log file."""


class Proc:
    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )

    def tail(self) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - TAIL_BYTES))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def exited_error(self) -> ProcessStartError | None:
        """An error naming the log file if the process already exited, else None."""
        if self.process is None or self.process.returncode is None:
            return None
        return ProcessStartError(
            f"{self.name} exited with status {self.process.returncode} before it was ready; "
            f"see {self.log_path}; last lines:\n{self.tail()}"
        )

    async def stop(self, grace_s: float = TERM_GRACE_S) -> None:
        """SIGTERM this pid, wait up to ``grace_s``, then SIGKILL it; bounded either way."""
        proc = self.process
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=grace_s)
            return
        except TimeoutError:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=KILL_WAIT_S)


async def wait_for(
    probe: Callable[[], Awaitable[bool]],
    deadline: waiting.Deadline,
    what: str,
    procs: Sequence[Proc],
    poll_s: float = 0.1,
) -> None:
    """Poll ``probe`` until true or ``deadline`` (shared by a start's waits) runs out; fail fast if one of ``procs`` died."""

    async def ready() -> bool:
        for proc in procs:
            err = proc.exited_error()
            if err is not None:
                raise err
        return await probe()

    logs = ", ".join(str(p.log_path) for p in procs) or "no log"
    await waiting.until_async(
        ready, timeout_s=deadline.remaining(), what=what, interval_s=poll_s, describe=lambda: f"see {logs}", error=ProcessStartError
    )
