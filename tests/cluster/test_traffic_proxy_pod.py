"""The pod runner runs the traffic proxy image as a real HAProxy on the pod's own IP, its runtime API beside it."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from reference_impl.traffic_split import haproxy
from reference_impl.traffic_split.runtime_api import RuntimeApi
from tests.cluster import checks

pytestmark = pytest.mark.cluster
ADMIN_PORT = 9999


def test_a_traffic_proxy_pod_is_ready_on_its_ip_with_empty_slots_and_a_runtime_api(api: Any) -> None:
    pod = {
        "metadata": {"name": "proxy"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "haproxy",
                    "image": "servecert/traffic-proxy:2.6",
                    "args": ["--admin-port", str(ADMIN_PORT), "--slots", "2"],
                    "ports": [{"containerPort": 8080}],
                }
            ],
        },
    }
    with checks.namespace(api, "proxy") as ns:
        client.CoreV1Api(api).create_namespaced_pod(ns, pod)
        ready = checks.pod_must_be_ready(api, ns, "proxy")
        ip = ready["status"]["podIP"]
        assert ip.startswith("127.") and ip != "127.0.0.1", ip
        servers = asyncio.run(RuntimeApi(ip, ADMIN_PORT).servers())
        assert sorted(servers) == [haproxy.slot_name(1), haproxy.slot_name(2)]
        assert not any(s.operational and s.weight for s in servers.values()), servers
        with urllib.request.urlopen(f"http://{ip}:8080{haproxy.HEALTH_PATH}", timeout=5) as answer:
            assert answer.status == 200  # NB: HAProxy's own monitor-uri, on the port the pod declares
