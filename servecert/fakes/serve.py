"""``servecert engine serve``: run fake engines in the foreground until interrupted.

The command line maps one-to-one onto ``EngineConfig``; topology comes from the environment
(both the seed's and Dynamo's variables, see ``servecert.fakes.topology_env``) unless ``--topology`` gives
the domains directly. A start-up refusal (bad variable, topology file never populated) prints
one line naming the cause and exits 2, like a worker's hard exit. With ``--count 1`` a crash of
the engine ends the process with status 3, so a supervisor (the pod runner) sees it.

Discovery: ``--discovery-dir`` publishes each engine's metadata as a file; with
``DYN_DISCOVERY_BACKEND=kubernetes`` the (single) engine publishes itself as a WorkerMetadata
object once ready and deletes it on a clean stop (``servecert.fakes.kube_registration``); missing pod env
or kubeconfig exits 2 at start-up, and so does a registration the API never accepted.

Termination (SIGTERM or SIGINT), as a pod in a rolling update sees it: withdraw from discovery
first (files and WorkerMetadata), then drain -- keep serving, requests that still arrive from a
frontend that has not noticed yet included, until no request has been in flight for
``--drain-quiet-seconds`` (default ``servecert.fakes.host.DRAIN_QUIET_S``; longer keeps a withdrawn worker up
and its pod Terminating, as a preStop sleep does) or ``--drain-seconds`` (default 20, inside a pod's 30 s
grace period) have passed -- then close. ``--drain-seconds 0`` closes at once; so does a second signal.

Every option can also come from the environment, ``SERVECERT_ENGINE_<OPTION>`` (e.g.
``SERVECERT_ENGINE_BLOCK_SIZE=32``); the command line wins.

Ground truth on disk: ``--groundtruth-file`` (default ``$SERVECERT_GROUNDTRUTH_FILE``) appends every
record of every engine of the process as a JSON line (``servecert.fakes.groundtruth.JsonLinesSink``), so the
suite can still judge an engine after its process, and its pod, are gone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from servecert.fakes import faults, groundtruth, network, timing, topology_env
from servecert.fakes.engine import ROLES, Engine, EngineConfig
from servecert.fakes.host import DRAIN_QUIET_S, EngineHost, addresses
from servecert.protocol import connection_guard, discovery_files, event_loop, kube_names, tokenizer
from servecert.protocol.engine_api import PD_PROTOCOLS, PD_SERVECERT

if TYPE_CHECKING:
    from servecert.fakes.kube_registration import Registration

EXIT_STARTUP = 2
EXIT_CRASHED = 3
ENV_GROUNDTRUTH_FILE = "SERVECERT_GROUNDTRUTH_FILE"
DEFAULT_DRAIN_SECONDS = 20.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address; with --count, each engine gets the next loopback address")
    p.add_argument("--role", choices=ROLES, default="agg")
    p.add_argument("--count", type=int, default=1, help="engines to start in this process")
    p.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per real second; 0 = no delays")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-gpu-blocks", type=int, default=16384)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--context-length", type=int, default=8192)
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--no-chunked-prefill", action="store_true")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--engine-version", default="1", help="KV layout / engine version")
    p.add_argument("--protocol-version", default="1", help="runtime protocol version spoken with frontends")
    p.add_argument(
        "--pd-protocol",
        choices=PD_PROTOCOLS,
        default=PD_SERVECERT,
        help="how P/D routers hand requests over on the OpenAI routes: vllm (kv_transfer_params), sglang (bootstrap room), "
        "or servecert (the runtime API only)",
    )
    p.add_argument(
        "--tokenizer",
        choices=sorted(tokenizer.KNOWN),
        default=tokenizer.TOKENIZER_NAME,
        help=f"the model card's tokenizer: {tokenizer.TOKENIZER_NAME} (the suite's) or {tokenizer.BYTES_NAME} (one token a UTF-8 "
        "byte, for real benchmark clients: give them `servecert engine model-folder --tokenizer` of the same)",
    )
    p.add_argument("--kv-bytes-per-token", type=int, default=131072)
    p.add_argument(
        "--spec-accept-length",
        type=float,
        default=1.0,
        help="speculative decoding: tokens a decode step emits on average (1 = none; vllm:spec_decode_* count them)",
    )
    p.add_argument("--namespace", default=os.environ.get("DYN_NAMESPACE", "dynamo"), help="dynamo namespace")
    p.add_argument("--timing", default="polynomial", help="polynomial | constant:PREFILL_MS:DECODE_MS | table:PATH")
    p.add_argument("--qos", type=Path, help="QoS table (JSON/YAML) for pricing KV transfers")
    p.add_argument("--topology", help="domains directly, e.g. zone=a,rack=r1,host=h1 (instead of env/files)")
    p.add_argument("--engine-id", help="engine id (default: generated); with --count, a suffix -i is added")
    p.add_argument("--discovery-dir", type=Path, help="publish each engine's metadata here (file discovery)")
    p.add_argument(
        "--groundtruth-file",
        type=Path,
        default=os.environ.get(ENV_GROUNDTRUTH_FILE) or None,
        help=f"append every ground-truth record here as a JSON line (default ${ENV_GROUNDTRUTH_FILE}; unset = none)",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=DEFAULT_DRAIN_SECONDS,
        help="on SIGTERM, serve requests in flight for at most this long after withdrawing from discovery (0 = close at once)",
    )
    p.add_argument(
        "--drain-quiet-seconds",
        type=float,
        default=DRAIN_QUIET_S,
        help="a drain ends once nothing has been in flight this long (longer: the withdrawn engine stays up, its pod Terminating)",
    )
    g = p.add_argument_group("fault injection")
    g.add_argument("--error-rate", type=float, default=0.0)
    g.add_argument("--crash-after", type=int, default=0)
    g.add_argument("--stall-after", type=int, default=0)
    g.add_argument("--stall-seconds", type=float, default=0.0)
    g.add_argument("--startup-seconds", type=float, default=0.0, help="model-load time before /health is 200")
    g.add_argument("--kill-stream-after", type=int, default=0)
    g.add_argument("--fault-seed", type=int, default=0)
    p.set_defaults(**env_defaults(p, os.environ))


ENV_PREFIX = "SERVECERT_ENGINE_"


def env_defaults(p: argparse.ArgumentParser, environ: Mapping[str, str]) -> dict[str, object]:
    """Option defaults from ``SERVECERT_ENGINE_<OPTION>`` (``SERVECERT_ENGINE_BLOCK_SIZE=32``); the command line wins.

    Seed 001's worker changes are to "command, args, or environment variables": a pod's env can
    configure its engine as its args can. A value stays a string, so argparse converts it with the
    option's type when the engine's command is parsed, and a bad one is refused there, naming it.
    """
    out: dict[str, object] = {}
    for action in p._actions:  # NB: argparse has no public list of a parser's options
        raw = environ.get(ENV_PREFIX + action.dest.upper())
        if not action.option_strings or action.dest in ("help", "host", "port") or raw is None:
            continue
        out[action.dest] = raw.lower() in ("1", "true", "yes") if action.nargs == 0 else raw
    return out


def config_from_args(args: argparse.Namespace, index: int = 0) -> EngineConfig:
    """Build one engine's config; raises ValueError or TopologyStartupError naming the bad input."""
    if args.topology:
        topo = topology_env.TopologyConfig(enabled=True, domains=topology_env.parse_domains(args.topology))
    else:
        topo = topology_env.load(os.environ)
    qos = network.load_qos(args.qos) if args.qos else None
    engine_id = ""
    if args.engine_id:
        engine_id = args.engine_id if args.count == 1 else f"{args.engine_id}-{index}"
    return EngineConfig(
        model=args.model,
        role=args.role,
        engine_id=engine_id,
        namespace=args.namespace,
        time_scale=args.time_scale,
        block_size=args.block_size,
        num_gpu_blocks=args.num_gpu_blocks,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_prefix_caching=not args.no_prefix_caching,
        enable_chunked_prefill=not args.no_chunked_prefill,
        context_length=args.context_length,
        tensor_parallel_size=args.tensor_parallel_size,
        dtype=args.dtype,
        engine_version=args.engine_version,
        protocol_version=args.protocol_version,
        pd_protocol=args.pd_protocol,
        tokenizer=args.tokenizer,
        kv_bytes_per_token=args.kv_bytes_per_token,
        spec_accept_length=args.spec_accept_length,
        timing=timing.from_spec(args.timing),
        network=network.FakeNetwork(qos=qos) if qos else network.FakeNetwork(),
        topology=topo,
        faults=faults.Faults(
            error_rate=args.error_rate,
            crash_after=args.crash_after,
            stall_after=args.stall_after,
            stall_seconds=args.stall_seconds,
            startup_seconds=args.startup_seconds,
            kill_stream_after=args.kill_stream_after,
            seed=args.fault_seed,
        ),
    )


