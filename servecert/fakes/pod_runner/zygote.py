"""Start pods' Python programs by forking a warm parent, not by starting an interpreter each time.

Data flow::

    runner: Zygote.start()  -> python -m servecert.fakes.pod_runner.zygote   (imports aiohttp, numpy, kubernetes, ...)
    runner: Zygote.spawn(argv, env, cwd, log)  --JSON line-->  zygote
        zygote: fork -> child: setsid, chdir, env, stdin /dev/null, stdout+stderr -> log,
                       process title = argv, then ``python -m <module>`` run in place (runpy), os._exit(code)
        zygote  --{"pid": N}-->  runner (the reply to the spawn)
    zygote: every POLL_S, waitpid(-1, WNOHANG) for its children  --{"exit": N, "code": C}-->  runner's reader thread
    runner: ForkedProcess(pid).poll() / wait() read those exits; signals go to the child's process group as before

Why: a fake engine pod started as ``python -m servecert engine serve`` spent 0.8 s of CPU before it
served (0.3 s of it importing aiohttp, numpy, prometheus_client; 0.2 s the kubernetes client; with the client's
37.x releases, 1.2 s more for its lazily loaded CoreV1Api), and
make test starts about 400 engine pods and 120 frontends on a 2-core machine: about 300 CPU-seconds,
a fifth of the cluster tests' CPU, and every rollout step waited on it. Forked from a parent that
imported those modules once, a pod pays only for the suite's own modules.

Only third-party modules are imported ahead: the program's own modules read the pod's env when they
load, so they load in the child, after its env is set. The child reseeds ``random`` and numpy's
global generator (a fork copies the parent's state), and its process title is its command line,
so ``/proc/<pid>/cmdline`` reads as if it had been exec'd (``servecert cluster down`` checks it
before it ends a pid). A command the zygote cannot run (not ``<python> -m <module> ...``) or a dead
zygote falls back to a plain subprocess (``Zygote.can_run``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

PRELOAD = (
    "setproctitle",
    "asyncio",
    "aiohttp",
    "aiohttp.web",
    "numpy",
    "prometheus_client",
    "yaml",
    "uvloop",
    "kubernetes.client",
    # NB: the client (37.x) loads its API classes lazily, and CoreV1Api's module builds a pydantic model of every core
    # object it names: 1.2 s of CPU in each engine pod that registers itself, unless the zygote has loaded it.
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.api.custom_objects_api",
)
"""Third-party modules the pods' programs import; a missing one is skipped."""
POLL_S = 0.1  # how often the zygote reaps its children (the latency of an exit the runner sees)
REPLY_S = 10.0  # a spawn's reply (the fork's pid) arrives within this, or the zygote counts as dead
PRELOAD_S = 60.0  # the zygote says it is ready (its imports done) within this of its start, or it counts as dead
STOP_S = 5.0


class ZygoteError(RuntimeError):
    """The zygote did not answer; the caller starts the program as a plain subprocess instead."""


# --- the zygote process ---------------------------------------------------------------------------


def _preload() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # NB: no BLAS threads in a process that forks
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)


def _child(request: Mapping[str, Any]) -> None:
    """In the forked child: become the program, as ``Popen(argv, env, cwd, start_new_session=True)`` would."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 256)  # NB: as Popen's close_fds: nothing of the zygote's stays open in the program
        argv: list[str] = request["argv"]
        _retitle(argv)  # NB: before the env changes: setproctitle finds the memory it rewrites through environ
        os.environ.clear()
        os.environ.update(request["env"])
        _reseed()
        import runpy

        sys.argv = [argv[2], *argv[3:]]
        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # NB: whatever fails, the child says so in its log and exits
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _retitle(argv: Sequence[str]) -> None:
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(" ".join(argv))


def _reseed() -> None:
    import random

    random.seed()
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed()


def serve(inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """The zygote's loop: fork on each request line, report each child's exit; ends when ``inbox`` closes."""
    children: set[int] = set()
    pending = b""
    fd = inbox.fileno()

    def say(message: Mapping[str, Any]) -> None:
        outbox.write(json.dumps(message).encode() + b"\n")
        outbox.flush()

    while True:
        readable, _, _ = select.select([fd], [], [], POLL_S)
        if readable:
            chunk = os.read(fd, 1 << 16)  # NB: raw reads: a buffered readline would hide a second request from select
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(line))
                children.add(pid)
                say({"pid": pid})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                say({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def main() -> int:
    _preload()
    sys.stdout.buffer.write(json.dumps({"ready": True}).encode() + b"\n")  # NB: the first spawn waits for this, not REPLY_S
    sys.stdout.buffer.flush()
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


# --- the runner's side ----------------------------------------------------------------------------


class Zygote:
    """The runner's handle on one zygote process: ``spawn`` returns a ``ForkedProcess``."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[int] = []
        self._exits: dict[int, int] = {}
        self._dead = False
        self._ready = False

    def start(self, log_path: Path) -> None:
        with log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "servecert.fakes.pod_runner.zygote"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
            )
        threading.Thread(target=self._read, name="zygote-reader", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._dead and self._proc.poll() is None

    def can_run(self, argv: Sequence[str]) -> bool:
        """``<this python> -m <module> ...`` while the zygote lives; anything else starts as a subprocess."""
        return self.alive and len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m"

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path) -> ForkedProcess:
        request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd), "log": str(log_path)}
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or not self.alive:
                raise ZygoteError("the zygote is not running")
            try:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
            except OSError as exc:
                raise ZygoteError(f"the zygote's pipe closed: {exc}") from exc
            with self._changed:
                # NB: its imports take seconds of CPU (more on a busy machine); a spawn's own bound starts once they are done
                if not self._changed.wait_for(lambda: self._ready or self._dead, timeout=PRELOAD_S) or not self._ready:
                    self._dead = True
                    raise ZygoteError(f"the zygote was not ready within {PRELOAD_S} s of its start")
                if not self._changed.wait_for(lambda: self._replies or self._dead, timeout=REPLY_S) or not self._replies:
                    self._dead = True
                    raise ZygoteError(f"the zygote gave no pid within {REPLY_S} s")
                pid = self._replies.pop(0)
        return ForkedProcess(pid, self)

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
        if not self.alive:
            return _lost(pid)
        return None

    def wait_exit(self, pid: int, timeout: float) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._dead, timeout=timeout)
        return self.exit_code(pid)

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_S)

    def _read(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            with contextlib.suppress(ValueError, KeyError):
                message = json.loads(line)
                with self._changed:
                    if "ready" in message:
                        self._ready = True
                    elif "pid" in message:
                        self._replies.append(int(message["pid"]))
                    else:
                        self._exits[int(message["exit"])] = int(message["code"])
                    self._changed.notify_all()
        with self._changed:
            self._dead = True
            self._changed.notify_all()


def _lost(pid: int) -> int | None:
    """A child of a dead zygote: still running (None), or gone with an exit code nobody saw (-1)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return -1
    except PermissionError:
        return None
    return None


class ForkedProcess:
    """What the supervisor uses of ``subprocess.Popen`` (``pid``, ``poll``, ``wait``), for a zygote's child."""

    def __init__(self, pid: int, zygote: Zygote) -> None:
        self.pid = pid
        self._zygote = zygote
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._zygote.wait_exit(self.pid, STOP_S * 12 if timeout is None else timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        return self.returncode


if __name__ == "__main__":
    sys.exit(main())
