"""Rollouts survive failures: an engine killed mid-stream.

It drives the suite's own ROLLOUT-ISOLATION scenario (``servecert.conformance.tests.rollout_isolation._checks``: the
DGD of 1 frontend, 2 prefill, 2 decode, streaming traffic through its proxy, the fakes' ground
truth) against a reference operator this test installs: an old decode engine's process is
SIGKILLed with streams in flight; every request the client sent either succeeded or ended in an
error (status or SSE error event) — never a stream that just stops — and the rollout still ends
with the new version alone. (The operator killed mid-rollout is a conformance test now:
``servecert/conformance/tests/rollout_isolation/controller_restart.py``.)
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servecert.adapters.reference import operator_install
from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster.backends import Cluster
from servecert.harness.cluster_env import ClusterEnvironment, ClusterSession
from servecert.protocol import waiting

pytestmark = pytest.mark.cluster


@pytest.fixture
def installed(cluster: Cluster) -> Iterator[tuple[ClusterEnvironment, operator_install.InstalledOperator]]:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    api = cluster.api()
    operator = operator_install.install(api)
    session = ClusterSession(cluster, api, operator)
    env = ClusterEnvironment(session)
    try:
        yield env, operator
    finally:
        asyncio.run(env.close())
        session.close()


def _engine_pid(pod_ip: str, proc: Path = Path("/proc")) -> int | None:
    """The fake engine process the pod runner started for this pod IP (the suite's own process tree)."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # NB: a program the runner's zygote forked has its command line as one title, words split by spaces
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").split()
        except OSError:
            continue
        if b"engine" in argv and b"serve" in argv and pod_ip.encode() in argv:
            return int(entry.name)
    return None


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("rollout-in-place")
def test_an_engine_killed_mid_stream_ends_its_streams_with_an_error_never_silently(
    installed: tuple[ClusterEnvironment, operator_install.InstalledOperator],
) -> None:
    env, _ = installed
    killed: list[str] = []

    async def kill_an_old_decode(env: ClusterEnvironment, changed: dict[str, Any]) -> None:
        old = [
            p for p in await kc.pods(env) if scenarios.ctype(p) == "decode" and not scenarios.BLOCK_SIZE.is_new(p) and verdict.serving(p)
        ]
        assert old, "no old decode worker left to kill"
        pid = _engine_pid(old[0]["status"]["podIP"])
        assert pid is not None, f"no engine process found for {old[0]['metadata']['name']}"
        os.kill(pid, signal.SIGKILL)
        killed.append(old[0]["metadata"]["name"])
        async for _ in waiting.holding_async(10, 0.1):  # NB: at most 10 s for the pid to go; the scenario goes on either way
            if _engine_pid(old[0]["status"]["podIP"]) != pid:
                break

    evidence = asyncio.run(rc.run_in(env, Timeouts(), scenarios.BLOCK_SIZE, mid_way=kill_an_old_decode))
    assert killed
    silent = [s for s in evidence.sent if not s.outcome.done and s.outcome.error is None]
    assert not silent, f"{len(silent)} streams stopped without an error: first {silent[0].outcome}"
    errors = [s for s in evidence.sent if not s.ok]
    cut = [s for s in errors if s.outcome.tokens > 0]
    print(f"{verdict.summary(evidence)}\nkilled {killed}; {len(errors)} requests ended in an error ({len(cut)} after tokens)")
    assert all(s.outcome.error for s in errors)
