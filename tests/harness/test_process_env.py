"""The process environment: an engine asked to linger keeps serving after a deployment stops it."""

from __future__ import annotations

import aiohttp

from servecert.fakes.engine import EngineConfig
from servecert.harness.process_env import ProcessEnvironment


async def _health(session: aiohttp.ClientSession, url: str) -> int | None:
    try:
        async with session.get(f"{url}/health") as resp:
            return resp.status
    except aiohttp.ClientConnectionError:
        return None


async def test_a_lingering_engine_serves_after_it_was_stopped_until_the_environment_closes() -> None:
    env = ProcessEnvironment()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        try:
            kept = await env.start_engine(EngineConfig(role="decode"))
            stopped = await env.start_engine(EngineConfig(role="decode"))
            env.linger(kept)
            await env.stop_engine(kept, drain_s=1.0)
            await env.stop_engine(stopped)
            assert await _health(session, kept.url) == 200
            assert await _health(session, stopped.url) is None
        finally:
            await env.close()
        assert await _health(session, kept.url) is None
