"""Reconciles of one object never overlap and act on the object as fetched under the lock; other objects run alongside."""

from __future__ import annotations

import threading
import time
from typing import Any

from servecert.reference_impl.operator.one_at_a_time import OneAtATime


def test_two_reconciles_of_one_object_never_overlap_and_each_sees_the_latest() -> None:
    serial = OneAtATime()
    spec = {"version": "old"}
    inside, most_inside, seen = [0], [0], []
    gate = threading.Lock()

    def reconcile(obj: dict[str, Any]) -> None:
        with gate:
            inside[0] += 1
            most_inside[0] = max(most_inside[0], inside[0])
        seen.append(obj["version"])
        spec["version"] = "new"  # NB: the first reconcile's world changes; the second must see it
        time.sleep(0.2)
        with gate:
            inside[0] -= 1

    threads = [threading.Thread(target=serial.run, args=("dgd", lambda: dict(spec), reconcile)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert most_inside[0] == 1
    assert seen == ["old", "new"]


def test_different_objects_reconcile_at_the_same_time() -> None:
    serial = OneAtATime()
    both_inside = threading.Barrier(2, timeout=5)
    met: list[bool] = []

    def reconcile(_: dict[str, Any]) -> None:
        both_inside.wait()  # NB: raises BrokenBarrierError after 5 s if the other never got in
        met.append(True)

    threads = [threading.Thread(target=serial.run, args=(key, lambda: {}, reconcile)) for key in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert met == [True, True]


def test_an_object_gone_is_not_reconciled() -> None:
    called: list[dict[str, Any]] = []
    assert OneAtATime().run("dgd", lambda: None, called.append) is False
    assert called == []


def test_a_burst_of_triggers_reconciles_at_most_twice_and_the_last_sees_every_change() -> None:
    """``run_soon``: while one reconcile runs, twenty triggers leave one waiting call, which fetches after all of them."""
    serial = OneAtATime()
    world = {"version": 0}
    seen: list[int] = []
    started = threading.Event()
    release = threading.Event()

    def reconcile(obj: dict[str, Any]) -> None:
        seen.append(obj["version"])
        started.set()
        release.wait(5)

    first = threading.Thread(target=serial.run_soon, args=("dgd", lambda: dict(world), reconcile))
    first.start()
    assert started.wait(5)
    results: list[bool] = []
    burst = []
    for v in range(1, 21):
        world["version"] = v
        t = threading.Thread(target=lambda: results.append(serial.run_soon("dgd", lambda: dict(world), reconcile)))
        t.start()
        burst.append(t)
        time.sleep(0.005)
    time.sleep(0.1)
    release.set()
    for t in [first, *burst]:
        t.join(timeout=5)
    assert seen == [0, 20], seen
    assert sorted(results) == [False] * 19 + [True]
