"""Run HAProxy as the weighted proxy of one DGD: its configuration, the process, a clear error when it is missing.

Data flow::

    servecert proxy serve --host H --port P --admin-port A --slots N
        -> render(...)            haproxy.cfg: HTTP frontend on H:P (``/proxy/health`` answered by
                                  HAProxy itself), one backend of N server slots (fe1..feN, no address
                                  yet), the runtime API on H:A (level admin)
        -> haproxy -db -f haproxy.cfg, a child in its own process group (the pod runner supervises
           this parent like any pod process)
        on SIGTERM: HAProxy keeps serving for --leave-seconds (the Service drops the pod meanwhile),
           then soft-stops (SIGUSR1: no new connections, the streams in flight finish); the parent
           exits with it. HAProxy dies with the parent (PR_SET_PDEATHSIG) if the grace ends first.
    the controller, through runtime_api: slot <- frontend address, weight, ready / drain

Why slots and the runtime API: the frontends' addresses are known only once their pods run, and
weights change as workers become ready; the runtime API changes both without a reload, so no
stream in flight is cut (seed 001 4.3.3). Timeouts are long because an SSE completion stream may
last minutes; ``option http-server-close`` is not set, so each stream keeps its connection.
A request a frontend answers 404 or 503 before streaming (a frontend that has just lost its last
worker, or not yet discovered its first) or whose connection fails is tried again on another
frontend (``retry-on``, ``option redispatch``): a weight change is never quite simultaneous with
what the frontends see. ``option http-no-delay``: each SSE event is forwarded at once; without it
the first token waited for the client's delayed ACK of the headers (time to first token 205 ms
through the proxy against 43 ms direct on this machine; with it, 44 ms — ``servecert bench rollout``).
``/proxy/health`` fails (503) while no slot can take a request (``nbsrv`` 0: no frontend
weighted yet), so a replica the controller has not configured yet is not Ready and its Service
sends it nothing (seed 001 4.3.3: "a Service in front", replicated "for HA").
Every abnormal request (an error, a retry, HAProxy's own 503) is logged to stderr in HTTP log
format (``option dontlog-normal``: successful ones are not), so the proxy pod's log says whether
a 503 was HAProxy's ``<NOSRV>`` (no usable slot) or ``SC`` (the slot refused the connection) and
which slot (docs/research/rollouts-503.md).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

BACKEND = "frontends"
SLOT_PREFIX = "fe"
HEALTH_PATH = "/proxy/health"
DEFAULT_ADMIN_PORT = 9999
DEFAULT_SLOTS = 4
DEFAULT_LEAVE_S = 3.0
"""After SIGTERM, how long HAProxy still takes new connections: meanwhile the Service's endpoints and proxies drop the pod."""
_PR_SET_PDEATHSIG = 1
INSTALL_HINT = "install Debian's haproxy package (`apt-get install haproxy`; `make test` and `make certify` do it)"


class HAProxyMissing(RuntimeError):
    """No haproxy binary on PATH; the message says how to install it."""


def slot_name(index: int) -> str:
    """Server slot ``index`` (from 1), as HAProxy's server-template names it."""
    return f"{SLOT_PREFIX}{index}"


def render(host: str, port: int, admin_port: int, slots: int) -> str:
    return f"""global
    maxconn 4096
    stats socket ipv4@{host}:{admin_port} level admin
    stats timeout 30s
    log stderr format raw local0 info

defaults
    mode http
    log global
    option httplog
    option dontlog-normal
    option http-no-delay
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout http-request 30s

frontend dgd
    bind {host}:{port}
    monitor-uri {HEALTH_PATH}
    monitor fail if {{ nbsrv({BACKEND}) lt 1 }}
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    retry-on conn-failure empty-response 404 503
    retries 2
    option redispatch 1
    server-template {SLOT_PREFIX} 1-{slots} 127.0.0.1:1 disabled init-addr none weight 0
"""


def binary() -> str:
    found = shutil.which("haproxy", path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin")  # NB: Debian installs it there
    if found is None:
        raise HAProxyMissing(f"haproxy is not installed: {INSTALL_HINT}")
    return found


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--admin-port", type=int, default=DEFAULT_ADMIN_PORT, help="HAProxy's runtime API (TCP, level admin)")
    p.add_argument("--slots", type=int, default=DEFAULT_SLOTS, help="frontend server slots the controller can fill")
    p.add_argument("--config-dir", type=Path, help="where to write haproxy.cfg (default: a new temporary directory)")
    p.add_argument("--leave-seconds", type=float, default=DEFAULT_LEAVE_S, help="keep serving this long after SIGTERM, then soft-stop")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (the pod's grace ended), so no HAProxy outlives its pod."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def serve(args: argparse.Namespace) -> int:
    """Write the configuration, run HAProxy in the foreground, and stop it gracefully on SIGTERM."""
    try:
        exe = binary()
    except HAProxyMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    directory = args.config_dir or Path(tempfile.mkdtemp(prefix="servecert-haproxy-"))
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "haproxy.cfg"
    config.write_text(render(args.host, args.port, args.admin_port, args.slots))
    sys.stdout.flush()
    leaving = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: leaving.set())
    # NB: its own session: the pod runner signals the pod's process group, and HAProxy's SIGTERM is a hard stop.
    # preexec_fn is safe here: this process has started no thread.
    proc = subprocess.Popen([exe, "-db", "-f", str(config)], start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509
    while proc.poll() is None and not leaving.wait(0.2):
        continue  # NB: bounded by the pod's life: the runner SIGKILLs it once the grace is over
    if proc.poll() is None:
        print(f"SIGTERM: serving {args.leave_seconds:.1f}s more while the Service drops this pod, then soft-stop", file=sys.stderr)
        if not _exited(proc, args.leave_seconds):
            proc.send_signal(signal.SIGUSR1)
    return proc.wait()


def _exited(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True