def run(args: argparse.Namespace) -> int:
    if args.count < 1:
        print("servecert engine serve: error: --count must be >= 1", file=sys.stderr)
        return EXIT_STARTUP
    if args.drain_seconds < 0:
        print("servecert engine serve: error: --drain-seconds must be >= 0 (0 = close at once)", file=sys.stderr)
        return EXIT_STARTUP
    if args.drain_quiet_seconds < 0:
        print("servecert engine serve: error: --drain-quiet-seconds must be >= 0 (--drain-seconds still caps the drain)", file=sys.stderr)
        return EXIT_STARTUP
    try:
        configs = [config_from_args(args, i) for i in range(args.count)]
        hosts = addresses(args.host, args.count)
        registration = kube_registration(os.environ, args.count)
        connection_guard.Limits.from_env()  # NB: read again by each engine's app; a bad SERVECERT_HTTP_* stops here, named
    except (ValueError, OSError, topology_env.TopologyStartupError) as exc:
        print(f"servecert engine serve: error: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    return event_loop.run(_serve(args, configs, hosts, registration))


def kube_registration(env: Mapping[str, str], count: int) -> Registration | None:
    """The pod's WorkerMetadata registration when DYN_DISCOVERY_BACKEND is set; ValueError says what is missing."""
    if not env.get(kube_names.ENV_DISCOVERY_BACKEND):
        return None
    # NB: imported here: the Kubernetes client costs ~0.6 s to import, and file discovery never needs it.
    from servecert.fakes import kube_registration as registration

    pod = registration.PodIdentity.from_env(env)
    if pod is None:
        return None
    if count != 1:
        raise ValueError(
            f"{kube_names.ENV_DISCOVERY_BACKEND}={kube_names.DISCOVERY_KUBERNETES} serves one engine per process "
            f"(its {kube_names.WM_KIND} is named after the pod); got --count {count}"
        )
    return registration.connect(pod)


async def _serve(args: argparse.Namespace, configs: list[EngineConfig], hosts: list[str], registration: Registration | None) -> int:
    stop = asyncio.Event()
    hurry = asyncio.Event()
    crashed: list[Engine] = []

    def on_crash(engine: Engine) -> None:
        print(f"engine {engine.engine_id} crashed", file=sys.stderr, flush=True)
        crashed.append(engine)
        if args.count == 1:
            stop.set()

    def on_signal() -> None:
        (hurry if stop.is_set() else stop).set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    host = EngineHost(on_crash=on_crash)
    sink = groundtruth.JsonLinesSink(args.groundtruth_file) if args.groundtruth_file else None
    drain = False
    try:
        for i, (config, address) in enumerate(zip(configs, hosts, strict=True)):
            port = args.port if args.port == 0 or hosts.count(address) == 1 else args.port + i
            engine = await host.add(config, address, port)
            if sink is not None:
                engine.log.subscribe(sink)
            if args.discovery_dir:
                discovery_files.publish(args.discovery_dir, engine.metadata())
            print(f"engine {engine.engine_id} role={config.role} model={config.model} url={engine.url}", flush=True)
            if registration is not None and not await registration.publish_when_ready(engine, stop):
                return EXIT_STARTUP
        print(f"ready: {len(host.engines)} engine(s)", flush=True)
        await stop.wait()
        # NB: a crashed single engine has nothing left to serve; its process ends now.
        drain = args.drain_seconds > 0 and not (crashed and args.count == 1)
    except OSError as exc:
        print(f"servecert engine serve: error: cannot listen: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    finally:
        if args.discovery_dir:
            for engine in host.engines:
                discovery_files.unpublish(args.discovery_dir, engine.engine_id)
        if registration is not None:
            await registration.withdraw_quietly()
        if drain:
            await _drain(host, args.drain_seconds, args.drain_quiet_seconds, hurry)
        await host.close()
        if sink is not None:
            sink.close()
    return EXIT_CRASHED if crashed and args.count == 1 else 0


async def _drain(host: EngineHost, limit_s: float, quiet_s: float, hurry: asyncio.Event) -> None:
    """Serve what is in flight (withdrawn from discovery already), printing when the drain starts and ends."""
    print(
        f"draining: {host.in_flight()} request(s) in flight; serving until idle for {quiet_s:g} s, "
        f"at most {limit_s:g} s (a second SIGTERM closes now)",
        flush=True,
    )
    started = time.monotonic()
    left = await host.drain(limit_s, quiet_s=quiet_s, interrupt=hurry)
    took = time.monotonic() - started
    if left == 0:
        print(f"drained in {took:.1f} s", flush=True)
    else:
        why = "a second signal" if hurry.is_set() else f"the {limit_s:g} s limit"
        print(f"drain cut by {why} after {took:.1f} s with {left} request(s) in flight; closing them", flush=True)
