"""``servecert planner serve``: the reference planner as a DGD component, scaling its DGD on a cluster.

Seed 003 (Connector Design, KubernetesConnector): the planner "Uses DYN_PARENT_DGD_K8S_NAME to
find its parent DGD (injected by operator)" and "Validates deployment structure on startup".

Data flow::

    env DYN_PARENT_DGD_K8S_NAME, POD_NAMESPACE, DYN_NAMESPACE, KUBECONFIG   (missing: exit 2 naming it)
    flags --<PlannerConfig field> (``--ttft-ms 1000 --time-scale 2 ...``; the sweep as --perf-profile JSON)
                                                                        (a bad mix: exit 2, PlannerConfigError)
      -> KubernetesConnector.validate(): the DGD's prefill and decode components by type
         (aggregated: its worker set), one model                          (a bad graph: exit 2 naming it)
      -> KubeWorkers: the WorkerMetadata objects of DYN_NAMESPACE (registered = ready)
      -> Planner ticks: FPM and Prometheus from each engine's URL, decisions patched onto the DGD
      -> HTTP on --host/--port: /health (200 once ticking), /metrics, /diagnostics, /report

A failed validation exits, so the pod never turns Ready and the DGD says why; nothing is patched.
SIGTERM stops the loop, the feeds and the listener, then exits 0. ``--hooks module:ATTRIBUTE``
names a ``Hooks`` that changes one choice (the deliberately broken planners of
``tests/nonconforming``); the reference uses ``REFERENCE``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from servecert.protocol import event_loop, kube_names, named_object
from servecert.protocol.perf_profile import PerfProfile
from servecert.reference_impl.planner import app as planner_app
from servecert.reference_impl.planner.config import PlannerConfig, PlannerConfigError
from servecert.reference_impl.planner.connectors.kubernetes import DeploymentShapeError, KubernetesConnector, Resolve, by_type
from servecert.reference_impl.planner.planner import Planner

EXIT_CONFIG = 2
ENV_PARENT_DGD = "DYN_PARENT_DGD_K8S_NAME"
REQUIRED_ENV = (ENV_PARENT_DGD, kube_names.ENV_POD_NAMESPACE, kube_names.ENV_DYN_NAMESPACE)
FLAG_TYPES: Mapping[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "str | None": str}
SKIPPED_FIELDS = ("perf_profile", "namespace")
"""Not flags of their own: the throughput sweep is ``--perf-profile JSON``; the namespace is DYN_NAMESPACE."""
log = logging.getLogger("servecert.planner.serve")


def parent_from_env(api: Any, namespace: str, name: str) -> str:
    """Seed 003: the DGD the operator named in ``DYN_PARENT_DGD_K8S_NAME``."""
    return name


@dataclass(frozen=True)
class Hooks:
    """The choices a deliberately broken planner changes: which DGD is its own, how it finds and checks components."""

    parent_dgd: Callable[[Any, str, str], str] = parent_from_env
    resolve: Resolve = by_type
    check_models: bool = True


REFERENCE = Hooks()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9085, help="HTTP: /health, /metrics, /diagnostics, /report")
    p.add_argument("--hooks", default="servecert.reference_impl.planner.serve:REFERENCE", help="module:ATTRIBUTE of a Hooks")
    p.add_argument(
        "--perf-profile",
        type=perf_profile_from_json,
        help='pre-deployment sweep as JSON: {"isl": N, "context": N, "prefill": [[tokens/s per GPU, TTFT ms], ...], "decode": [...]}',
    )
    for f in dataclasses.fields(PlannerConfig):
        if f.name in SKIPPED_FIELDS:
            continue
        flag = "--" + f.name.replace("_", "-")
        if str(f.type) == "bool":
            p.add_argument(flag, type=_boolean, default=None, metavar="true|false", help=f"PlannerConfig.{f.name}")
        else:
            p.add_argument(flag, type=FLAG_TYPES.get(str(f.type), str), default=None, help=f"PlannerConfig.{f.name}")


def perf_profile_from_json(text: str) -> PerfProfile:
    try:
        data = json.loads(text)
        return PerfProfile(
            int(data["isl"]), int(data["context"]),
            tuple((float(x), float(y)) for x, y in data["prefill"]), tuple((float(x), float(y)) for x, y in data["decode"]),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"not a perf profile ({type(exc).__name__}: {exc}); see --help for its shape") from None


def perf_profile_json(profile: PerfProfile) -> str:
    return json.dumps(dataclasses.asdict(profile), separators=(",", ":"))


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def config_from(args: argparse.Namespace, dynamo_namespace: str) -> PlannerConfig:
    """PlannerConfig's defaults, overridden by every flag given; raises PlannerConfigError for a bad mix."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(PlannerConfig) if getattr(args, f.name, None) is not None}
    # NB: --perf-profile's destination is the perf_profile field, so it is taken here with the others.
    return PlannerConfig(namespace=dynamo_namespace, **given)


def _error(message: str) -> int:
    print(f"servecert planner serve: error: {message}", file=sys.stderr, flush=True)
    return EXIT_CONFIG


def run(args: argparse.Namespace) -> int:
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        return _error(
            f"{', '.join(missing)} not set: the operator injects {ENV_PARENT_DGD} (the DGD this planner scales) and the pod's "
            "namespace and Dynamo namespace into a planner component's pods; set them to run it by hand"
        )
    try:
        config = config_from(args, os.environ[kube_names.ENV_DYN_NAMESPACE])
        hooks = named_object.load(args.hooks, "--hooks", Hooks)
    except (PlannerConfigError, ValueError, TypeError) as exc:
        return _error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return event_loop.run(_serve(args, config, hooks))


async def _serve(args: argparse.Namespace, config: PlannerConfig, hooks: Hooks) -> int:
    # NB: imported here: the Kubernetes client costs ~0.6 s to import, and `servecert --help` needs none of it.
    from kubernetes import config as kube_config
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException

    from servecert.reference_impl.planner.kube_workers import KubeWorkers

    namespace = os.environ[kube_names.ENV_POD_NAMESPACE]
    try:
        api = kube_config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
    except (ConfigException, OSError) as exc:
        return _error(f"cannot load the kubeconfig (KUBECONFIG={os.environ.get('KUBECONFIG')!r}): {exc}")
    try:
        dgd = await asyncio.to_thread(hooks.parent_dgd, api, namespace, os.environ[ENV_PARENT_DGD])
        connector = KubernetesConnector(api, namespace, dgd, config.mode, hooks.resolve, hooks.check_models)
        resolved = await connector.validate()
    except DeploymentShapeError as exc:
        return _error(f"start-up validation: {exc}")
    except ApiException as exc:
        return _error(f"reading DGD {namespace}/{os.environ[ENV_PARENT_DGD]}: {exc.status} {exc.reason}; does it exist?")
    print(f"planner scales DGD {namespace}/{dgd}: {', '.join(f'{r}={n}' for r, n in resolved.items())}", flush=True)
    workers = KubeWorkers(api, namespace, config.namespace)
    await workers.start()
    async with aiohttp.ClientSession() as session:
        planner = Planner(config, workers, connector, session)
        planner.start()
        runner = web.AppRunner(planner_app.create_app(planner), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, args.host, args.port).start()
            print(f"planner url=http://{args.host}:{args.port}", flush=True)
            print("ready", flush=True)
            await _until_signal()
        except OSError as exc:
            return _error(f"cannot listen on {args.host}:{args.port}: {exc}")
        finally:
            await planner.stop()
            await workers.stop()
            await runner.cleanup()
            api.close()
    return 0


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
