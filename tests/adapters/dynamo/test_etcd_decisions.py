"""``EtcdDecisionStore`` against a real etcd (the cluster's build), in Dynamo's wire format.

The etcd is the suite's own build (``servecert.harness.cluster.binaries``), started here on loopback with a
data directory of its own, and ended by pid.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from servecert.adapters.contract import free_port
from servecert.adapters.dynamo.etcd_decisions import EtcdDecisionStore, EtcdError
from servecert.harness.cluster import binaries
from servecert.protocol.planner_decisions import UNSET, ScalingDecision

pytestmark = pytest.mark.cluster  # NB: the marker that makes the session build the cluster binaries before any test
START_S = 20.0


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("etcd")
    client, peer = free_port(), free_port()
    argv = [
        str(binaries.ensure().etcd),
        f"--data-dir={directory / 'data'}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=default=http://127.0.0.1:{peer}",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]
    with (directory / "etcd.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{client}"
    try:
        _wait_healthy(endpoint, process, directory / "etcd.log")
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_healthy(endpoint: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"etcd exited with {process.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{endpoint}/health", timeout=1) as resp:
                if b'"health":"true"' in resp.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"etcd not healthy at {endpoint} within {START_S:g}s; see {log}")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def _gateway(endpoint: str, path: str, body: dict[str, str]) -> dict[str, object]:
    request = urllib.request.Request(f"{endpoint}{path}", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=5) as resp:
        answer: dict[str, object] = json.load(resp)
    return answer


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _raw(endpoint: str, key: str) -> str | None:
    """One key's value as etcd holds it, read without the store."""
    kvs = _gateway(endpoint, "/v3/kv/range", {"key": _b64(key)}).get("kvs") or []
    assert isinstance(kvs, list)
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


async def test_no_decision_before_the_planner_writes_one(etcd: str, session: aiohttp.ClientSession) -> None:
    store = EtcdDecisionStore(etcd, "empty-ns", session)
    assert await store.get_decision() is None
    assert await store.get_scaled_decision_id() == UNSET


async def test_a_decision_round_trips_in_dynamos_wire_format(etcd: str, session: aiohttp.ClientSession) -> None:
    store = EtcdDecisionStore(etcd, "servecert", session)
    await store.put_decision(ScalingDecision(3, 5, 7))
    assert await store.get_decision() == ScalingDecision(3, 5, 7)
    # NB: decimal ASCII strings under v1/{namespace}/planner/, as a 1.6.1 planner left them (docs/research/dynamo-planner.md)
    assert [_raw(etcd, f"v1/servecert/planner/{k}") for k in ("num_prefill_workers", "num_decode_workers", "decision_id")] == [
        "3",
        "5",
        "7",
    ]
    await store.put_scaled_decision_id(7)
    assert _raw(etcd, "v1/servecert/planner/scaled_decision_id") == "7"
    assert await store.get_scaled_decision_id() == 7


async def test_a_decision_naming_one_component_keeps_the_others_last_count(etcd: str, session: aiohttp.ClientSession) -> None:
    store = EtcdDecisionStore(etcd, "agg-ns", session)
    await store.put_decision(ScalingDecision(None, 2, 0))
    assert await store.get_decision() == ScalingDecision(None, 2, 0)
    await store.put_decision(ScalingDecision(None, 4, 1))
    assert await store.get_decision() == ScalingDecision(None, 4, 1)


async def test_each_namespace_reads_its_own_keys(etcd: str, session: aiohttp.ClientSession) -> None:
    await EtcdDecisionStore(etcd, "ns-a", session).put_decision(ScalingDecision(1, 1, 0))
    await EtcdDecisionStore(etcd, "ns-ab", session).put_decision(ScalingDecision(2, 2, 4))
    assert await EtcdDecisionStore(etcd, "ns-a", session).get_decision() == ScalingDecision(1, 1, 0)
    assert await EtcdDecisionStore(etcd, "ns-ab", session).get_decision() == ScalingDecision(2, 2, 4)
    assert await EtcdDecisionStore(etcd, "ns", session).get_decision() is None


async def test_a_value_that_is_not_a_number_is_named(etcd: str, session: aiohttp.ClientSession) -> None:
    _gateway(etcd, "/v3/kv/put", {"key": _b64("v1/garbled/planner/decision_id"), "value": _b64("x")})
    with pytest.raises(EtcdError, match=r"v1/garbled/planner/decision_id holds 'x'"):
        await EtcdDecisionStore(etcd, "garbled", session).get_decision()


async def test_no_etcd_says_where_it_looked(session: aiohttp.ClientSession) -> None:
    store = EtcdDecisionStore(f"http://127.0.0.1:{free_port()}", "servecert", session)
    with pytest.raises(EtcdError, match=r"is etcd running at http://127\.0\.0\.1:"):
        await store.get_decision()
