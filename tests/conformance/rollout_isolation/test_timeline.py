"""The pod timeline times each change by the API server's write, not by when a busy watch received it.

A watch on a loaded machine delivers a worker's Ready seconds after the implementation saw it;
judged at receipt, the traffic the worker rightly got in between looks ahead of the ready ratio
(CI67: 6 of 60 requests "where the ready ratio called for 0.00", the watch late by more than the
2 s the weights may follow). These cases pin the bound: receipt, or the write's managedFields
second + 1 when the write changed a managed field, or any later change's bound; never earlier.
"""

from __future__ import annotations

import datetime
from typing import Any

from servecert.conformance.tests.rollout_isolation import _verdict as verdict

T0 = datetime.datetime(2026, 11, 27, 8, 0, 0, tzinfo=datetime.UTC).timestamp()


def stamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(T0 + t, tz=datetime.UTC).isoformat()


def pod(name: str, written: float | None, ready: bool = False, deleted_at: float | None = None, grace: int = 30) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if written is not None:
        meta["managedFields"] = [{"manager": "pod-runner", "operation": "Update", "time": stamp(written)}]
    if deleted_at is not None:  # NB: as the API server sets it: its clock plus the grace period
        meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"] = stamp(deleted_at + grace), grace
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def times(events: list[tuple[float, str, dict[str, Any]]]) -> list[float]:
    return [round(t - T0, 3) for t, _ in verdict.Timeline.of(events, wall_offset=T0).moments]


def test_a_ready_received_late_is_timed_by_its_write_second() -> None:
    events = [(0.2, "ADDED", pod("w", 0.0)), (6.5, "MODIFIED", pod("w", 3.0, ready=True))]
    timeline = verdict.Timeline.of(events, wall_offset=T0)
    assert times(events) == [0.2, 4.0]
    assert round(timeline.lag_s, 3) == 2.5


def test_a_prompt_receipt_is_kept() -> None:
    assert times([(0.2, "ADDED", pod("w", 0.0)), (3.3, "MODIFIED", pod("w", 3.0, ready=True))]) == [0.2, 3.3]


def test_a_deletion_received_late_is_timed_by_its_deletion_timestamp_less_the_grace() -> None:
    """A deletion stamps no managedFields entry; the server set deletionTimestamp to its clock plus the grace period."""
    events = [(0.2, "ADDED", pod("w", 0.0, ready=True)), (9.0, "MODIFIED", pod("w", 0.0, ready=True, deleted_at=5.0))]
    assert times(events) == [0.2, 6.0]


def test_a_change_that_wrote_no_new_second_keeps_its_receipt() -> None:
    """A second write in the second of the one before stamps the same time: the pod cannot say which write it was."""
    events = [(0.2, "ADDED", pod("w", 0.0)), (0.4, "MODIFIED", pod("w", 0.0, ready=True)), (4.0, "MODIFIED", pod("w", 0.0))]
    assert times(events) == [0.2, 0.4, 4.0]


def test_a_change_is_never_timed_after_a_later_one() -> None:
    """Writes arrive in order, so a later change's bound bounds every change before it."""
    events = [
        (1.0, "ADDED", pod("a", 0.0)),
        (1.5, "ADDED", pod("b", 1.0)),
        (7.0, "MODIFIED", pod("a", 0.0)),  # NB: no new second: receipt only
        (7.1, "MODIFIED", pod("b", 2.0, ready=True)),  # written in second 2: before 3.0
    ]
    assert times(events) == [1.0, 1.5, 3.0, 3.0]


def test_a_pod_without_managed_fields_is_timed_at_receipt() -> None:
    assert times([(0.5, "ADDED", pod("w", None)), (8.0, "MODIFIED", pod("w", None, ready=True))]) == [0.5, 8.0]
