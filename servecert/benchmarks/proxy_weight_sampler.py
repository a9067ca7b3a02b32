"""The weights a DGD's HAProxy really had over a rollout, read from its runtime API: ``servecert bench rollout``'s trajectory.

Data flow::

    WeightSampler(env, dgd name).run()   (a task beside ROLLOUT-ISOLATION's ``_checks.run_in``)
        waits for a Ready proxy replica of the DGD (the operator gives each the same weights), then every ``period_s``:
        ``show servers state`` on the proxy's runtime API -> {frontend address: weight} of the
        slots in service (not in maintenance, not draining), kept only when it differs from the last
        -> samples: [(wall time, {address: weight})]
    trajectory(samples, timeline)   the same with frontend pod names, as lines since the change
    reaction_times(samples, timeline)  for each weight change, the seconds since the last worker or
                                       frontend Ready/gone change before it: how fast weights follow

Why read the proxy: the operator's Events say what it meant to set, at whole seconds; the proxy
says what it had, to a tenth of a second. This reads the reference's HAProxy (its admin port), so
it is a benchmark figure, never a conformance verdict: another implementation's proxy is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from servecert.conformance.scenarios import ROLLOUT_TARGETS, Timeline, ctype, serving
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import waiting
from servecert.reference_impl.operator.dgd_pods import FRONTEND_PORT, PROXY_ADMIN_PORT, PROXY_LABEL
from servecert.reference_impl.traffic_split.runtime_api import RuntimeApi, RuntimeApiError

Weights = dict[str, int]  # frontend address (ip:port) -> weight, slots in service only


@dataclass
class WeightSampler:
    env: ClusterEnvironment
    dgd: str
    period_s: float = 0.1
    max_s: float = 900.0
    samples: list[tuple[float, Weights]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Sample until ``stop()`` or ``max_s``; a proxy that does not answer one poll is asked again at the next."""
        deadline = waiting.Deadline(self.max_s)
        api = await self._proxy(deadline)
        while api is not None and not self._stop.is_set() and not deadline.expired:
            try:
                servers = await api.servers()
            except (OSError, TimeoutError, RuntimeApiError):
                servers = None
            if servers is not None:
                weights = {f"{s.address}:{s.port}": s.weight for s in servers.values() if s.in_service}
                if not self.samples or self.samples[-1][1] != weights:
                    self.samples.append((time.time(), weights))
            await self._sleep(self.period_s)

    async def _proxy(self, deadline: waiting.Deadline) -> RuntimeApi | None:
        while not self._stop.is_set() and not deadline.expired:
            for pod in await kc.pods(self.env):
                ip = (pod.get("status") or {}).get("podIP")
                if (pod["metadata"].get("labels") or {}).get(PROXY_LABEL) == self.dgd and ip and kc.pod_ready(pod):
                    return RuntimeApi(str(ip), PROXY_ADMIN_PORT)
            await self._sleep(0.2)
        return None

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)


def since(samples: Sequence[tuple[float, Weights]], changed_at: float) -> list[tuple[float, Weights]]:
    """The samples from the last one before ``changed_at`` on: the weights the rollout started from, then its changes."""
    before = [s for s in samples if s[0] <= changed_at]
    return [*before[-1:], *(s for s in samples if s[0] > changed_at)]


def _names(timeline: Timeline) -> dict[str, str]:
    """ip:port -> frontend pod name, for every frontend pod the suite's watch saw."""
    out: dict[str, str] = {}
    for name, pod in timeline.every_pod().items():
        ip = (pod.get("status") or {}).get("podIP")
        if ip and ctype(pod) == "frontend":
            out[f"{ip}:{FRONTEND_PORT}"] = name
    return out


def trajectory(samples: Sequence[tuple[float, Weights]], timeline: Timeline, changed_at: float) -> list[str]:
    """One line per change of the proxy's weights: seconds since the spec change, frontend=weight."""
    names = _names(timeline)
    lines = []
    for t, weights in samples:
        shown = ", ".join(f"{names.get(a, a)}={w}" for a, w in sorted(weights.items(), key=lambda item: names.get(item[0], item[0])))
        lines.append(f"{t - changed_at:+.1f}s {shown or '(no frontend in service)'}")
    return lines


def _pod_changes(timeline: Timeline) -> list[float]:
    """Moments a worker or frontend pod became Ready, stopped being Ready, or went: what weights follow."""
    out: list[float] = []
    before: Mapping[str, bool] = {}
    for t, state in timeline.moments:
        now = {n: serving(p) for n, p in state.items() if ctype(p) in (*ROLLOUT_TARGETS, "frontend")}
        if any(now.get(n, False) != before.get(n, False) for n in set(now) | set(before)):
            out.append(t)
        before = now
    return out


def reaction_times(samples: Sequence[tuple[float, Weights]], timeline: Timeline) -> dict[str, float | int]:
    """Seconds from the last pod change (worker or frontend) to each weight change after the first: median, max, count."""
    changes = _pod_changes(timeline)
    delays = []
    for t, _ in samples[1:]:
        earlier = [c for c in changes if c <= t]
        if earlier:
            delays.append(t - earlier[-1])
    if not delays:
        return {"weight_changes": 0}
    return {"weight_changes": len(delays), "median_s": round(statistics.median(delays), 2), "max_s": round(max(delays), 2)}
