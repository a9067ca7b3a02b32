"""Joining a shared embedded cluster: who takes it down when the last user leaves (no cluster started here)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from servecert.harness.cluster import pytest_fixture


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    made: list[str] = []
    monkeypatch.setattr(pytest_fixture.state, "clusters_root", lambda: tmp_path)
    monkeypatch.setattr(pytest_fixture.state, "load", lambda name: SimpleNamespace(kubeconfig=str(tmp_path / "kubeconfig")))
    monkeypatch.setattr(pytest_fixture.embedded, "down", lambda name: made.append(f"down {name}"))

    def up(name: str, spec: object, progress: object = None) -> SimpleNamespace:
        made.append(f"up {name}")
        return SimpleNamespace(kubeconfig=str(tmp_path / "kubeconfig"))

    monkeypatch.setattr(pytest_fixture.embedded, "up", up)
    return made


def test_a_cluster_started_by_hand_is_joined_and_left_running(calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytest_fixture, "_healthy", lambda name: True)
    with pytest_fixture._joined("by-hand", pytest_fixture.TEST_TOPOLOGY) as cluster:
        assert cluster.name == "by-hand"
    assert calls == []


def test_a_cluster_a_joiner_started_is_taken_down_by_the_last_one_out(calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytest_fixture, "_healthy", lambda name: False)
    with pytest_fixture._joined("run-1", pytest_fixture.TEST_TOPOLOGY):
        assert calls == ["down run-1", "up run-1"]  # NB: a dead cluster's leftovers are cleared first
    assert calls == ["down run-1", "up run-1", "down run-1"]
