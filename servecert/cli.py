"""The ``servecert`` command: one entry point, subcommands registered from the modules that own them.

Heavy imports happen inside each subcommand's runner, so ``servecert --help`` is quick and one
subcommand's dependencies never slow another.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

Runner = Callable[[argparse.Namespace], int]


def _engine_serve(args: argparse.Namespace) -> int:
    from servecert.fakes import serve

    return serve.run(args)


def _engine_model_folder(args: argparse.Namespace) -> int:
    from servecert.fakes import model_folder

    for path in model_folder.write(args.folder, args.context_length, args.tokenizer):
        print(path)
    print(
        f"the fake model's folder: load it as the tokenizer of the served model (e.g. aiperf --tokenizer {args.folder}); "
        f"its token counts equal the fake engines' usage when they serve with --tokenizer {args.tokenizer}"
    )
    return 0


def _planner_serve(args: argparse.Namespace) -> int:
    from servecert.reference_impl.planner import serve

    return serve.run(args)


def _frontend_serve(args: argparse.Namespace) -> int:
    from servecert.reference_impl.frontend import serve

    return serve.run(args)


def _bench_router(args: argparse.Namespace) -> int:
    from servecert.benchmarks import router_bench

    return router_bench.run(args)


def _bench_pd_routers(args: argparse.Namespace) -> int:
    from servecert.benchmarks import pd_routers_bench

    return pd_routers_bench.run(args)


def _bench_clients(args: argparse.Namespace) -> int:
    from servecert.benchmarks import clients_bench

    return clients_bench.run(args)


def _bench_engine(args: argparse.Namespace) -> int:
    from servecert.benchmarks import engine_bench

    return engine_bench.run(args)


def _bench_cluster(args: argparse.Namespace) -> int:
    from servecert.benchmarks import cluster_bench

    return cluster_bench.run(args)


def _bench_gang(args: argparse.Namespace) -> int:
    from servecert.benchmarks import gang_bench

    return gang_bench.run(args)


def _bench_rollout(args: argparse.Namespace) -> int:
    from servecert.benchmarks import rollout_bench

    return rollout_bench.run(args)


def _bench_flakes(args: argparse.Namespace) -> int:
    from servecert.benchmarks import flakes_bench

    return flakes_bench.run(args)


def _proxy_serve(args: argparse.Namespace) -> int:
    from servecert.reference_impl.traffic_split import haproxy

    return haproxy.serve(args)


def _load_run(args: argparse.Namespace) -> int:
    from servecert.load import runner

    return runner.run(args)


def _planner_demo(args: argparse.Namespace) -> int:
    from servecert.benchmarks import planner_demo

    return planner_demo.run(args)


def _bench_planner(args: argparse.Namespace) -> int:
    from servecert.benchmarks import planner_bench

    return planner_bench.run(args)


def _bench_planner_calibrate(args: argparse.Namespace) -> int:
    from servecert.benchmarks import planner_calibrate

    return planner_calibrate.run(args)


def _operator_run(args: argparse.Namespace) -> int:
    from servecert.reference_impl.operator import run

    return run.main(args)


def _haproxy_missing() -> str:
    """Why the reference DGD's traffic proxy cannot run here ('' when Debian's haproxy is installed)."""
    from servecert.reference_impl.traffic_split import haproxy

    try:
        haproxy.binary()
    except haproxy.HAProxyMissing as exc:
        return str(exc)
    return ""


def _setup(args: argparse.Namespace) -> int:
    from servecert.harness import prerequisites

    return prerequisites.run(args, tools=(_haproxy_missing,))


def _certify(args: argparse.Namespace) -> int:
    from servecert.conformance import certify

    return certify.run(args)


POD_PROGRAMS = frozenset({("engine", "serve"), ("frontend", "serve"), ("proxy", "serve"), ("planner", "serve")})
"""The commands the pods run: ``main`` builds only their parser for them (``pod_program_parser``)."""


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _root_parser() -> tuple[argparse.ArgumentParser, Commands]:
    parser = argparse.ArgumentParser(
        prog="servecert",
        description="Conformance suite and test harness for Kubernetes LLM-serving control planes.",
    )
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND", required=True)


def pod_program_parser() -> argparse.ArgumentParser:
    """The parser of the pods' programs alone (the fake engine, the reference frontend, the proxy).

    Why apart: the whole parser imports every subcommand's module (kopf, the suite, the
    benchmarks) for its options: 0.24 s of CPU in each of the hundreds of pods make test starts.
    """
    parser, commands = _root_parser()
    _add_pod_programs(commands)
    return parser


def _add_pod_programs(commands: Commands) -> None:
    """The pods' programs: the fake engine (and its model folder), the reference frontend, the proxy, the planner."""
    _add_engine(commands)
    _add_frontend(commands)
    _add_proxy(commands)
    _add_planner(commands, demo=False)


