"""One reconcile per object at a time, each on the object as the API server has it now.

Data flow: every kopf handler that reconciles a DGD or InferenceService goes through
``OneAtATime.run(key, fetch, reconcile)``: it takes the object's lock, fetches the object afresh
(``fetch``; None when it is gone or replaced), and reconciles that.

Why: kopf runs an object's change handlers one after another, but its timers "run in parallel by
design" (kopf's maintainer, nolar/kopf discussion #1046), and sync handlers run in a thread pool.
Two reconciles of one DGD at once each see the same ready old workers and each remove one, so a
rollout with maxUnavailable 0 lost a ready decode (seen in CI under load, where a reconcile takes
longer than the 1 s resync). And a timer that waited behind a spec update must not act on the
body it was handed before the update: it would step the rollout back towards the previous spec.
``run_soon`` is the same for bursts of triggers (a DGD's pods becoming ready): a call that finds
another already waiting leaves the work to it, since that one fetches only once it gets the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

Fetch = Callable[[], Mapping[str, Any] | None]


class OneAtATime:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._queued: set[Hashable] = set()

    def lock_of(self, key: Hashable) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def run(self, key: Hashable, fetch: Fetch, reconcile: Callable[[dict[str, Any]], None]) -> bool:
        """Reconcile the object as it is now, alone; False when it no longer exists (nothing to do)."""
        with self.lock_of(key):
            current = fetch()
            if current is None:
                return False
            reconcile(dict(current))
            return True

    def run_soon(self, key: Hashable, fetch: Fetch, reconcile: Callable[[dict[str, Any]], None]) -> bool:
        """``run``, unless a call for ``key`` already waits its turn: that one fetches after this moment, so it covers it.

        For triggers that come in bursts (pod events): at most one reconcile per object runs and one
        waits, however many events arrive. Returns False when it left the work to the waiting call.
        """
        with self._guard:
            if key in self._queued:
                return False
            self._queued.add(key)
        lock = self.lock_of(key)
        with lock:
            with self._guard:
                self._queued.discard(key)
            current = fetch()
            if current is None:
                return False
            reconcile(dict(current))
            return True
