"""Fast tests of servecert.harness.cluster.binaries that never run the real Go toolchain.

A fake `go` (a small Python script) stands in for the toolchain so that the whole
ensure() flow (lock, manifest, temp names, version check, CRD copy, warm path)
runs in well under a second per test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from servecert.harness.cluster import binaries as b
from servecert.protocol import waiting

ALL_VERSIONS = " ".join(c.expect for c in b.COMPONENTS)

FAKE_GO = textwrap.dedent(
    """\
    #!{python} -S
    import json, os, sys
    args = sys.argv[1:]
    state = os.environ["FAKE_GO_STATE"]
    with open(os.path.join(state, "calls.log"), "a") as f:
        call = {{"args": args, "cwd": os.getcwd(), "GOWORK": os.environ.get("GOWORK")}}
        f.write(json.dumps(call) + "\\n")
    if args[:2] == ["env", "GOVERSION"]:
        print(os.environ.get("FAKE_GO_VERSION", "go1.26.8"))
        sys.exit(0)
    if args[:3] == ["mod", "download", "-json"]:
        d = os.path.join(state, "modcache", args[3].replace("/", "_"))
        os.makedirs(os.path.join(d, "config/crd/volcano/bases"), exist_ok=True)
        os.makedirs(os.path.join(d, "pkg/apis/scheduling/v1beta1"), exist_ok=True)
        for name in ("a.yaml", "b.yaml"):
            with open(os.path.join(d, "config/crd/volcano/bases", name), "w") as f:
                f.write("kind: CustomResourceDefinition\\n")
        print(json.dumps({{"Path": args[3], "Dir": d}}))
        sys.exit(0)
    if os.environ.get("FAKE_GO_SLEEP") and os.environ["FAKE_GO_SLEEP"] in " ".join(args):
        with open(os.path.join(state, "sleeping.pid"), "w") as f:
            f.write(str(os.getpid()))
        import time
        time.sleep(float(os.environ.get("FAKE_GO_SLEEP_S", "30")))
    if os.environ.get("FAKE_GO_FAIL") and os.environ["FAKE_GO_FAIL"] in " ".join(args):
        print("compile error: something broke")
        sys.exit(2)
    if args[0] == "build":
        out = args[args.index("-o") + 1]
    elif args[0] == "install":
        pkg = args[-1].split("@")[0]
        out = os.path.join(os.environ["GOBIN"], pkg.rsplit("/", 1)[-1])
    else:
        sys.exit("fake go: unexpected " + " ".join(args))
    with open(out, "w") as f:
        f.write("#!/bin/sh\\necho '{versions}'\\n")
    os.chmod(out, 0o755)
    """
)


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake go on $SERVECERT_GO and a private cache root."""
    state = tmp_path / "state"
    state.mkdir()
    go = tmp_path / "fakebin" / "go"
    go.parent.mkdir()
    go.write_text(FAKE_GO.format(python=sys.executable, versions=ALL_VERSIONS))
    go.chmod(0o755)
    monkeypatch.setenv("SERVECERT_GO", str(go))
    monkeypatch.setenv("FAKE_GO_STATE", str(state))
    monkeypatch.setenv("SERVECERT_CACHE", str(tmp_path / "cache"))
    return state


def _calls(state: Path) -> list[dict[str, Any]]:
    log = state / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _builds(state: Path) -> list[dict[str, Any]]:
    return [c for c in _calls(state) if isinstance(c["args"], list) and c["args"][0] in ("build", "install")]


# --- cache root and key ------------------------------------------------------


