"""The pod runner runs the traffic proxy image as a real HAProxy on the pod's own IP, its runtime API beside it.

It is Ready only once a slot is weighted: a replica its controller has not configured would answer
its Service's connections with HAProxy's own 503. Once Ready, its Service's ClusterIP (a loopback
address, served by the embedded cluster's kube-proxy, ``servecert.fakes.service_proxy``) reaches it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from servecert.reference_impl.traffic_split import haproxy
from servecert.reference_impl.traffic_split.runtime_api import RuntimeApi
from tests.harness.cluster import checks

pytestmark = pytest.mark.cluster
ADMIN_PORT = 9999


def test_a_traffic_proxy_pod_runs_on_its_ip_and_is_ready_once_a_slot_is_weighted(api: Any) -> None:
    pod = {
        "metadata": {"name": "proxy", "labels": {"app": "proxy"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "haproxy",
                    "image": "servecert/traffic-proxy:2.6",
                    "args": ["--admin-port", str(ADMIN_PORT), "--slots", "2"],
                    "ports": [{"name": "http", "containerPort": 8080}],
                }
            ],
        },
    }
    with checks.namespace(api, "proxy") as ns:
        client.CoreV1Api(api).create_namespaced_pod(ns, pod)
        ip = checks.pod_must_have_ip(api, ns, "proxy")
        assert ip.startswith("127.") and ip != "127.0.0.1", ip
        runtime = RuntimeApi(ip, ADMIN_PORT)
        servers = checks.eventually(lambda: _servers(runtime), "the proxy's runtime API to answer", 30.0)
        assert sorted(servers) == [haproxy.slot_name(1), haproxy.slot_name(2)]
        assert not any(s.operational and s.weight for s in servers.values()), servers
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{ip}:8080{haproxy.HEALTH_PATH}", timeout=5)
        assert refused.value.code == 503, "no slot weighted: not healthy"
        asyncio.run(runtime.assign(haproxy.slot_name(1), "127.0.0.1", 1, 10))
        checks.pod_must_be_ready(api, ns, "proxy")
        with urllib.request.urlopen(f"http://{ip}:8080{haproxy.HEALTH_PATH}", timeout=5) as answer:
            assert answer.status == 200  # NB: HAProxy's own monitor-uri, on the port the pod declares
        service = {"metadata": {"name": "front"}, "spec": {"selector": {"app": "proxy"}, "ports": [{"port": 80, "targetPort": "http"}]}}
        cluster_ip = client.CoreV1Api(api).create_namespaced_service(ns, service).spec.cluster_ip
        assert ipaddress.ip_address(cluster_ip).is_loopback, cluster_ip
        assert checks.eventually(lambda: _health(f"http://{cluster_ip}:80"), "the Service's ClusterIP to reach the proxy", 30.0) == 200


def _servers(runtime: RuntimeApi) -> dict[str, Any] | None:
    try:
        return dict(asyncio.run(runtime.servers()))
    except OSError:
        return None


def _health(base: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{base}{haproxy.HEALTH_PATH}", timeout=2) as answer:
            return int(answer.status)
    except OSError:
        return None
