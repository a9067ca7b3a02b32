"""The embedded cluster's kube-proxy: each Service's ClusterIP:port forwards a connection to one of its ready endpoints.

Data flow::

    ListWatcher threads: Services, pods with an IP (every namespace)  -> one queue
    the asyncio loop drains the queue every POLL_S -> Table -> listeners reconciled:
        one server per (ClusterIP, port) of each Service that has a ClusterIP (headless ones have none)
    a connection to ClusterIP:port -> an endpoint at random among the Service's ready ones: the pods
        its selector picks that are Ready and not terminating (Ready terminating ones only when none
        is, as kube-proxy does), at the Service port's targetPort (a number, or a container port's name)
        -> bytes copied both ways until either side closes

Why: the embedded cluster runs no kube-proxy, and seed 001 4.3.3 puts the rollout proxy "with a
Service in front. Internal and external clients connect to this Service". It reads pods, not
EndpointSlices: the API server refuses loopback addresses in an EndpointSlice, and the pod runner's
pod IPs are loopback ones, so the endpoints are computed here as the EndpointSlice controller
would compute them (``Table.endpoints``). The ClusterIPs are
loopback addresses (``ClusterState.service_cidr``), so no traffic leaves the host and binding them
needs no interface change. Like kube-proxy, it balances connections, not requests, and an
established connection stays with its endpoint when that endpoint leaves the Service (as
conntrack keeps it); a connection with no endpoint to go to is closed at once (kube-proxy rejects
it). The ready file is written once both kinds were listed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import queue
import random
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servecert.fakes.pod_runner.watching import Event, ListWatcher

POLL_S = 0.05
"""How often the loop takes the watches' events: the delay between an endpoint leaving and new connections avoiding it."""
CONNECT_TIMEOUT_S = 3.0
CHUNK = 65536
SERVICE, POD = "Service", "Pod"

Key = tuple[str, str]
"""(namespace, name)"""
Listen = tuple[str, int]
"""(ClusterIP, port)"""
Target = tuple[str, str, str]
"""(namespace, Service, port name)"""

log = logging.getLogger("service_proxy")


@dataclass
class Table:
    """The Services and pods as the watches last told them."""

    services: dict[Key, dict[str, Any]] = field(default_factory=dict)
    pods: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def apply(self, kind: str, obj: Any) -> None:
        """One watch event (``Service:ADDED``, ``Pod:SYNC`` with the list, ...)."""
        tag, _, change = kind.partition(":")
        store = self.services if tag == SERVICE else self.pods
        if change == "SYNC":
            store.clear()
            for item in obj:
                store[_key(item)] = item
        elif change == "DELETED":
            store.pop(_key(obj), None)
        else:
            store[_key(obj)] = obj

    def listeners(self) -> dict[Listen, Target]:
        """(ClusterIP, port) -> the Service port it stands for, for every Service with a ClusterIP."""
        out: dict[Listen, Target] = {}
        for (namespace, name), service in self.services.items():
            spec = service.get("spec") or {}
            ip = spec.get("clusterIP") or ""
            if ip in ("", "None"):
                continue
            for port in spec.get("ports") or []:
                if (port.get("protocol") or "TCP") == "TCP":
                    out[(ip, int(port["port"]))] = (namespace, name, port.get("name") or "")
        return out

    def endpoints(self, target: Target) -> list[tuple[str, int]]:
        """Where a new connection for ``target`` may go: its Service's ready endpoints, else the Ready terminating ones."""
        namespace, name, port_name = target
        spec = (self.services.get((namespace, name)) or {}).get("spec") or {}
        selector = spec.get("selector") or {}
        port = next((p for p in spec.get("ports") or [] if (p.get("name") or "") == port_name), None)
        if not selector or port is None:
            return []  # NB: a Service without a selector has endpoints someone else writes; none here
        ready: list[tuple[str, int]] = []
        leaving: list[tuple[str, int]] = []
        for (pod_namespace, _), pod in sorted(self.pods.items()):
            labels = pod["metadata"].get("labels") or {}
            if pod_namespace != namespace or any(labels.get(k) != v for k, v in selector.items()):
                continue
            ip, target_port = (pod.get("status") or {}).get("podIP"), _target_port(pod, port)
            if not ip or target_port is None or not _ready(pod):
                continue
            (leaving if pod["metadata"].get("deletionTimestamp") else ready).append((str(ip), target_port))
        return ready or leaving


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _target_port(pod: Mapping[str, Any], port: Mapping[str, Any]) -> int | None:
    """The Service port's targetPort on this pod: a number, or the name of one of its containers' ports."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return None


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then pass the half-close on."""
    while chunk := await source.read(CHUNK):
        sink.write(chunk)
        await sink.drain()
    if sink.can_write_eof():
        sink.write_eof()


class ServiceProxy:
    def __init__(self, table: Table) -> None:
        self.table = table
        self.servers: dict[Listen, asyncio.Server] = {}
        self.targets: dict[Listen, Target] = {}
        self.refused: set[Listen] = set()
        """Addresses that could not be bound: said once, not tried on every event."""

    async def reconcile(self) -> None:
        """Bind a listener for each Service port that gained a ClusterIP; close those of Services that are gone."""
        wanted = self.table.listeners()
        for listen in [k for k in self.servers if k not in wanted]:
            self.servers.pop(listen).close()
        self.targets = wanted
        for listen in wanted:
            if listen in self.servers or listen in self.refused:
                continue
            try:
                self.servers[listen] = await asyncio.start_server(functools.partial(self._forward, listen), *listen)
            except OSError as exc:
                self.refused.add(listen)
                log.warning("cannot listen on %s:%d for Service %s/%s: %s", *listen, *wanted[listen][:2], exc)

    async def _forward(self, listen: Listen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = self.targets.get(listen)
        choices = self.table.endpoints(target) if target else []
        if not choices:
            writer.close()
            return
        address = random.choice(choices)
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*address), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for side in (writer, up_writer):
                side.close()

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


def _take(events: queue.Queue[Event], table: Table, listed: set[str]) -> bool:
    """Apply every queued event; True when any arrived."""
    changed = False
    while True:
        try:
            kind, obj = events.get_nowait()
        except queue.Empty:
            return changed
        table.apply(kind, obj)
        if kind.endswith(":SYNC"):
            listed.add(kind.partition(":")[0])
        changed = True


async def serve(api: Any, ready_file: Path | None, stop: threading.Event) -> None:
    from kubernetes import client

    events: queue.Queue[Event] = queue.Queue()
    ListWatcher(client.CoreV1Api(api).list_service_for_all_namespaces, events, stop, tag=SERVICE).start()
    pods = client.CoreV1Api(api).list_pod_for_all_namespaces
    ListWatcher(pods, events, stop, {"field_selector": "status.podIP!="}, tag=POD).start()
    table, listed = Table(), set[str]()
    proxy = ServiceProxy(table)
    try:
        while not stop.is_set():
            if _take(events, table, listed):
                await proxy.reconcile()
            if ready_file is not None and listed >= {SERVICE, POD} and not ready_file.exists():
                ready_file.write_text("ready\n")
            await asyncio.sleep(POLL_S)
    finally:
        proxy.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servecert.fakes.service_proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--ready-file", type=Path, help="written once Services and pods were listed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kubernetes import config

    api = config.new_client_from_config(config_file=args.kubeconfig)
    stop = threading.Event()
    loop = asyncio.new_event_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.closing(loop):
        loop.run_until_complete(serve(api, args.ready_file, stop))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
