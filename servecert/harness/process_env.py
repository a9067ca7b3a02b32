"""The process environment: fake engines on loopback addresses inside the suite's own process.

Router and planner profiles run here in seconds. Each engine gets its own 127.x address (the way
each pod gets its own IP) and an ephemeral port. Stopped engines are kept in ``engines`` so their
ground-truth logs can still be read after a test removed them; an engine a test asked to
``linger`` keeps serving after its removal, so work sent to a worker that left shows in its log.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from pathlib import Path

from servecert.adapters.contract import Deployment, DeploymentSpec, Implementation, WorkerRef
from servecert.fakes.engine import Engine, EngineConfig
from servecert.fakes.host import EngineHost
from servecert.harness.cluster import binaries
from servecert.harness.environment import Cleanup, DeployBounds


class ProcessEnvironment:
    name = "process"

    def __init__(self) -> None:
        self._host = EngineHost()
        self.engines: list[Engine] = []
        self._live: dict[str, Engine] = {}
        self._lingering: set[str] = set()
        # A second octet per process keeps parallel test workers apart in the logs.
        base = 20 + (os.getpid() + random.randrange(1 << 16)) % 200
        self._addresses = (f"127.{base}.{i // 250}.{1 + i % 250}" for i in itertools.count())

    async def start_engine(self, config: EngineConfig) -> WorkerRef:
        engine = await self._host.add(config, next(self._addresses), 0)
        self.engines.append(engine)
        self._live[engine.engine_id] = engine
        return WorkerRef(
            name=config.engine_id or engine.engine_id,
            engine_id=engine.engine_id,
            url=engine.url,
            role=config.role,
            domains=engine.domains,
        )

    def tool(self, name: str) -> Path:
        return binaries.built_tool(name)

    async def stop_engine(self, ref: WorkerRef, drain_s: float = 0.0) -> None:
        """Stop an engine; with ``drain_s``, first serve its work in flight (as a terminating pod does), at most that long.

        Draining waits until the engine has had nothing in flight — requests, or a prefilled KV
        handle whose pull is still due — for ``servecert.fakes.host.DRAIN_QUIET_S``: the caller withdraws it
        from discovery first, and a request that chose it just before still arrives in that time.
        """
        engine = self._live.get(ref.engine_id)
        if engine is None or engine.engine_id in self._lingering:
            return
        if drain_s > 0:
            await self._host.drain(drain_s, engine=engine)
        self._live.pop(ref.engine_id, None)
        await self._host.remove(engine)

    def linger(self, ref: WorkerRef) -> None:
        """Keep ``ref``'s engine serving after a deployment stops it, until the environment closes.

        A worker that left the deployment (withdrawn from discovery) but still runs: any work a
        router still sends it is served and lands in its ground truth, instead of a refused
        connection that looks like any other error.
        """
        self._lingering.add(ref.engine_id)

    def deploy_bound(self, bounds: DeployBounds) -> tuple[float, str]:
        return bounds.deploy_ready_s, "deploy_ready_s"

    async def deploy(
        self, spec: DeploymentSpec, implementation: Implementation, bounds: DeployBounds, add_cleanup: Callable[[Cleanup], None]
    ) -> Deployment:
        """The implementation's adapter deploys ``spec`` beside engines it starts here."""
        deployment = await implementation.deploy(spec, self)  # NB: an adapter closes what it started when this fails
        add_cleanup(deployment.close)
        return deployment

    def engine(self, engine_id: str) -> Engine:
        for engine in self.engines:
            if engine.engine_id == engine_id:
                return engine
        raise KeyError(f"no engine {engine_id} was started in this environment")

    async def close(self) -> None:
        self._live.clear()
        await self._host.close()
