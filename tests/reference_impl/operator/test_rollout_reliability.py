"""Rollouts survive failures: the operator killed mid-rollout, an engine killed mid-stream.

Both drive the suite's own ROLLOUT-ISOLATION scenario (``conformance.tests.rollout_isolation._checks``: the
DGD of 1 frontend, 2 prefill, 2 decode, streaming traffic through its proxy, the fakes' ground
truth) against a reference operator this test installs, so it can kill it by pid:

* the operator is SIGKILLed once the first new worker is Ready, stays dead for ``DEAD_S`` (the
  rollout must hold: nobody changes anything), and is started again: it must pick the rollout up
  from the cluster (its pods and status) and finish it with every rollout rule held — zero failed
  requests, no namespace mixing, capacity kept; only the traffic split may lag by the outage and
  the restart (``RESTART_S``), since nothing moves the weights while no operator runs;
* an old decode engine's process is SIGKILLed with streams in flight: every request the client
  sent either succeeded or ended in an error (status or SSE error event) — never a stream that
  just stops — and the rollout still ends with the new version alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.suite.timeouts import Timeouts
from conformance.tests.rollout_isolation import _checks as rc
from conformance.tests.rollout_isolation import _scenarios as scenarios
from conformance.tests.rollout_isolation import _verdict as verdict
from conformance.utils import kube as kc
from fixtures.cluster.backends import Cluster
from fixtures.cluster_env import ClusterEnvironment, ClusterSession
from fixtures.reference import operator_install
from protocol import waiting

pytestmark = pytest.mark.cluster
DEAD_S = 4.0
RESTART_S = 10.0
"""Allowance for the restarted operator to start, list the cluster and set the proxy's weights again."""


@pytest.fixture
def installed(cluster: Cluster) -> Iterator[tuple[ClusterEnvironment, operator_install.InstalledOperator, list[str]]]:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    api = cluster.api()
    operator, argv = operator_install.install(api)
    session = ClusterSession(cluster, api, operator)
    env = ClusterEnvironment(session)
    try:
        yield env, operator, argv
    finally:
        asyncio.run(env.close())
        session.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("rollout-in-place")
def test_an_operator_killed_mid_rollout_resumes_and_completes_cleanly(
    installed: tuple[ClusterEnvironment, operator_install.InstalledOperator, list[str]],
) -> None:
    env, operator, argv = installed
    held: list[tuple[list[str], list[str]]] = []

    async def kill_then_restart(env: ClusterEnvironment, changed: dict[str, Any]) -> None:
        os.kill(operator.process.pid, signal.SIGKILL)
        operator.process.wait(timeout=10)
        await asyncio.sleep(1.0)  # NB: a pod the operator created just before may still be coming up
        before = await rc.serving_pods(env)
        await asyncio.sleep(DEAD_S)
        held.append(verdict.pods_changed(before, await rc.serving_pods(env)))
        await asyncio.to_thread(operator.restart, argv)

    # NB: no operator, no weights that follow: the split may lag by the outage (1 s + DEAD_S) and the restart.
    timeouts = Timeouts(weight_follow_s=1.0 + DEAD_S + RESTART_S)
    evidence = asyncio.run(rc.run_in(env, timeouts, scenarios.BLOCK_SIZE, mid_way=kill_then_restart))
    assert held == [([], [])], f"pods created / deleted while no operator ran: {held}"
    verdict.rollout_must_be_clean(evidence)


def _engine_pid(pod_ip: str, proc: Path = Path("/proc")) -> int | None:
    """The fake engine process the pod runner started for this pod IP (the suite's own process tree)."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"engine" in argv and b"serve" in argv and pod_ip.encode() in argv:
            return int(entry.name)
    return None


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("rollout-in-place")
def test_an_engine_killed_mid_stream_ends_its_streams_with_an_error_never_silently(
    installed: tuple[ClusterEnvironment, operator_install.InstalledOperator, list[str]],
) -> None:
    env, _, _ = installed
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
