"""``servecert cluster up|status|down|build``: the embedded cluster from a shell.

``up`` prints progress and, at the end, the ``export KUBECONFIG=...`` line; the cluster keeps
running after the command returns (its processes have their own sessions) until ``down``.
Every command finds the cluster by name through ``state.json`` (servecert.harness.cluster.state).
Imports of the cluster modules (and so of the kubernetes client) happen inside each runner,
so ``servecert --help`` stays quick.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servecert.harness.cluster import topology

DEFAULT_NAME = "servecert"


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def add_up_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=DEFAULT_NAME, help=f"cluster name (default {DEFAULT_NAME})")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--topology", type=Path, help="topology YAML (zones, racksPerZone, hostsPerRack, gpusPerNode, overrides)")
    group.add_argument("--nodes", type=int, help="N nodes, 8 hosts per rack, 8 racks per zone")
    p.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node with --nodes (default 8)")


def add_name_argument(p: argparse.ArgumentParser, allow_all: bool = False) -> None:
    p.add_argument("--name", default=DEFAULT_NAME, help=f"cluster name (default {DEFAULT_NAME})")
    if allow_all:
        p.add_argument("--all", action="store_true", help="every recorded cluster")


def spec_from_args(args: argparse.Namespace) -> topology.TopologySpec:
    from servecert.harness.cluster import topology

    if args.topology:
        return topology.load_spec(args.topology)
    if args.nodes:
        return topology.flat_spec(args.nodes, gpus_per_node=args.gpus)
    return topology.TopologySpec()


def run_up(args: argparse.Namespace) -> int:
    from servecert.harness.cluster import binaries, embedded, state, topology

    try:
        spec = spec_from_args(args)
        cluster = embedded.up(args.name, spec, progress=_progress)
    except (topology.TopologySpecError, binaries.BinaryBuildError, embedded.ClusterUpError, state.ClusterStateError) as exc:
        print(f"servecert cluster up: error: {exc}", file=sys.stderr)
        return 1
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from servecert.harness.cluster import embedded, state

    names = [s.name for s in state.all_states()] if getattr(args, "all", False) else [args.name]
    if not names:
        print("no clusters recorded")
        return 0
    code = 0
    for name in names:
        try:
            report = embedded.status(name)
        except state.ClusterStateError as exc:
            print(f"servecert cluster status: {exc}", file=sys.stderr)
            return 1
        print("\n".join(report.lines()))
        code = code or (0 if report.healthy else 3)
    return code


def run_down(args: argparse.Namespace) -> int:
    from servecert.harness.cluster import embedded, state

    names = [s.name for s in state.all_states()] if args.all else [args.name]
    code = 0
    for name in names:
        try:
            stopped = embedded.down(name, keep_logs=args.keep_logs)
        except (state.ClusterStateError, embedded.ClusterUpError) as exc:
            print(f"servecert cluster down: {exc}", file=sys.stderr)
            code = 1
            continue
        print(f"cluster {name}: stopped {', '.join(stopped) if stopped else 'nothing (no process was running)'}")
    return code


def run_build(_args: argparse.Namespace) -> int:
    from servecert.harness.cluster import binaries

    try:
        result = binaries.ensure(progress=_progress)
    except binaries.BinaryBuildError as exc:
        print(f"servecert cluster build: error: {exc}", file=sys.stderr)
        return 1
    print(result.bin_dir)
    return 0


def add_commands(cluster: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = cluster.add_parser("up", help="start an embedded cluster (control plane, Volcano, kwok nodes, pod runner)")
    add_up_arguments(up)
    up.set_defaults(run=run_up)
    status = cluster.add_parser("status", help="show a cluster's processes, server and Ready nodes")
    add_name_argument(status, allow_all=True)
    status.set_defaults(run=run_status)
    down = cluster.add_parser("down", help="end every process of a cluster and remove its directory")
    add_name_argument(down, allow_all=True)
    down.add_argument("--keep-logs", action="store_true", help="keep <dir>/logs")
    down.set_defaults(run=run_down)
    build = cluster.add_parser("build", help="build (or find cached) the Go binaries, with progress")
    build.set_defaults(run=run_build)