def test_cache_root_env_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVECERT_CACHE", str(tmp_path / "c"))
    assert b.cache_root() == (tmp_path / "c").resolve()
    monkeypatch.delenv("SERVECERT_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert b.cache_root() == tmp_path / "home" / ".cache" / "servecert"


def test_versions_key_encodes_pins_and_is_stable() -> None:
    key = b.versions_key()
    for pin in (b.K8S_VERSION, b.VOLCANO_VERSION, b.ETCD_VERSION, b.KWOK_VERSION):
        assert pin in key
    assert key == b.versions_key()
    assert "/" not in key


def test_versions_key_changes_with_wrapper_go_mod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    copy = tmp_path / "gomod"
    shutil.copytree(b.GOMOD_DIR, copy)
    monkeypatch.setattr(b, "GOMOD_DIR", copy)
    before = b.versions_key()
    gomod = copy / "etcd" / "go.mod"
    gomod.write_text(gomod.read_text().replace(b.ETCD_VERSION, "v3.6.99"))
    assert b.versions_key() != before


def test_wrappers_pin_the_declared_versions() -> None:
    k8s = (b.GOMOD_DIR / "k8s" / "go.mod").read_text()
    assert f"k8s.io/kubernetes {b.K8S_VERSION}" in k8s
    assert f"volcano.sh/volcano {b.VOLCANO_VERSION}" in k8s
    staging = b.K8S_VERSION.replace("v1.", "v0.")
    for mod in (
        "api",
        "apimachinery",
        "apiserver",
        "client-go",
        "kubectl",
        "kube-scheduler",
        "kubelet",
    ):
        assert f"k8s.io/{mod} => k8s.io/{mod} {staging}" in k8s
    assert f"go.etcd.io/etcd/server/v3 {b.ETCD_VERSION}" in (b.GOMOD_DIR / "etcd" / "go.mod").read_text()
    for sub in ("k8s", "etcd"):
        assert (b.GOMOD_DIR / sub / "go.sum").is_file()


# --- go discovery ------------------------------------------------------------


def test_go_missing_error_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVECERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVECERT_GO", str(tmp_path / "no-such-go"))
    with pytest.raises(b.BinaryBuildError) as err:
        b.ensure(progress=lambda _line: None)
    text = str(err.value)
    assert "Go >= 1.26" in text
    assert "--backend existing" in text
    assert "KUBECONFIG" in text
    monkeypatch.delenv("SERVECERT_GO")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(b.BinaryBuildError, match="not found on PATH"):
        b.find_go()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go1.26.8", (1, 26)),
        ("go version go1.25.0 linux/amd64", (1, 25)),
        ("go1.27rc1", (1, 27)),
    ],
)
def test_parse_go_version(text: str, expected: tuple[int, int]) -> None:
    assert b.parse_go_version(text) == expected


def test_parse_go_version_garbage() -> None:
    with pytest.raises(b.BinaryBuildError):
        b.parse_go_version("devel +abc")


