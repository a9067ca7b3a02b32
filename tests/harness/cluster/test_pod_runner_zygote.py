"""The pod runner's zygote forks a pod's program as ``Popen`` would start it: env, cwd, log, session, exit code, title."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servecert.fakes.pod_runner.zygote import ForkedProcess, Zygote

REPO = Path(__file__).resolve().parents[3]
PROBE = "tests.harness.cluster.zygote_probe"


@pytest.fixture
def zygote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Zygote]:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    started = Zygote()
    started.start(tmp_path / "zygote.log")
    yield started
    started.stop()


def spawn(zygote: Zygote, tmp_path: Path, name: str, code: int) -> tuple[ForkedProcess, Path]:
    argv = [sys.executable, "-m", PROBE, str(code)]
    assert zygote.can_run(argv)
    cwd = tmp_path / name
    cwd.mkdir()
    log = cwd / "probe.log"
    return zygote.spawn(argv, {"X": name, "PYTHONPATH": str(REPO)}, cwd, log), log


def test_a_forked_program_gets_its_env_cwd_log_session_title_and_exit_code(zygote: Zygote, tmp_path: Path) -> None:
    proc, log = spawn(zygote, tmp_path, "one", 3)
    assert proc.wait(timeout=20) == 3
    text = log.read_text()
    assert f"cwd={tmp_path / 'one'} x=one argv=['3'] own_session=True" in text, text
    assert f"cmdline={sys.executable} -m {PROBE} 3 " in text, text  # NB: what `servecert cluster down` checks


def test_forks_at_once_are_apart_and_draw_different_random_numbers(zygote: Zygote, tmp_path: Path) -> None:
    runs = [spawn(zygote, tmp_path, f"p{i}", i) for i in range(3)]
    assert len({proc.pid for proc, _ in runs}) == 3
    assert [proc.wait(timeout=20) for proc, _ in runs] == [0, 1, 2]
    draws = {line.partition("random=")[2] for _, log in runs for line in log.read_text().splitlines() if "random=" in line}
    assert len(draws) == 3, draws


def test_a_signal_to_its_group_ends_it_with_minus_the_signal_and_poll_sees_it(zygote: Zygote, tmp_path: Path) -> None:
    proc, _ = spawn(zygote, tmp_path, "sleeper", -1)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=20) == -signal.SIGTERM


def test_a_missing_module_exits_1_with_its_traceback_in_the_log(zygote: Zygote, tmp_path: Path) -> None:
    proc = zygote.spawn([sys.executable, "-m", "no_such_module_here"], {}, tmp_path, tmp_path / "log")
    assert proc.wait(timeout=20) == 1
    assert "No module named no_such_module_here" in (tmp_path / "log").read_text()


def test_only_python_modules_are_forked_and_none_once_it_stopped(zygote: Zygote) -> None:
    assert not zygote.can_run(["/usr/sbin/haproxy", "-f", "x"])
    assert not zygote.can_run([sys.executable, "script.py"])
    zygote.stop()
    assert not zygote.can_run([sys.executable, "-m", PROBE, "0"])
