"""``servecert frontend serve``: the reference frontend as a process, finding workers by file or Kubernetes discovery.

Router settings come from the environment, as an operator injects them into a frontend pod
(``DYN_ROUTER_MODE``, ``DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL``,
``DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY``, ``DYN_NAMESPACE``, ``DYN_ROUTER_TEMPERATURE``); the
command line may override the mode. Discovery: ``DYN_DISCOVERY_BACKEND=kubernetes`` (with
``POD_NAMESPACE`` and ``KUBECONFIG``) lists WorkerMetadata objects (``kube_discovery``);
otherwise ``--discovery-dir`` names the folder of file discovery. Prints ``url=...`` and
``ready`` once listening. Log records go to stderr with their level name (``WARNING`` for a
topology fallback), which is how the suite reads a frontend pod's warnings. ``--frontend-id``
(the id engines record in their ground truth for every request this frontend preprocessed)
defaults to ``$POD_NAME``, so on a cluster it names the pod.

Termination (SIGTERM or SIGINT), as a pod in a rolling update sees it: stop listening at once,
close idle keep-alive connections, let requests and streams in flight finish for up to
``--drain-seconds`` (default 20; aiohttp's ``AppRunner.cleanup`` with that ``shutdown_timeout``),
then stop discovery and the upstream session, and exit 0. A second signal cuts what is left.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
import time
from pathlib import Path

from aiohttp import web

from servecert.protocol import connection_guard, event_loop, kube_names
from servecert.reference_impl.frontend import app as frontend_app
from servecert.reference_impl.frontend.discovery import Discovery, FileDiscovery

EXIT_CONFIG = 2
DEFAULT_DRAIN_SECONDS = 20.0
MIN_GRACE_S = 0.01


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 = any free port")
    p.add_argument("--discovery-dir", type=Path, help="folder where workers publish their metadata (file discovery)")
    p.add_argument("--router-mode", choices=["kv", "round-robin", "random"], help="overrides DYN_ROUTER_MODE")
    p.add_argument(
        "--frontend-id",
        default=os.environ.get(kube_names.ENV_POD_NAME) or "frontend",
        help=f"id recorded by engines for requests sent from here (default ${kube_names.ENV_POD_NAME}, else frontend)",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=DEFAULT_DRAIN_SECONDS,
        help="on SIGTERM, let requests in flight finish for at most this long (0 = cut them at once)",
    )


def run(args: argparse.Namespace) -> int:
    if args.drain_seconds < 0:
        print("servecert frontend serve: error: --drain-seconds must be >= 0 (0 = cut requests at once)", file=sys.stderr)
        return EXIT_CONFIG
    try:
        config = frontend_app.FrontendConfig.from_env(dict(os.environ), args.frontend_id)
        connection_guard.Limits.from_env()  # NB: read again by the app; a bad SERVECERT_HTTP_* stops here, named
    except ValueError as exc:
        print(f"servecert frontend serve: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.router_mode:
        config = dataclasses.replace(config, router_mode=args.router_mode)
    # NB: a level name on every line: the suite reads a pod's warnings from its log (seed 000: "Log warning").
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        discovery = discovery_for(config, args.discovery_dir)
    except ValueError as exc:
        print(f"servecert frontend serve: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return event_loop.run(_serve(args, config, discovery))


def discovery_for(config: frontend_app.FrontendConfig, folder: Path | None) -> Discovery:
    """The backend the config asks for; raises ValueError saying what to set when there is none."""
    if config.kube_discovery is not None:
        # NB: imported here: the Kubernetes client costs ~0.6 s to import, file discovery never needs it.
        from servecert.reference_impl.frontend.kube_discovery import KubernetesDiscovery

        return KubernetesDiscovery.from_settings(config.kube_discovery)
    if folder is None:
        raise ValueError("no discovery: pass --discovery-dir FOLDER, or set DYN_DISCOVERY_BACKEND=kubernetes")
    return FileDiscovery(folder)


async def _serve(args: argparse.Namespace, config: frontend_app.FrontendConfig, discovery: Discovery) -> int:
    frontend = frontend_app.Frontend(config, discovery)
    # NB: aiohttp reads a shutdown_timeout of 0 as "no limit"; 0 here means cut at once.
    grace = max(args.drain_seconds, MIN_GRACE_S)
    app = frontend_app.create_app(frontend)
    runner = await connection_guard.start_runner(app, access_log=None, handle_signals=False, shutdown_timeout=grace)
    try:
        await web.TCPSite(runner, args.host, args.port).start()
    except OSError as exc:
        await runner.cleanup()
        print(f"servecert frontend serve: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"frontend {config.frontend_id} url=http://{args.host}:{runner.addresses[0][1]}", flush=True)
    print("ready", flush=True)
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            _cut_connections(runner)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    await stop.wait()
    print(
        f"draining: {_open_connections(runner)} connection(s) open; no new ones, at most {args.drain_seconds:g} s "
        "(a second SIGTERM cuts them)",
        flush=True,
    )
    started = time.monotonic()
    # NB: cleanup stops the listener, closes idle keep-alive connections, waits up to shutdown_timeout for
    # every handler (a stream's ends with its last byte), cancels the rest, then runs the app's cleanup
    # (discovery, KV feeds, the upstream session), so nothing in flight loses its upstream early.
    await runner.cleanup()
    print(f"stopped after {time.monotonic() - started:.1f} s of draining", flush=True)
    return 0


def _open_connections(runner: web.AppRunner) -> int:
    return len(runner.server.connections) if runner.server is not None else 0


def _cut_connections(runner: web.AppRunner) -> None:
    """Second signal while draining: close every client connection now (their handlers end at their next write)."""
    if runner.server is None:
        return
    for connection in runner.server.connections:
        connection.force_close()
