"""The Virtual connector's decision store in etcd, as Dynamo 1.6.1's planner keeps it: the suite's side of it.

Dynamo's ``VirtualConnectorCoordinator`` (Rust, ``lib/bindings/python/rust/planner.rs``) writes
``num_prefill_workers``, ``num_decode_workers`` and then ``decision_id`` under
``v1/{namespace}/planner/`` in etcd, each value a decimal ASCII string, in three separate puts on
its lease; the system that owns the workers writes ``scaled_decision_id`` once it has scaled.
Seen on this machine: a 1.6.1 planner's first decision left ``decision_id = 0``,
``num_prefill_workers = 1`` and ``num_decode_workers = 1`` there (docs/research/dynamo-planner.md).

Data flow: the suite's ``ScalingHarness`` polls ``get_decision`` (one range read of the prefix, so
the three keys come from one revision) and acts when ``decision_id`` changes: the counts are put
before it, so a new id is never read with old counts. ``put_scaled_decision_id`` acknowledges.
``put_decision`` writes the way the coordinator does, counts first, for tests and for a planner
that speaks the protocol through Python.

Why etcd's JSON gateway (``POST /v3/kv/range`` and ``/v3/kv/put``, keys and values in base64)
over aiohttp: it needs no etcd client package, and the suite already speaks HTTP everywhere.
"""

from __future__ import annotations

import base64
from typing import Any

import aiohttp

from servecert.adapters.contract import ScalingDecision, planner_decisions

REQUEST_TIMEOUT_S = 5.0


class EtcdError(RuntimeError):
    """etcd did not answer as its v3 JSON gateway should; the message names the request and the endpoint."""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    """etcd's range end for "every key under ``prefix``": the prefix with its last byte incremented."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class EtcdDecisionStore:
    """``servecert.adapters.contract.DecisionStore`` over an etcd at ``endpoint`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, endpoint: str, namespace: str, session: aiohttp.ClientSession) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.prefix = planner_decisions.PREFIX.format(namespace=namespace)
        self.session = session

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoint}{path}"
        try:
            async with self.session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as resp:
                if resp.status != 200:
                    raise EtcdError(f"POST {url}: HTTP {resp.status}: {(await resp.text())[:200]}; is etcd serving its v3 gateway there?")
                answer: dict[str, Any] = await resp.json(content_type=None)
                return answer
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EtcdError(f"POST {url}: {type(exc).__name__}: {exc}; is etcd running at {self.endpoint}?") from exc

    async def _put(self, key: str, value: int) -> None:
        await self._post("/v3/kv/put", {"key": _b64(self.prefix + key), "value": _b64(str(value))})

    async def keys(self) -> dict[str, int]:
        """Every key under the prefix (name after it -> value), read at one revision."""
        answer = await self._post("/v3/kv/range", {"key": _b64(self.prefix), "range_end": _b64(_prefix_end(self.prefix))})
        found: dict[str, int] = {}
        for kv in answer.get("kvs") or []:
            name = base64.b64decode(kv["key"]).decode().removeprefix(self.prefix)
            text = base64.b64decode(kv.get("value") or "").decode()
            try:
                found[name] = int(text)
            except ValueError:
                raise EtcdError(f"etcd key {self.prefix}{name} holds {text!r}, not the decimal string Dynamo writes") from None
        return found

    async def put_decision(self, decision: ScalingDecision) -> None:
        # NB: as Dynamo's coordinator: each given count, then decision_id, in separate puts (a reader keys on the id).
        if decision.num_prefill_workers is not None:
            await self._put(planner_decisions.NUM_PREFILL, decision.num_prefill_workers)
        if decision.num_decode_workers is not None:
            await self._put(planner_decisions.NUM_DECODE, decision.num_decode_workers)
        await self._put(planner_decisions.DECISION_ID, decision.decision_id)

    async def get_decision(self) -> ScalingDecision | None:
        keys = await self.keys()
        unset = planner_decisions.UNSET

        def count(key: str) -> int | None:
            value = keys.get(key, unset)
            return None if value == unset else value

        decision_id = keys.get(planner_decisions.DECISION_ID, unset)
        if decision_id == unset:
            return None
        return ScalingDecision(count(planner_decisions.NUM_PREFILL), count(planner_decisions.NUM_DECODE), decision_id)

    async def put_scaled_decision_id(self, decision_id: int) -> None:
        await self._put(planner_decisions.SCALED_DECISION_ID, decision_id)

    async def get_scaled_decision_id(self) -> int:
        return (await self.keys()).get(planner_decisions.SCALED_DECISION_ID, planner_decisions.UNSET)