def _add_engine(commands: Commands) -> None:
    from servecert.fakes import serve
    from servecert.protocol import tokenizer

    engine = commands.add_parser("engine", help="fake GPU engines").add_subparsers(dest="action", required=True)
    serve_p = engine.add_parser("serve", help="start fake engines in the foreground and print their addresses")
    serve.add_arguments(serve_p)
    serve_p.set_defaults(run=_engine_serve)
    folder_p = engine.add_parser(
        "model-folder", help="write the fake model's folder (config.json, tokenizer.json, ...) for clients that count tokens"
    )
    folder_p.add_argument("folder", type=Path, help="the folder to write (created if missing)")
    folder_p.add_argument("--context-length", type=int, default=8192, help="max_position_embeddings and model_max_length")
    folder_p.add_argument(
        "--tokenizer",
        choices=sorted(tokenizer.KNOWN),
        default=tokenizer.TOKENIZER_NAME,
        help="the engines' --tokenizer: servecert-bytes-v1 gives real clients' text distinct tokens (their prompts decode "
        "from token ids); servecert-words-v1's folder knows only the engines' own words",
    )
    folder_p.set_defaults(run=_engine_model_folder)


def _add_frontend(commands: Commands) -> None:
    from servecert.reference_impl.frontend import serve as frontend_serve

    frontend = commands.add_parser("frontend", help="the reference frontend").add_subparsers(dest="action", required=True)
    frontend_p = frontend.add_parser("serve", help="run the reference frontend with file discovery")
    frontend_serve.add_arguments(frontend_p)
    frontend_p.set_defaults(run=_frontend_serve)


def _add_proxy(commands: Commands) -> None:
    from servecert.reference_impl.traffic_split import haproxy

    proxy = commands.add_parser("proxy", help="the DGD's weighted traffic proxy (HAProxy)").add_subparsers(dest="action", required=True)
    proxy_p = proxy.add_parser("serve", help="run HAProxy with empty frontend slots and its runtime API (seed 001 4.3.3)")
    haproxy.add_arguments(proxy_p)
    proxy_p.set_defaults(run=_proxy_serve)


def _add_planner(commands: Commands, demo: bool = True) -> None:
    """``planner serve`` (a pod's program) and, unless for a pod, ``planner demo`` (which imports the benchmarks)."""
    from servecert.reference_impl.planner import serve as planner_serve

    planner = commands.add_parser("planner", help="the reference planner").add_subparsers(dest="action", required=True)
    planner_p = planner.add_parser("serve", help="run the reference planner as a DGD component (Kubernetes connector, seed 003)")
    planner_serve.add_arguments(planner_p)
    planner_p.set_defaults(run=_planner_serve)
    if not demo:
        return
    from servecert.benchmarks import planner_demo

    demo_p = planner.add_parser("demo", help="reference frontend + planner + fake engines scaled by the suite's harness; optional load")
    planner_demo.add_arguments(demo_p)
    demo_p.set_defaults(run=_planner_demo)


