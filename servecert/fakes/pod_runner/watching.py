"""Objects of one kind, as a stream of events on a queue: list, then watch, reconnect with back-off.

Data flow (the pod runner: pods bound to nodes; the service proxy: Services and pods with an IP)::

    thread: list (e.g. pods with fieldSelector spec.nodeName!=) -> ("SYNC", [object dicts])
            watch from the list's resourceVersion      -> ("ADDED"|"MODIFIED"|"DELETED", pod dict)
            server timeout (WATCH_TIMEOUT_S), a 410 Gone or any error -> list again after a back-off
    the runner's loop reads the queue with a short timeout, so it also ticks its processes

Why a thread and a queue: the kubernetes client's watch blocks; the runner's loop must also
notice crashed processes and health answers every tenth of a second. Every watch has a server
timeout and a client read timeout, and the back-off is capped, so the thread never hangs and
never spins. Events carry the raw JSON (camelCase) that the pure podspec functions read.
With ``tag``, each event's kind is prefixed (``Service:SYNC``) so one queue can take several kinds.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.protocol import kube_raw

WATCH_TIMEOUT_S = 30
"""Server-side timeout of one watch call; then the watch is simply re-opened."""
READ_TIMEOUT_S = 45.0
"""Client read timeout, above the server timeout, so a dead connection is noticed."""
BACKOFF_S = (0.2, 5.0)

Event = tuple[str, Any]
log = logging.getLogger("pod_runner.watching")
ListCall = Callable[..., Any]


class ListWatcher:
    """List then watch ``list_call`` (a ``list_*_for_all_namespaces`` of the client) with ``selectors``, on a thread."""

    def __init__(
        self,
        list_call: ListCall,
        events: queue.Queue[Event],
        stop: threading.Event,
        selectors: dict[str, str] | None = None,
        tag: str = "",
    ) -> None:
        self._list_call = list_call
        self._selectors = selectors or {}
        self._events = events
        self._stop = stop
        self._prefix = f"{tag}:" if tag else ""
        self.thread = threading.Thread(target=self._run, name=f"{tag or 'pod'}-watcher", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _list(self) -> str:
        response = self._list_call(**self._selectors, _preload_content=False, _request_timeout=READ_TIMEOUT_S)
        data = json.loads(response.data)
        self._events.put((f"{self._prefix}SYNC", data.get("items") or []))
        return str(data["metadata"]["resourceVersion"])

    def _watch(self, resource_version: str) -> str:
        stream = kube_raw.RawWatch()  # NB: the events' raw JSON only; no client model of each object
        try:
            for event in stream.stream(
                self._list_call,
                **self._selectors,
                resource_version=resource_version,
                timeout_seconds=WATCH_TIMEOUT_S,
                allow_watch_bookmarks=True,
                _request_timeout=READ_TIMEOUT_S,
            ):
                if self._stop.is_set():
                    break
                kind, raw = event["type"], event["raw_object"]
                resource_version = str((raw.get("metadata") or {}).get("resourceVersion") or resource_version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._events.put((f"{self._prefix}{kind}", raw))
                elif kind == "ERROR":
                    raise ApiException(status=int(raw.get("code", 500)), reason=str(raw.get("message", "watch error")))
        finally:
            stream.stop()
        return resource_version

    def _run(self) -> None:
        delay = BACKOFF_S[0]
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._list()
                resource_version = self._watch(resource_version)
                delay = BACKOFF_S[0]
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("%s watch failed (%s %s); listing again in %.1fs", self.thread.name, exc.status, exc.reason, delay)
                resource_version = None
            except Exception as exc:  # any transport error: back off and list again
                log.warning("%s watch failed (%s); listing again in %.1fs", self.thread.name, exc, delay)
                resource_version = None
            if resource_version is None and self._stop.wait(delay):
                break
            if resource_version is None:
                delay = min(BACKOFF_S[1], delay * 2)


class PodWatcher(ListWatcher):
    """Pods bound to nodes, every namespace (the pod runner's)."""

    def __init__(self, api: Any, events: queue.Queue[Event], stop: threading.Event) -> None:
        super().__init__(client.CoreV1Api(api).list_pod_for_all_namespaces, events, stop, {"field_selector": "spec.nodeName!="})
