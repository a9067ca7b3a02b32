"""Backend selection, and ending processes by pid only when they are still ours (no cluster needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servecert.harness.cluster import backends, processes


def test_k3s_is_unavailable_without_a_docker_engine_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    with pytest.raises(backends.BackendUnavailable, match="not available here: no Docker engine"):
        backends.select("k3s").up()


def test_existing_needs_a_kubeconfig_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(backends.BackendUnavailable, match="does not exist"):
        backends.select("existing").up()
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\n")
    monkeypatch.setenv("KUBECONFIG", str(config))
    cluster = backends.select("existing").up()
    assert cluster.kubeconfig == config and not cluster.has_pod_runner


def test_an_unknown_backend_name_lists_the_choices() -> None:
    with pytest.raises(backends.BackendUnavailable, match="embedded, existing, k3s"):
        backends.select("kind")


def test_stop_ends_a_process_only_if_its_command_line_still_matches(tmp_path: Path) -> None:
    proc = processes.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)", "marker-xyz"], tmp_path)
    try:
        assert processes.alive(proc.pid, "marker-xyz")
        assert not processes.stop(proc.pid, "someone-else", timeout=1)
        assert proc.poll() is None, "a pid whose command line does not match must not be signalled"
        assert processes.stop(proc.pid, "marker-xyz", timeout=5)
        assert not processes.alive(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_component_that_exits_early_fails_fast_quoting_its_log(tmp_path: Path) -> None:
    proc = processes.spawn("broken", [sys.executable, "-c", "print('bad flag --foo'); raise SystemExit(2)"], tmp_path)
    with pytest.raises(processes.ClusterStartError, match=r"(?s)exited with status 2.*bad flag --foo"):
        processes.wait_for(lambda: False, what="broken", log=tmp_path / "broken.log", timeout=30, proc=proc)
    with pytest.raises(processes.ClusterStartError, match=r"slow to be ready: not within 0\.2s; look at .*slow\.log"):
        processes.wait_for(lambda: False, what="slow", log=tmp_path / "slow.log", timeout=0.2)
