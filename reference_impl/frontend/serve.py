"""``servecert frontend serve``: the reference frontend as a process, finding workers by file or Kubernetes discovery.

Router settings come from the environment, as an operator injects them into a frontend pod
(``DYN_ROUTER_MODE``, ``DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL``,
``DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY``, ``DYN_NAMESPACE``, ``DYN_ROUTER_TEMPERATURE``); the
command line may override the mode. Discovery: ``DYN_DISCOVERY_BACKEND=kubernetes`` (with
``POD_NAMESPACE`` and ``KUBECONFIG``) lists WorkerMetadata objects (``kube_discovery``);
otherwise ``--discovery-dir`` names the folder of file discovery. Prints ``url=...`` and
``ready`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path

from aiohttp import web

from protocol import event_loop
from reference_impl.frontend import app as frontend_app
from reference_impl.frontend.discovery import Discovery, FileDiscovery

EXIT_CONFIG = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 = any free port")
    p.add_argument("--discovery-dir", type=Path, help="folder where workers publish their metadata (file discovery)")
    p.add_argument("--router-mode", choices=["kv", "round-robin", "random"], help="overrides DYN_ROUTER_MODE")
    p.add_argument("--frontend-id", default="frontend")


def run(args: argparse.Namespace) -> int:
    try:
        config = frontend_app.FrontendConfig.from_env(dict(os.environ), args.frontend_id)
    except ValueError as exc:
        print(f"servecert frontend serve: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.router_mode:
        config = dataclasses.replace(config, router_mode=args.router_mode)
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
        from reference_impl.frontend.kube_discovery import KubernetesDiscovery

        return KubernetesDiscovery.from_settings(config.kube_discovery)
    if folder is None:
        raise ValueError("no discovery: pass --discovery-dir FOLDER, or set DYN_DISCOVERY_BACKEND=kubernetes")
    return FileDiscovery(folder)


async def _serve(args: argparse.Namespace, config: frontend_app.FrontendConfig, discovery: Discovery) -> int:
    frontend = frontend_app.Frontend(config, discovery)
    runner = web.AppRunner(frontend_app.create_app(frontend), access_log=None, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, args.host, args.port).start()
    except OSError as exc:
        await runner.cleanup()
        print(f"servecert frontend serve: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"frontend {config.frontend_id} url=http://{args.host}:{runner.addresses[0][1]}", flush=True)
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    return 0
