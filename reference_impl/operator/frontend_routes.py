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
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp

TIMEOUT_S = 1.0


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


def read(frontends: Mapping[str, str], port: int) -> dict[str, frozenset[str]]:
    """Frontend pod name -> IPs of the workers it has found (accepted or rejected), for those that answered."""
    return asyncio.run(routed_by(frontends, port)) if frontends else {}
