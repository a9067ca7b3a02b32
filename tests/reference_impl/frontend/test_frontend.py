"""The reference frontend end to end over HTTP, against fake engines in the process environment."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceDeployment, ReferenceImplementation
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment
from servecert.protocol import tokenizer, waiting
from servecert.reference_impl.frontend import app as frontend_app
from servecert.reference_impl.operator import frontend_routes
from tests.conftest import serve_process

MODEL = "m"


@pytest.fixture
async def env() -> AsyncIterator[ProcessEnvironment]:
    environment = ProcessEnvironment()
    yield environment
    await environment.close()


async def deploy(env: ProcessEnvironment, *workers: WorkerSpec, router: RouterSpec | None = None) -> ReferenceDeployment:
    return await ReferenceImplementation().deploy(DeploymentSpec(model=MODEL, router=router or RouterSpec(), workers=workers), env)


async def test_a_worker_with_another_model_card_is_rejected_and_never_routed_to(
    env: ProcessEnvironment, http: aiohttp.ClientSession
) -> None:
    dep = await deploy(env, WorkerSpec("agg", block_size=16))
    try:
        odd = await dep.add_worker(WorkerSpec("agg", block_size=32))
        async with http.get(dep.frontend_url + "/status") as resp:
            status = await resp.json()
        assert [r["engine_id"] for r in status["rejected"]] == [odd.engine_id]
        # NB: what the operator's rollout reads: the workers a frontend has found, accepted or not
        assert ([w["url"] for w in status["workers"]], [r["url"] for r in status["rejected"]]) == ([dep.workers[0].url], [odd.url])
        host, port = urlsplit(dep.frontend_url).hostname, urlsplit(dep.frontend_url).port
        assert host and port
        routed = await frontend_routes.routed_by({"fe": host, "gone": "127.0.0.254"}, port)
        found = frozenset({urlsplit(dep.workers[0].url).hostname, urlsplit(odd.url).hostname})
        assert routed == {"fe": found}, "a frontend that does not answer is left out"
        outcomes = await traffic.many(http, dep.frontend_url, MODEL, 16, concurrency=4)
        assert all(o.ok for o in outcomes)
        truth = GroundTruth(http)
        await truth.refresh(dep.workers)
        assert {r["engine_id"] for r in truth.records} == {dep.workers[0].engine_id}
        assert {r["mdc_checksum"] for r in truth.records} == {r["engine_mdc_checksum"] for r in truth.records}
    finally:
        await dep.close()


async def test_fallbacks_are_counted_in_a_metric(env: ProcessEnvironment, http: aiohttp.ClientSession) -> None:
    dep = await deploy(
        env, WorkerSpec("prefill", domains={"zone": "a"}), WorkerSpec("decode", domains={"zone": "b"}),
        router=RouterSpec(topology_level="zone", mismatch_policy="fallback"),
    )
    try:
        outcomes = await traffic.many(http, dep.frontend_url, MODEL, 5, concurrency=1)
        assert all(o.ok for o in outcomes)
        async with http.get(dep.frontend_url + "/metrics") as resp:
            text = await resp.text()
        assert 'servecert_frontend_topology_fallbacks_total{level="zone"} 5.0' in text
    finally:
        await dep.close()


async def test_an_engine_cut_mid_stream_reaches_the_client_as_an_error_event(
    env: ProcessEnvironment, http: aiohttp.ClientSession
) -> None:
    dep = await deploy(env, WorkerSpec("agg"))
    try:
        async with http.post(dep.workers[0].url + "/admin/faults", json={"kill_stream_after": 3}) as resp:
            assert resp.status == 200
        out = await traffic.complete(http, dep.frontend_url, MODEL, traffic.unique_prompt(), max_tokens=10)
        assert out.tokens == 3
        assert out.error is not None and out.error["code"] == "upstream_cut"
    finally:
        await dep.close()


async def test_client_mistakes_get_openai_errors(env: ProcessEnvironment, http: aiohttp.ClientSession) -> None:
    dep = await deploy(env, WorkerSpec("agg"))
    try:
        cases = [({"model": "nope", "prompt": "hi"}, 404), ({"prompt": "hi"}, 400), ({"model": 3, "prompt": "hi"}, 422),
                 ({"model": MODEL, "prompt": "hi", "max_tokens": -1}, 400)]
        for body, status in cases:
            async with http.post(dep.frontend_url + "/v1/completions", json=body) as resp:
                assert resp.status == status, body
                assert {"message", "type", "code"} <= set((await resp.json())["error"])
        json_type = {"Content-Type": "application/json"}
        async with http.post(dep.frontend_url + "/v1/completions", data=b"{nope", headers=json_type) as resp:
            assert resp.status == 400
        async with http.post(dep.frontend_url + "/v1/completions", data=b"{nope") as resp:  # NB: application/octet-stream
            assert resp.status == 415
            assert (await resp.json())["error"]["code"] == "unsupported_media_type"
    finally:
        await dep.close()


async def test_chat_streams_and_answers_through_the_frontend(env: ProcessEnvironment, http: aiohttp.ClientSession) -> None:
    dep = await deploy(env, WorkerSpec("prefill"), WorkerSpec("decode"))
    try:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, "ignore_eos": True}
        async with http.post(dep.frontend_url + "/v1/chat/completions", json=body) as resp:
            answer = await resp.json()
        assert answer["usage"]["completion_tokens"] == 4
        assert answer["choices"][0]["message"]["content"]
        async with http.post(dep.frontend_url + "/v1/chat/completions", json={**body, "stream": True}) as resp:
            lines = [line async for line in resp.content if line.startswith(b"data:")]
        assert lines[-1].strip() == b"data: [DONE]"
        deltas = [json.loads(line[5:])["choices"][0]["delta"] for line in lines[:-1]]
        assert sum(1 for d in deltas if d.get("content")) == 4
    finally:
        await dep.close()


async def test_a_repeated_prompt_goes_to_the_worker_holding_its_prefix(env: ProcessEnvironment, http: aiohttp.ClientSession) -> None:
    dep = await deploy(env, WorkerSpec("agg"), WorkerSpec("agg"))
    try:
        prompt = traffic.unique_prompt(words=200)
        assert (await traffic.complete(http, dep.frontend_url, MODEL, prompt)).ok
        hashes = tokenizer.block_hashes(tokenizer.encode(prompt), 16)
        async for _ in waiting.holding_async(2.0, 0.02):  # bounded, best-effort wait for the KV events to reach the router
            if dep.frontend.index.overlaps(hashes):
                break
        assert (await traffic.complete(http, dep.frontend_url, MODEL, prompt)).ok
        truth = GroundTruth(http)
        await truth.refresh(dep.workers)
        first, second = truth.by_prompt(prompt)
        assert first["engine_id"] == second["engine_id"]
        assert second["cached_tokens"] > 0
    finally:
        await dep.close()


@contextmanager
def frontend_process(discovery: Path) -> Iterator[str]:
    """``servecert frontend serve`` over ``discovery``: its URL once it is ready; stopped (by pid) afterwards."""
    cmd = [sys.executable, "-m", "servecert", "frontend", "serve", "--port", "0", "--discovery-dir", str(discovery)]
    frontend = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert frontend.stdout is not None
        url = frontend.stdout.readline().split("url=", 1)[1].strip()
        assert frontend.stdout.readline().startswith("ready")
        yield url
    finally:
        frontend.terminate()
        frontend.wait(timeout=10)
        assert frontend.stdout is not None
        frontend.stdout.close()


async def _first_served(url: str, body: dict[str, object]) -> dict[str, object]:
    """The first answer the frontend serves to ``body`` (non-streamed); discovery polls every 0.2 s."""
    async with aiohttp.ClientSession() as session:

        async def served() -> dict[str, object] | None:
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            async with session.post(url + path, json=body) as resp:
                return dict(await resp.json()) if resp.status == 200 else None

        found = await waiting.until_async(served, timeout_s=10.0, what="an answer through the frontend", interval_s=0.1)
        assert found is not None
        return found


def test_the_frontend_process_finds_engines_by_file_discovery(tmp_path: Path) -> None:
    folder = tmp_path / "workers"
    engine = serve_process("--model", MODEL, "--port", "0", "--time-scale", "0", "--discovery-dir", str(folder))
    with engine, frontend_process(folder) as url:
        answer = asyncio.run(_first_served(url, {"model": MODEL, "prompt": traffic.unique_prompt(), "max_tokens": 4}))
        assert answer["object"] == "text_completion"
    assert not list(folder.glob("*.json")), "engines unpublish themselves when they stop"


def test_the_frontend_tokenizes_as_its_engines_model_card_says(tmp_path: Path) -> None:
    """Disaggregated engines serving ``servecert-bytes-v1``: the frontend counts, routes and answers in bytes."""
    folder, text = tmp_path / "workers", "Thou art more lovely and more temperate: ünïcödé"
    common = ("--model", MODEL, "--port", "0", "--time-scale", "0", "--discovery-dir", str(folder), "--tokenizer", tokenizer.BYTES_NAME)
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 12, "ignore_eos": True}
    prefill, decode = serve_process(*common, "--role", "prefill"), serve_process(*common, "--role", "decode", "--host", "127.0.0.2")
    with prefill, decode, frontend_process(folder) as url:
        answer = asyncio.run(_first_served(url, body))
    usage = answer["usage"]
    assert isinstance(usage, dict) and usage["prompt_tokens"] == len(text.encode()) + 2  # the user and assistant markers
    [choice] = answer["choices"]  # type: ignore[misc]
    assert len(choice["message"]["content"]) == usage["completion_tokens"] == 12


def test_a_bad_router_variable_stops_the_frontend_with_a_message(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "servecert", "frontend", "serve", "--port", "0", "--discovery-dir", str(tmp_path)]
    env = {"DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY": "sometimes", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env, check=False)
    assert done.returncode == 2
    assert "DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY" in done.stderr


@pytest.mark.parametrize(
    ("status", "text", "expected_status", "code"),
    [
        (500, "500 Internal Server Error\n\nServer got itself in trouble", 502, "upstream_error"),
        (503, '{"error": {"message": "draining", "code": "engine_draining"}}', 503, "engine_draining"),
        (500, "[1, 2]", 502, "upstream_error"),
    ],
)
def test_an_engine_error_reaches_the_client_as_a_json_error_whatever_its_body(
    status: int, text: str, expected_status: int, code: str
) -> None:
    err = frontend_app.upstream_error("e-1", status, text)
    assert err.status == expected_status
    assert err.body["error"]["code"] == code
    if code == "upstream_error":
        assert "e-1" in err.body["error"]["message"]
