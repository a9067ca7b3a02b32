"""The pod runner's pure parts and its process supervision, without a cluster."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from servecert.fakes.pod_runner import images, podspec
from servecert.fakes.pod_runner.runner import IpPool, is_runnable
from servecert.fakes.pod_runner.supervisor import ContainerRun
from servecert.protocol import waiting

POD: dict[str, Any] = {
    "metadata": {
        "name": "w-0",
        "namespace": "ns",
        "uid": "u-1",
        "labels": {"grove.io/topology.zone": "z1", "app": "w"},
        "annotations": {"note": 'say "hi"'},
    },
    "spec": {"nodeName": "node-0", "serviceAccountName": "sa", "containers": [{"name": "c", "image": "servecert/fake-engine"}]},
    "status": {"podIP": "127.64.0.2", "hostIP": "10.200.0.1", "podIPs": [{"ip": "127.64.0.2"}]},
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("metadata.name", "w-0"),
        ("metadata.namespace", "ns"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['grove.io/topology.zone']", "z1"),
        ("metadata.labels['missing']", None),
        ("metadata.annotations['note']", 'say "hi"'),
        ("metadata.labels", 'app="w"\ngrove.io/topology.zone="z1"'),
        ("metadata.annotations", 'note="say \\"hi\\""'),
        ("spec.nodeName", "node-0"),
        ("spec.serviceAccountName", "sa"),
        ("status.podIP", "127.64.0.2"),
        ("status.podIPs", "127.64.0.2"),
        ("status.hostIP", "10.200.0.1"),
    ],
)
def test_downward_api_field_paths_resolve_like_kubelet(path: str, value: str | None) -> None:
    assert podspec.field_value(POD, path) == value


def test_an_unsupported_field_path_is_refused_by_name() -> None:
    with pytest.raises(podspec.PodSpecError, match=r"status\.phase"):
        podspec.field_value(POD, "status.phase")


def test_env_resolves_value_from_and_expands_earlier_variables() -> None:
    container = {
        "name": "c",
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "ZONE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.zone']"}}},
            {"name": "GPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.nvidia.com/gpu"}}},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}}},
            {"name": "URL", "value": "http://$(NAME):$(PORT)/$$(NAME)"},
        ],
    }
    data = {("configmap", "cm"): {"A": "1"}, ("secret", "s"): {"k": "v"}}
    env = podspec.container_env(POD, container, lambda kind, _ns, name: data.get((kind, name)))
    assert env == {"CM_A": "1", "NAME": "w-0", "ZONE": "z1", "GPUS": "2", "KEY": "v", "URL": "http://w-0:$(PORT)/$(NAME)"}


def test_a_missing_required_reference_is_refused() -> None:
    container = {"name": "c", "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    with pytest.raises(podspec.PodSpecError, match="secretKeyRef s/k not found"):
        podspec.container_env(POD, container, lambda *_: None)


def test_downward_volumes_and_projected_sources_become_files() -> None:
    plain = {"name": "t", "downwardAPI": {"items": [
        {"path": "zone", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.zone']"}},
        {"path": "rack", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.rack']"}},
        {"path": "sub/labels", "fieldRef": {"fieldPath": "metadata.labels"}},
    ]}}
    assert podspec.downward_files(POD, plain) == {"zone": "z1", "rack": "", "sub/labels": 'app="w"\ngrove.io/topology.zone="z1"'}
    projected = {"name": "p", "projected": {"sources": [{"serviceAccountToken": {}}, {"downwardAPI": {"items": [
        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
    ]}}]}}
    assert podspec.is_downward(projected) and podspec.downward_files(POD, projected) == {"ns": "ns"}
    with pytest.raises(podspec.PodSpecError, match="inside the volume"):
        podspec.downward_files(POD, {"downwardAPI": {"items": [{"path": "../x", "fieldRef": {"fieldPath": "metadata.name"}}]}})


def test_mount_paths_are_mapped_to_host_dirs_and_ports_come_from_the_container() -> None:
    mapping = {"/etc/podinfo/topology": "/h/t", "/etc/podinfo": "/h/p"}
    assert podspec.remap_path("/etc/podinfo/topology", mapping) == "/h/t"
    assert podspec.remap_path("/etc/podinfo/topology/zone", mapping) == "/h/t/zone"
    assert podspec.remap_path("/etc/podinfo/x", mapping) == "/h/p/x"
    assert podspec.remap_path("/etc/other", mapping) == "/etc/other"
    assert podspec.container_port({"ports": [{"containerPort": 9000}]}, 8000, "--port", ["--port", "1"]) == 9000
    assert podspec.container_port({}, 8000, "--port", ["--port", "9100"]) == 9100
    assert podspec.container_port({}, 8000, "--port", ["--port=9200"]) == 9200
    assert podspec.container_port({}, 8000, "--port", []) == 8000


def test_the_fake_engine_command_puts_the_pod_ip_and_port_last() -> None:
    spec = images.lookup("servecert/fake-engine:v1")
    assert spec is not None and images.lookup("busybox") is None
    argv = spec.command(images.Launch(args=["--model", "m", "--host", "0.0.0.0"], host="127.64.0.9", port=8000))
    assert argv[:5] == [sys.executable, "-m", "servecert", "engine", "serve"]
    assert argv[-4:] == ["--host", "127.64.0.9", "--port", "8000"]
    assert images.strip_tag("localhost:5000/servecert/fake-engine") == "localhost:5000/servecert/fake-engine"


def test_a_command_replaces_the_entrypoint_and_must_name_the_images_program() -> None:
    """As a container's ``command`` replaces ENTRYPOINT and ``args`` CMD: what follows the program comes first."""
    spec = images.lookup("servecert/fake-engine:v1")
    assert spec is not None
    assert images.container_args(spec, [], ["--role", "decode"]) == ["--role", "decode"]
    command = ["servecert", "engine", "serve", "--block-size", "32"]
    assert images.container_args(spec, command, ["--role", "decode"]) == ["--block-size", "32", "--role", "decode"]
    with pytest.raises(ValueError, match=r"'python3 -m dynamo.vllm': not found in image servecert/fake-engine"):
        images.container_args(spec, ["python3", "-m", "dynamo.vllm"], [])


