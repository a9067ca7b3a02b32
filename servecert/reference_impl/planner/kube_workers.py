"""The planner's workers on a cluster: the WorkerMetadata objects of its Dynamo namespace.

Data flow::

    every ``interval`` s (0.3): servecert.reference_impl.worker_metadata.live_items(<POD_NAMESPACE>, <DYN_NAMESPACE>)
        (one call, <= call_timeout; the objects without a deletionTimestamp)
      -> Worker(engine_id, url, role) of each
      -> workers(): the last listing that worked (a failed one is logged once and the view kept)

Why these objects: an engine publishes its own once its model is loaded and withdraws it on a
clean stop, and its pod owns it, so the listing is "registered = ready", the same meaning the
planner's ``WorkerSource`` has in the process environment. The planner cannot share the
frontend's discovery (the reference's parts are independent); both list through
``servecert.reference_impl.worker_metadata``, and the planner needs only the three fields.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as TransportError

from servecert.protocol import event_loop, kube_names
from servecert.reference_impl import worker_metadata
from servecert.reference_impl.planner.planner import Worker

log = logging.getLogger("servecert.planner.workers")
POLL_INTERVAL_S = 0.3
CALL_TIMEOUT_S = 2.0


class KubeWorkers:
    """``WorkerSource`` over WorkerMetadata objects; ``start`` lists once before the planner's first tick."""

    def __init__(self, api: Any, namespace: str, dynamo_namespace: str, interval: float = POLL_INTERVAL_S) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.dynamo_namespace = dynamo_namespace
        self.interval = interval
        self._workers: list[Worker] = []
        self._problem: str | None = None
        self._task: asyncio.Task[None] | None = None

    def workers(self) -> list[Worker]:
        return list(self._workers)

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.get_running_loop().create_task(self._poll(), name="planner-workers")

    async def stop(self) -> None:
        await event_loop.cancel(self._task)
        self._task = None

    async def _poll(self) -> None:
        while True:  # ends with stop(); every refresh bounds its own time
            await asyncio.sleep(self.interval)
            await self.refresh()

    async def refresh(self) -> None:
        try:
            items = await asyncio.wait_for(
                asyncio.to_thread(worker_metadata.live_items, self.objects, self.namespace, self.dynamo_namespace, CALL_TIMEOUT_S),
                CALL_TIMEOUT_S + 1.0,
            )
        except (ApiException, TransportError, OSError, TimeoutError, ValueError) as exc:
            self._report(worker_metadata.explain(exc, self.namespace, CALL_TIMEOUT_S, "planner"))
            return
        self._report(None)
        self._workers = [w for w in (_worker(item) for item in items) if w]

    def _report(self, problem: str | None) -> None:
        if problem != self._problem:
            if problem is None:
                log.info("listing workers works again; %d worker(s)", len(self._workers))
            else:
                log.warning("%s (keeping the %d known worker(s), retrying)", problem, len(self._workers))
        self._problem = problem


def _worker(item: Mapping[str, Any]) -> Worker | None:
    meta = (item.get("spec") or {}).get("metadata") or {}
    try:
        return Worker(str(meta["engine_id"]), str(meta["url"]), str(meta["role"]))
    except KeyError as exc:
        log.warning("%s %s has no %s in spec.metadata; skipped", kube_names.WM_KIND, item["metadata"]["name"], exc)
        return None
