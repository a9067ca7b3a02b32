"""Which worker pods a DGD's new frontends have found, read from their ``/status`` during a rollout.

Data flow::

    the ready frontends of the spec's set (pod name -> IP), only while old workers remain
        -> GET http://<ip>:8000/status, all at once, each within ``TIMEOUT_S``
        -> {frontend pod name: IPs of the workers it has found, accepted or rejected}   (a frontend
           that does not answer is left out: it has found nothing the operator can count on)
        -> dgd_rollout.plan: a new worker counts as ready for the rollout's steps only once every
           ready new frontend has found it

Why: a worker's pod turns Ready when its engine answers the probe, but its frontend finds it by
polling discovery, a moment later. Counting the pod alone let the operator delete the old set's
last decode in that moment, and requests the proxy then sent to the new frontend failed with "no
decode worker". Seed 001 4.3.2.2 has the new frontends publish "the amount of workers they have";
the reference reads the same fact from the frontends themselves. Found, not accepted: a worker
a frontend rejects (another model card in its set) is a fault of the rollout the steps cannot
fix by waiting; the suite's in-place operator must still finish its rollout and be failed on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp

TIMEOUT_S = 1.0
"""How long one frontend's ``/status`` may take."""
POLL_S = 0.1
WAIT_S = 1.5
"""How long a reconcile waits for the new frontends to find the spec's Ready workers before it plans without them."""


async def _one(session: aiohttp.ClientSession, ip: str, port: int) -> frozenset[str] | None:
    try:
        async with session.get(f"http://{ip}:{port}/status") as resp:
            if resp.status != 200:
                return None
            body = await resp.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    found = [*(body.get("workers") or []), *(body.get("rejected") or [])]
    hosts = (urlsplit(str(w.get("url") or "")).hostname for w in found if isinstance(w, dict))
    return frozenset(h for h in hosts if h)


async def routed_by(frontends: Mapping[str, str], port: int) -> dict[str, frozenset[str]]:
    """``read`` in a running loop."""
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        names = sorted(frontends)
        found = await asyncio.gather(*(_one(session, frontends[n], port) for n in names))
    return {n: hosts for n, hosts in zip(names, found, strict=True) if hosts is not None}


async def _until_found(frontends: Mapping[str, str], port: int, wanted: frozenset[str], wait_s: float) -> dict[str, frozenset[str]]:
    deadline = time.monotonic() + wait_s
    while True:
        found = await routed_by(frontends, port)
        missing = [n for n in frontends if not wanted <= found.get(n, frozenset())]
        if not missing or time.monotonic() + POLL_S > deadline:
            return found
        await asyncio.sleep(POLL_S)


def read(frontends: Mapping[str, str], port: int, wanted: frozenset[str] = frozenset()) -> dict[str, frozenset[str]]:
    """Frontend pod name -> IPs of the workers it has found (accepted or rejected), for those that answered.

    Asked again every ``POLL_S`` for up to ``WAIT_S`` while a frontend lacks one of ``wanted`` (the spec's Ready
    workers): its discovery is a poll away, and the next reconcile would come only with the 1 s resync.
    """
    return asyncio.run(_until_found(frontends, port, wanted, WAIT_S)) if frontends else {}
