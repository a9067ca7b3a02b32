"""Which container images the pod runner brings to life, and the command each one runs.

An ``ImageSpec`` turns a pod's container (its ``command`` and ``args``, its pod IP and port) into
a local command; a ``command`` must name the image's one program (``entrypoint``), as a real
image holds only what it was built with. The fake engine image runs ``python -m servecert engine serve``, the reference
frontend image ``python -m servecert frontend serve`` (ready when ``/health`` answers; with
``DYN_DISCOVERY_BACKEND=kubernetes`` in the pod's env it finds the engines through their
WorkerMetadata objects), the traffic proxy image ``python -m servecert proxy serve`` (HAProxy;
Ready when HAProxy answers ``/proxy/health``), the planner image ``python -m servecert planner serve`` (Ready
when its loop runs, ``/health``): the fakes never import the suite or the reference implementation, but
spawning them as subprocesses is only a command line. The keys of
``KNOWN_IMAGES`` (image names without tag) are also what the cluster fixture excludes from kwok's
pod stages, so for these pods the runner alone decides Ready, IPs and termination.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

FAKE_ENGINE_IMAGE = "servecert/fake-engine"
FRONTEND_IMAGE = "servecert/frontend"
TRAFFIC_PROXY_IMAGE = "servecert/traffic-proxy"
"""Seed 001 4.3.3's weighted proxy: HAProxy (Debian's) with empty frontend slots and its runtime API."""
PLANNER_IMAGE = "servecert/planner"
"""Seed 003's planner as a DGD component: the reference planner with its Kubernetes connector."""


@dataclass(frozen=True)
class Launch:
    """What the runner knows when it starts a container's process."""

    args: Sequence[str]
    host: str
    port: int


@dataclass(frozen=True)
class ImageSpec:
    image: str
    command: Callable[[Launch], list[str]]
    default_port: int = 8000
    health_path: str = "/health"
    mount_env: dict[str, str] = field(default_factory=dict)
    """env var -> in-container path the program reads; set to the host dir when the pod mounts there."""
    port_flag: str | None = "--port"
    """Flag in ``args`` that names the listening port (used when the container declares no port)."""
    entrypoint: tuple[str, ...] = ()
    """The image's ENTRYPOINT, the one program it holds: a container ``command`` must start with it."""


def container_args(spec: ImageSpec, command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The arguments the image's program gets: ``command`` past the entrypoint, then ``args`` (a Kubernetes container's
    ``command`` replaces the image's ENTRYPOINT and ``args`` its CMD). Raises ValueError for a program the image lacks."""
    if not command:
        return list(args)
    head = tuple(command[: len(spec.entrypoint)])
    if not spec.entrypoint or head != spec.entrypoint:
        program = " ".join(spec.entrypoint) or "no program a command can name"
        raise ValueError(f"exec {' '.join(command[:3])!r}: not found in image {spec.image} (it runs `{program}` followed by arguments)")
    return [*command[len(spec.entrypoint) :], *args]


def _fake_engine(launch: Launch) -> list[str]:
    # NB: our --host/--port come last, so argparse keeps them over any the pod passed.
    return [sys.executable, "-m", "servecert", "engine", "serve", *launch.args, "--host", launch.host, "--port", str(launch.port)]


def _frontend(launch: Launch) -> list[str]:
    # NB: as for the engine, our --host/--port come last and win.
    return [sys.executable, "-m", "servecert", "frontend", "serve", *launch.args, "--host", launch.host, "--port", str(launch.port)]


def _traffic_proxy(launch: Launch) -> list[str]:
    # NB: `proxy serve` runs HAProxy as its child and turns the pod's SIGTERM into a graceful stop.
    return [sys.executable, "-m", "servecert", "proxy", "serve", *launch.args, "--host", launch.host, "--port", str(launch.port)]


def _planner(launch: Launch) -> list[str]:
    return [sys.executable, "-m", "servecert", "planner", "serve", *launch.args, "--host", launch.host, "--port", str(launch.port)]


KNOWN_IMAGES: dict[str, ImageSpec] = {
    FAKE_ENGINE_IMAGE: ImageSpec(
        image=FAKE_ENGINE_IMAGE,
        command=_fake_engine,
        mount_env={"DYN_TOPOLOGY_MOUNT_PATH": "/etc/podinfo/topology"},
        entrypoint=("servecert", "engine", "serve"),
    ),
    FRONTEND_IMAGE: ImageSpec(
        image=FRONTEND_IMAGE, command=_frontend, health_path="/health", entrypoint=("servecert", "frontend", "serve")
    ),
    TRAFFIC_PROXY_IMAGE: ImageSpec(
        image=TRAFFIC_PROXY_IMAGE, command=_traffic_proxy, health_path="/proxy/health", entrypoint=("servecert", "proxy", "serve")
    ),
    PLANNER_IMAGE: ImageSpec(image=PLANNER_IMAGE, command=_planner, entrypoint=("servecert", "planner", "serve")),
}


def strip_tag(image: str) -> str:
    """``repo/name:tag`` or ``repo/name@digest`` -> ``repo/name`` (a registry ``host:port/`` stays)."""
    if "@" in image:
        image = image.split("@", 1)[0]
    head, sep, tail = image.rpartition(":")
    return head if sep and "/" not in tail else image


def lookup(image: str, registry: dict[str, ImageSpec] | None = None) -> ImageSpec | None:
    return (registry if registry is not None else KNOWN_IMAGES).get(strip_tag(image))