def test_only_bound_pods_with_a_known_image_that_have_not_finished_are_run() -> None:
    registry = images.KNOWN_IMAGES
    assert is_runnable(POD, registry)
    assert not is_runnable({**POD, "spec": {**POD["spec"], "nodeName": ""}}, registry)
    assert not is_runnable({**POD, "status": {"phase": "Succeeded"}}, registry)
    assert not is_runnable({**POD, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "busybox"}]}}, registry)


def test_ip_pool_hands_out_distinct_loopback_addresses_and_reuses_freed_ones_last() -> None:
    pool = IpPool("127.64.0.0/16")
    first = [pool.take() for _ in range(300)]
    assert len(set(first)) == 300 and not any(ip.endswith((".0", ".255")) for ip in first)
    pool.release(first[5])
    assert pool.take() not in first, "a freed address is not handed out again while fresh ones remain"
    assert pool.take("127.64.9.9") == "127.64.9.9"


def test_ip_pool_reuses_freed_addresses_oldest_first_once_the_block_is_used_up() -> None:
    pool = IpPool("127.64.0.0/24")  # .2 .. .254: 253 addresses
    taken = [pool.take() for _ in range(253)]
    pool.release(taken[7])
    pool.release(taken[3])
    assert [pool.take(), pool.take()] == [taken[7], taken[3]]
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.take()
    with pytest.raises(ValueError, match=r"127\.0\.0\.0/8"):
        IpPool("10.0.0.0/16")


def _run(tmp_path: Path, code: str, policy: str = "Always") -> ContainerRun:
    return ContainerRun(
        name="c", image="x", argv=[sys.executable, "-c", code], env={}, cwd=tmp_path, health_url=None,
        restart_policy=policy, backoff_base=0.05, backoff_cap=0.1,
    )


def _wait_exit(run: ContainerRun, timeout: float = 10.0) -> int:
    codes: list[int] = []  # NB: a list, so that exit code 0 counts as an answer

    def ended() -> list[int]:
        code = run.exited()
        if code is not None:
            codes.append(code)
        return codes

    return waiting.until(ended, timeout_s=timeout, what="the process to exit", interval_s=0.02)[0]


def test_a_crash_counts_a_restart_with_last_state_and_back_off(tmp_path: Path) -> None:
    run = _run(tmp_path, "raise SystemExit(3)")
    assert run.due()
    run.start()
    assert run.pid_path.is_file()
    code = _wait_exit(run)
    run.record_exit(code, stopping=False)
    status = run.status()
    assert status["restartCount"] == 1 and status["lastState"]["terminated"]["exitCode"] == 3
    assert status["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert not run.pid_path.exists()
    time.sleep(0.06)
    assert run.due()


def test_restart_policy_never_and_a_clean_exit_under_on_failure_end_the_container(tmp_path: Path) -> None:
    for policy, code in (("Never", "raise SystemExit(1)"), ("OnFailure", "pass")):
        run = _run(tmp_path, code, policy)
        run.start()
        run.record_exit(_wait_exit(run), stopping=False)
        assert run.terminated is not None and not run.due() and run.restart_count == 0


def test_terminate_sends_sigterm_and_kills_after_the_grace_period(tmp_path: Path) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('u' + 'p!', flush=True)\ntime.sleep(60)"
    stubborn = _run(tmp_path, code)
    stubborn.start()
    waiting.until(lambda: "up!" in stubborn.log_path.read_text(), timeout_s=10, what="the process to print up!", interval_s=0.02)
    stubborn.terminate(0.3)
    time.sleep(0.1)
    assert stubborn.running, "SIGTERM was ignored, so it must still run inside the grace period"
    time.sleep(0.3)
    stubborn.kill_if_overdue()
    assert _wait_exit(stubborn) == -9
