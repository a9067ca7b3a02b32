"""Run HAProxy as the weighted proxy of one DGD: its configuration, the process, a clear error when it is missing.

Data flow::

    servecert proxy serve --host H --port P --admin-port A --slots N
        -> render(...)            haproxy.cfg: HTTP frontend on H:P (``/proxy/health`` answered by
                                  HAProxy itself), one backend of N server slots (fe1..feN, no address
                                  yet), the runtime API on H:A (level admin)
        -> exec haproxy -db -f haproxy.cfg      (the pod runner supervises it like any pod process)
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
Every abnormal request (an error, a retry, HAProxy's own 503) is logged to stderr in HTTP log
format (``option dontlog-normal``: successful ones are not), so the proxy pod's log says whether
a 503 was HAProxy's ``<NOSRV>`` (no usable slot) or ``SC`` (the slot refused the connection) and
which slot (docs/rollouts-503-research.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

BACKEND = "frontends"
SLOT_PREFIX = "fe"
HEALTH_PATH = "/proxy/health"
DEFAULT_ADMIN_PORT = 9999
DEFAULT_SLOTS = 4
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


def serve(args: argparse.Namespace) -> int:
    """Write the configuration and replace this process with HAProxy (foreground)."""
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
    os.execv(exe, [exe, "-db", "-f", str(config)])
    return 0  # pragma: no cover - execv does not return
