"""The embedded cluster's kube-proxy: listeners from Services, endpoints from the pods they select, connections forwarded."""

from __future__ import annotations

import asyncio
from typing import Any

from servecert.fakes.service_proxy import ServiceProxy, Table


def service(name: str, ip: str, port: int, target: int | str = "http", namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "selector": {"app": name}, "ports": [{"name": "web", "port": port, "targetPort": target}]},
    }


def pod(name: str, app: str, ip: str, port: int, ready: bool = True, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"app": app}}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "ports": [{"name": "http", "containerPort": port}]}]},
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_listeners_skip_headless_services_and_follow_deletions() -> None:
    table = Table()
    table.apply("Service:SYNC", [service("a", "127.64.128.7", 80), service("h", "None", 80)])
    assert table.listeners() == {("127.64.128.7", 80): ("ns", "a", "web")}
    table.apply("Service:DELETED", service("a", "127.64.128.7", 80))
    assert table.listeners() == {}


def test_endpoints_are_the_selected_ready_pods_and_terminating_ones_only_when_none_is_ready() -> None:
    table = Table()
    table.apply("Service:SYNC", [service("a", "127.64.128.7", 80), service("n", "127.64.128.8", 80, target=9000)])
    table.apply("Pod:SYNC", [pod("a-1", "a", "127.64.0.2", 8000), pod("a-2", "a", "127.64.0.3", 8000, terminating=True)])
    table.apply("Pod:ADDED", pod("b-1", "b", "127.64.0.9", 8000))
    table.apply("Pod:ADDED", pod("n-1", "n", "127.64.0.5", 8000))
    assert table.endpoints(("ns", "a", "web")) == [("127.64.0.2", 8000)]
    assert table.endpoints(("ns", "n", "web")) == [("127.64.0.5", 9000)], "a numeric targetPort"
    table.apply("Pod:DELETED", pod("a-1", "a", "127.64.0.2", 8000))
    assert table.endpoints(("ns", "a", "web")) == [("127.64.0.3", 8000)], "terminating and Ready: only when none else"
    table.apply("Pod:MODIFIED", pod("a-2", "a", "127.64.0.3", 8000, ready=False, terminating=True))
    table.apply("Pod:ADDED", pod("a-3", "a", "127.64.0.4", 8000, ready=False))
    assert table.endpoints(("ns", "a", "web")) == []
    assert table.endpoints(("ns", "a", "metrics")) == []


async def test_a_connection_to_the_cluster_ip_reaches_a_ready_endpoint() -> None:
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"from 127.0.0.1: " + await reader.readline())
        await writer.drain()
        writer.close()

    backend = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = backend.sockets[0].getsockname()[1]
    table = Table()
    table.apply("Service:SYNC", [service("a", "127.0.0.77", port)])
    table.apply("Pod:SYNC", [pod("a-1", "a", "127.0.0.1", port)])
    proxy = ServiceProxy(table)
    try:
        await proxy.reconcile()
        reader, writer = await asyncio.open_connection("127.0.0.77", port)
        writer.write(b"hello\n")
        assert await asyncio.wait_for(reader.read(), 5) == b"from 127.0.0.1: hello\n"
        writer.close()
        table.apply("Pod:SYNC", [pod("a-1", "a", "127.0.0.1", port, ready=False)])
        reader, writer = await asyncio.open_connection("127.0.0.77", port)
        assert await asyncio.wait_for(reader.read(), 5) == b"", "no endpoint: the connection is closed at once"
        writer.close()
    finally:
        proxy.close()
        backend.close()