def _add_bench(commands: Commands) -> None:
    from servecert.benchmarks import (
        clients_bench,
        cluster_bench,
        engine_bench,
        flakes_bench,
        gang_bench,
        pd_routers_bench,
        planner_bench,
        planner_calibrate,
        rollout_bench,
        router_bench,
    )

    bench = commands.add_parser("bench", help="benchmarks (figures, never pass/fail)").add_subparsers(dest="action", required=True)
    bench_engine = bench.add_parser("engine", help="SSE throughput of one engine and RSS of many idle engines")
    engine_bench.add_arguments(bench_engine)
    bench_engine.set_defaults(run=_bench_engine)
    bench_router = bench.add_parser("router", help="frontend + 2 engines under the project's load script; routing decision time")
    router_bench.add_arguments(bench_router)
    bench_router.set_defaults(run=_bench_router)
    bench_pd = bench.add_parser(
        "pd-routers", help="the reference frontend, vllm-router and sglang-router side by side in P/D under the project's load script"
    )
    pd_routers_bench.add_arguments(bench_pd)
    bench_pd.set_defaults(run=_bench_pd_routers)
    bench_clients = bench.add_parser("clients", help="AIPerf beside servecert load run on the same stack: latencies and token counts")
    clients_bench.add_arguments(bench_clients)
    bench_clients.set_defaults(run=_bench_clients)
    bench_cluster = bench.add_parser("cluster", help="embedded cluster: warm up time, 1,000 GPU nodes Ready, 1,000 pods via Volcano")
    cluster_bench.add_arguments(bench_cluster)
    bench_cluster.set_defaults(run=_bench_cluster)
    bench_gang = bench.add_parser(
        "gang",
        help="Volcano on 256 nodes / 2,048 GPUs (--nodes): a 64-pod gang, seed 004's table, topology-aware gangs",
    )
    gang_bench.add_arguments(bench_gang)
    bench_gang.set_defaults(run=_bench_gang)
    bench_rollout = bench.add_parser(
        "rollout", help="one block-size rollout of the suite's DGD under streaming load; the proxy's cost against direct requests"
    )
    rollout_bench.add_arguments(bench_rollout)
    bench_rollout.set_defaults(run=_bench_rollout)
    bench_flakes = bench.add_parser("flakes", help="certify N times in a row (optionally under stress); every failure with its diagnostics")
    flakes_bench.add_arguments(bench_flakes)
    bench_flakes.set_defaults(run=_bench_flakes)
    bench_planner = bench.add_parser(
        "planner", help="planners side by side on the same PLANNER-SCALING traces: SLA attainment and GPU-seconds"
    )
    planner_bench.add_arguments(bench_planner)
    bench_planner.set_defaults(run=_bench_planner)
    calibrate = bench.add_parser("planner-calibrate", help="SLA capacity of the PLANNER-SCALING scenario engines")
    planner_calibrate.add_arguments(calibrate)
    calibrate.set_defaults(run=_bench_planner_calibrate)


def _add_cluster(commands: Commands) -> None:
    from servecert.harness.cluster import commands as cluster_commands

    cluster = commands.add_parser("cluster", help="the embedded Kubernetes cluster").add_subparsers(dest="action", required=True)
    cluster_commands.add_commands(cluster)


def _add_load(commands: Commands) -> None:
    from servecert.load import runner

    load = commands.add_parser("load", help="locust load profiles").add_subparsers(dest="action", required=True)
    load_run = load.add_parser("run", help="run a load profile with locust (headless subprocess) and write CSV, JSON and HTML reports")
    runner.add_arguments(load_run)
    load_run.set_defaults(run=_load_run)


def _add_operator(commands: Commands) -> None:
    from servecert.reference_impl.operator import run as operator_run

    operator = commands.add_parser("operator", help="the reference operator").add_subparsers(dest="action", required=True)
    operator_p = operator.add_parser("run", help="run the reference operator (kopf) against a cluster; the suite's installer starts it")
    operator_run.add_arguments(operator_p)
    operator_p.set_defaults(run=_operator_run)


def _add_setup(commands: Commands) -> None:
    from servecert.harness import prerequisites

    setup_p = commands.add_parser(
        "setup", help="build and check what the suite needs (cluster binaries, HAProxy) before any test starts, with progress"
    )
    prerequisites.add_arguments(setup_p)
    setup_p.set_defaults(run=_setup)


def _add_certify(commands: Commands) -> None:
    from servecert.conformance import certify

    certify_p = commands.add_parser("certify", help="run conformance profiles against an implementation and write the report")
    certify.add_arguments(certify_p)
    certify_p.set_defaults(run=_certify)


COMMANDS: dict[str, Callable[[Commands], None]] = {
    "engine": _add_engine,
    "frontend": _add_frontend,
    "proxy": _add_proxy,
    "planner": _add_planner,
    "bench": _add_bench,
    "cluster": _add_cluster,
    "load": _add_load,
    "operator": _add_operator,
    "setup": _add_setup,
    "certify": _add_certify,
}
"""Each top-level command and what adds it, in the order ``servecert --help`` lists them."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``only`` the parser of that one top-level command.

    Why one command alone: the whole parser imports every command's module (kopf, the suite, the
    benchmarks) for its options, 2.6 s of CPU; make test starts a certify run or an operator
    (``servecert operator run``) a few hundred times, each of which needs its own options only.
    """
    parser, commands = _root_parser()
    for name, add in COMMANDS.items():
        if only is None or name == only:
            add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if tuple(given[:2]) in POD_PROGRAMS:
        parser = pod_program_parser()
    else:
        parser = build_parser(only=given[0] if given and given[0] in COMMANDS else None)
    args = parser.parse_args(given)
    run: Runner = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
