"""``servecert setup``: the cold build runs before any test, never goes quiet, and fails naming what to read.

A fake ``go`` (tests/harness/cluster/test_binaries.py) stands in for the toolchain, so a "slow" build of
a few seconds shows the heartbeat without ten minutes of compiling.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import pytest

from servecert.harness import prerequisites
from servecert.harness.cluster import binaries
from servecert.protocol import waiting
from tests.harness.cluster.test_binaries import fake_go

__all__ = ["fake_go"]
HEARTBEAT_S = 0.3
SLACK_S = 0.5  # the ticker wakes every HEARTBEAT_S / 4; a loaded machine may be late by this much


class Terminal:
    """What the step printed, with when each line came."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def __call__(self, line: str) -> None:
        self.lines.append((time.monotonic(), line))

    def text(self) -> str:
        return "\n".join(line for _t, line in self.lines)

    def longest_silence(self, since: float) -> float:
        times = [since] + [t for t, _line in self.lines] + [time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(times))


@pytest.fixture
def quick_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prerequisites, "HEARTBEAT_S", HEARTBEAT_S)


@pytest.mark.usefixtures("quick_heartbeat")
def test_a_slow_build_shows_a_line_at_least_every_heartbeat_naming_what_it_builds(
    fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_SLEEP", "cmd/kube-apiserver")
    monkeypatch.setenv("FAKE_GO_SLEEP_S", "2.5")
    terminal = Terminal()
    started = time.monotonic()
    prerequisites.ensure("cluster", terminal)
    assert time.monotonic() - started >= 2.5, "the fake build did not sleep: the test shows nothing"
    assert terminal.longest_silence(started) <= HEARTBEAT_S + SLACK_S, terminal.text()
    text = terminal.text()
    assert prerequisites.COLD_ESTIMATE in text, "a cold cache must say how long the build takes"
    assert "still working on: kube-apiserver: building" in text
    assert str(binaries.cache_root() / "logs") in text
    assert binaries.missing() == []


def test_a_failed_build_names_the_component_its_log_and_last_lines(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "sigs.k8s.io/kwok/cmd/kwok@")
    with pytest.raises(prerequisites.PrerequisiteError) as failed:
        prerequisites.ensure("cluster", Terminal())
    message = str(failed.value)
    assert "kwok failed" in message
    assert str(binaries.log_path("kwok")) in message
    assert "compile error: something broke" in message


def test_servecert_setup_exits_1_with_the_reason(
    fake_go: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "cmd/kube-scheduler")
    parser = argparse.ArgumentParser()
    prerequisites.add_arguments(parser)
    assert prerequisites.run(parser.parse_args(["--env", "cluster"])) == 1
    err = capsys.readouterr().err
    assert "servecert setup: error: the cluster binaries could not be built: kube-scheduler failed" in err
    assert str(binaries.log_path("kube-scheduler")) in err


def test_a_warm_cache_builds_nothing_and_says_where_the_binaries_are(fake_go: Path) -> None:
    prerequisites.ensure("cluster", Terminal())
    terminal = Terminal()
    prerequisites.ensure("cluster", terminal)
    assert f"cluster binaries: cached in {binaries.bin_dir()}" in terminal.text()
    assert "building" not in terminal.text()


def test_the_process_environment_needs_nothing_built(fake_go: Path) -> None:
    prerequisites.ensure("process", Terminal())
    assert binaries.missing() != []


def _wait_for(path: Path, bound_s: float = 20.0) -> int:
    text = waiting.until(lambda: path.is_file() and path.read_text().strip(), timeout_s=bound_s, what=f"{path} to appear", interval_s=0.05)
    return int(text)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_background_build_runs_at_idle_priority_and_stop_ends_it_with_its_go(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_SLEEP", "cmd/kube-apiserver")
    pid = prerequisites.start_background("cluster", Terminal())
    assert pid is not None
    try:
        go_pid = _wait_for(fake_go / "sleeping.pid")
        assert os.sched_getscheduler(go_pid) == os.SCHED_IDLE, "go must inherit the idle CPU policy"
    finally:
        prerequisites.stop_background(Terminal())
    assert not _alive(pid) and not _alive(go_pid)
    assert not list(binaries.bin_dir().glob(".tmp-*")), "a stopped build leaves nothing half-written"


def test_nothing_starts_in_the_background_when_the_binaries_are_cached(fake_go: Path) -> None:
    prerequisites.ensure("cluster", Terminal())
    assert prerequisites.start_background("cluster", Terminal()) is None
