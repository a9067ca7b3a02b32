"""The pod runner points every fake-engine container at a ground-truth file that outlives the pod, and keeps a deleted pod's logs.

Unit level, no cluster: ``PodRunner.container_run`` builds a container's command and env from
the pod object (the API client is never called).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from servecert.fakes.pod_runner.images import FAKE_ENGINE_IMAGE, FRONTEND_IMAGE
from servecert.fakes.pod_runner.runner import ENV_GROUNDTRUTH_FILE, PodRunner, PodWork, groundtruth_dir, pod_logs_dir


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[PodRunner]:
    pods = PodRunner(SimpleNamespace(), tmp_path / "cluster" / "pods", "127.98.0.0/16")
    yield pods
    pods.shutdown()


def _work(tmp_path: Path, name: str = "w-0") -> PodWork:
    pod: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": "0123456789abcdef"}, "spec": {"nodeName": "node-0"}}
    return PodWork(uid="0123456789abcdef", namespace="ns", name=name, pod=pod, ip="127.98.0.2", host_ip="10.0.0.1", directory=tmp_path)


def test_the_groundtruth_folder_sits_beside_the_pods_folder(tmp_path: Path) -> None:
    assert groundtruth_dir(tmp_path / "state" / "pods") == tmp_path / "state" / "groundtruth"


def test_a_fake_engine_container_gets_a_file_named_after_its_pod(runner: PodRunner, tmp_path: Path) -> None:
    run = runner.container_run(_work(tmp_path), {"name": "engine", "image": f"{FAKE_ENGINE_IMAGE}:v1"})
    expected = (groundtruth_dir(runner.pods_dir) / "ns_w-0_01234567.jsonl").resolve()
    assert run.env[ENV_GROUNDTRUTH_FILE] == str(expected)
    assert not Path(run.env[ENV_GROUNDTRUTH_FILE]).is_relative_to(runner.pods_dir.resolve())


def test_a_pods_own_value_wins_and_other_images_get_none(runner: PodRunner, tmp_path: Path) -> None:
    own = {"name": "engine", "image": FAKE_ENGINE_IMAGE, "env": [{"name": ENV_GROUNDTRUTH_FILE, "value": "/mine.jsonl"}]}
    assert runner.container_run(_work(tmp_path), own).env[ENV_GROUNDTRUTH_FILE] == "/mine.jsonl"
    front = runner.container_run(_work(tmp_path), {"name": "frontend", "image": FRONTEND_IMAGE})
    assert ENV_GROUNDTRUTH_FILE not in front.env


def test_a_forgotten_pods_container_logs_are_kept_and_its_folder_goes(runner: PodRunner, tmp_path: Path) -> None:
    folder = runner.pods_dir / "ns_w-0_01234567"
    folder.mkdir(parents=True)
    (folder / "main.log").write_text("Traceback: boom\n")
    (folder / "config.json").write_text("{}")
    runner.forget(_work(folder))
    assert not folder.exists()
    kept = pod_logs_dir(runner.pods_dir) / "ns_w-0_01234567"
    assert [f.name for f in kept.iterdir()] == ["main.log"]
    assert (kept / "main.log").read_text() == "Traceback: boom\n"