def test_old_go_is_refused(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_VERSION", "go1.24.3")
    with pytest.raises(b.BinaryBuildError, match=r"needs Go >= 1\.26"):
        b.ensure(progress=lambda _line: None)
    assert _builds(fake_go) == []


# --- version check -----------------------------------------------------------


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_check_version_ok_and_mismatch(tmp_path: Path) -> None:
    good = _script(tmp_path / "good", "echo 'Kubernetes v1.35.3'")
    assert b.check_version(good, ["--version"], "Kubernetes v1.35.3") == "Kubernetes v1.35.3"
    with pytest.raises(b.BinaryBuildError, match="expected it to contain"):
        b.check_version(good, ["--version"], "Kubernetes v1.36.0")
    failing = _script(tmp_path / "failing", "echo 'Kubernetes v1.35.3'; exit 3")
    with pytest.raises(b.BinaryBuildError, match="exited 3"):
        b.check_version(failing, ["--version"], "Kubernetes v1.35.3")
    hanging = _script(tmp_path / "hanging", "exec sleep 10")
    with pytest.raises(b.BinaryBuildError, match="did not exit"):
        b.check_version(hanging, ["--version"], "x", timeout=0.2)


# --- subprocess handling -----------------------------------------------------


def test_run_logged_heartbeat_failure_and_log(tmp_path: Path) -> None:
    lines: list[str] = []
    log_file = tmp_path / "x.log"
    with log_file.open("w") as log:
        b.run_logged(
            ["sh", "-c", "echo hello; sleep 0.35"],
            cwd=tmp_path,
            env=dict(os.environ),
            log=log,
            log_file=log_file,
            what="comp",
            progress=lines.append,
            heartbeat=0.1,
        )
    assert any("comp: still running" in line for line in lines)
    assert "hello" in log_file.read_text()
    with log_file.open("w") as log, pytest.raises(b.BinaryBuildError) as err:
        b.run_logged(
            ["sh", "-c", "echo boom-line; exit 4"],
            cwd=tmp_path,
            env=dict(os.environ),
            log=log,
            log_file=log_file,
            what="comp",
            progress=lines.append,
        )
    assert str(log_file) in str(err.value)
    assert "boom-line" in str(err.value)
    assert "exit status 4" in str(err.value)


def test_run_logged_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    log_file = tmp_path / "t.log"
    start = time.monotonic()
    with (
        log_file.open("w") as log,
        pytest.raises(b.BinaryBuildError, match="did not finish"),
    ):
        b.run_logged(
            ["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"],
            cwd=tmp_path,
            env=dict(os.environ),
            log=log,
            log_file=log_file,
            what="slow",
            progress=lambda _line: None,
            timeout=0.5,
            heartbeat=0.1,
        )
    assert time.monotonic() - start < 10
    assert _gone(int(pidfile.read_text()))


def _gone(pid: int, within: float = 5.0) -> bool:
    """True once `pid` has exited (a zombie waiting for init counts as exited); else SIGKILL it, False."""

    def exited() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        return state in ("Z", "X")

    try:
        return waiting.until(exited, timeout_s=within, what=f"pid {pid} to exit", interval_s=0.05)
    except waiting.WaitTimeout:
        os.kill(pid, signal.SIGKILL)
        return False


def test_run_logged_interrupt_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    log_file = tmp_path / "i.log"

    def interrupt(_line: str) -> None:
        raise KeyboardInterrupt

    with log_file.open("w") as log, pytest.raises(KeyboardInterrupt):
        b.run_logged(
            ["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"],
            cwd=tmp_path,
            env=dict(os.environ),
            log=log,
            log_file=log_file,
            what="slow",
            progress=interrupt,
            heartbeat=0.3,
        )
    assert _gone(int(pidfile.read_text()))


def test_sigterm_during_build_stops_go_and_cleans_up(fake_go: Path) -> None:
    env = dict(os.environ, FAKE_GO_SLEEP="cmd/kube-apiserver")
    code = "from servecert.harness.cluster import binaries as b; b.ensure(progress=lambda _l: None)"
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env)
    try:
        pidfile = fake_go / "sleeping.pid"
        waiting.until(
            lambda: pidfile.exists() or proc.poll() is not None, timeout_s=20, what="the fake go to reach kube-apiserver", interval_s=0.05
        )
        assert pidfile.exists(), "the fake go never reached kube-apiserver"
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gone(int(pidfile.read_text()))
    directory = b.bin_dir()
    assert (directory / "kwokctl").is_file()
    assert not (directory / "kube-apiserver").exists()
    assert not list(directory.glob(".tmp-*"))
    with b.build_lock(directory.parent / f"{directory.name}.lock", lambda _l: None, timeout=1):
        pass


# --- lock --------------------------------------------------------------------


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        f"time.sleep({seconds})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"locked"
    return proc


def test_lock_waits_for_peer_then_acquires(tmp_path: Path) -> None:
    lock = tmp_path / "bin" / "k.lock"
    lock.parent.mkdir()
    holder = _hold_lock(lock, 0.4)
    lines: list[str] = []
    start = time.monotonic()
    try:
        with b.build_lock(lock, lines.append, timeout=10, heartbeat=0.2):
            waited = time.monotonic() - start
    finally:
        holder.wait(timeout=10)
    assert waited >= 0.2
    assert any("waiting for another build" in line for line in lines)


def test_lock_gives_up_after_timeout(tmp_path: Path) -> None:
    lock = tmp_path / "k.lock"
    holder = _hold_lock(lock, 5)
    try:
        with (
            pytest.raises(b.BinaryBuildError, match="Gave up"),
            b.build_lock(lock, lambda _l: None, timeout=0.3),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()


# --- ensure() with a fake go -------------------------------------------------


def test_ensure_builds_everything_then_warm_path_needs_no_go(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    result = b.ensure(progress=lines.append)
    built = _builds(fake_go)
    assert len(built) == len(b.COMPONENTS)
    for path in (
        result.kube_apiserver,
        result.kubectl,
        result.etcd,
        result.kwok,
        result.kwokctl,
        result.volcano_scheduler,
        result.kube_scheduler,
        result.kube_controller_manager,
    ):
        assert path.is_file()
        assert os.access(path, os.X_OK)
        assert path.parent == b.bin_dir() == result.bin_dir
    assert sorted(p.name for p in result.volcano_crd_dir.iterdir()) == [
        "a.yaml",
        "b.yaml",
    ]
    assert not list(result.bin_dir.glob(".tmp-*"))
    assert (b.cache_root() / "logs" / "kube-apiserver.log").is_file()
    assert any("kube-apiserver: done" in line for line in lines)
    # Volcano goes through the generated go.work; everything else has GOWORK=off.
    gowork = {c["args"][-1]: c["GOWORK"] for c in built if isinstance(c["args"], list)}
    assert str(gowork["volcano.sh/volcano/cmd/scheduler"]).endswith("go.work")
    assert gowork["k8s.io/kubernetes/cmd/kube-apiserver"] == "off"
    work = Path(str(gowork["volcano.sh/volcano/cmd/scheduler"])).read_text()
    assert "replace volcano.sh/apis =>" in work
    apis_copy = Path(json.loads(work.split("=> ", 1)[1].splitlines()[0]))
    assert (apis_copy / "pkg/apis/scheduling/v1beta1/zz_servecert_backport.go").is_file()

    # Warm: no go at all, and fast.
    monkeypatch.setenv("SERVECERT_GO", "/nonexistent/go")
    start = time.monotonic()
    assert b.ensure(progress=lines.append) == result
    assert time.monotonic() - start < 0.2
    assert len(_builds(fake_go)) == len(b.COMPONENTS)


def test_ensure_rebuilds_only_what_is_missing_or_changed(fake_go: Path) -> None:
    result = b.ensure(progress=lambda _line: None)
    result.kubectl.unlink()
    result.etcd.write_text("#!/bin/sh\necho tampered\n")
    b.ensure(progress=lambda _line: None)
    rebuilt = [c["args"][-1] for c in _builds(fake_go)[len(b.COMPONENTS) :]]
    assert rebuilt == [".", "k8s.io/kubernetes/cmd/kubectl"]


def test_failed_component_reports_log_and_keeps_earlier_ones(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "cmd/kube-scheduler")
    with pytest.raises(b.BinaryBuildError) as err:
        b.ensure(progress=lambda _line: None)
    assert "kube-scheduler failed" in str(err.value)
    assert str(b.log_path("kube-scheduler")) in str(err.value)
    assert "compile error: something broke" in str(err.value)
    directory = b.bin_dir()
    assert (directory / "kube-apiserver").is_file()
    assert not (directory / "kube-scheduler").exists()
    assert not list(directory.glob(".tmp-*"))
    monkeypatch.delenv("FAKE_GO_FAIL")
    before = len(_builds(fake_go))
    b.ensure(progress=lambda _line: None)
    rebuilt = [c["args"][-1] for c in _builds(fake_go)[before:]]
    assert rebuilt == [
        "k8s.io/kubernetes/cmd/kube-scheduler",
        "k8s.io/kubernetes/cmd/kubectl",
        "volcano.sh/volcano/cmd/scheduler",
        "volcano.sh/volcano/cmd/controller-manager",
    ]


@pytest.mark.usefixtures("fake_go")
def test_wrong_version_output_is_not_installed() -> None:
    go = Path(os.environ["SERVECERT_GO"])
    go.write_text(go.read_text().replace(ALL_VERSIONS, "v0.0.0-master+$Format:%H$"))
    with pytest.raises(b.BinaryBuildError, match="expected it to contain"):
        b.ensure(progress=lambda _line: None)
    assert not (b.bin_dir() / "etcd").exists()


@pytest.mark.usefixtures("fake_go")
def test_main_print(capsys: pytest.CaptureFixture[str]) -> None:
    assert b.main(["--print", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"kube_apiserver={b.bin_dir() / 'kube-apiserver'}" in out
    assert "volcano_crd_dir=" in out


def test_main_reports_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SERVECERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVECERT_GO", str(tmp_path / "missing-go"))
    assert b.main(["--quiet"]) == 1
    assert "--backend existing" in capsys.readouterr().err
