"""Build the embedded-cluster binaries from Go modules into a cache outside the repo.

The cluster backend runs a real control plane as local processes: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok/kwokctl
(fake nodes) and the Volcano scheduler (gang and topology-aware scheduling).
None of them is downloaded as a prebuilt release: every one is compiled from
its Go module, because the Go module proxy is the only source this project can
rely on, on a developer's machine and in CI alike.

Data flow::

    servecert/harness/cluster/gomod/        (in the repo: tiny wrapper modules, go.mod + go.sum)
      k8s/   k8s.io/kubernetes v1.35.3 + volcano.sh/volcano v1.15.1, one module graph
      etcd/  main.go calling go.etcd.io/etcd/server/v3/etcdmain.Main
          |  go build / go install  (GOMODCACHE and GOCACHE: the machine's defaults)
          v
    <cache_root()>/bin/<versions-key>/     kube-apiserver ... vc-scheduler,
                                           volcano-crds/, manifest.json
    <cache_root()>/bin/<versions-key>.lock exclusive flock held while building
    <cache_root()>/logs/<component>.log    full go output of the last build of each
    <cache_root()>/src/, work/             backported volcano.sh/apis copy, go.work

Why it is shaped like this:

* Wrappers in the repo, sources and binaries outside: `go install pkg@version`
  refuses modules whose go.mod has replace directives (k8s.io/kubernetes,
  Volcano, etcd's server all have them). A wrapper module repeats the needed
  replaces pointing at module *versions*, then builds the dependency's main
  package. Only go.mod/go.sum (and etcd's five-line main.go) are committed.
* Kubernetes and Volcano share one wrapper because Volcano v1.15.1 pins
  Kubernetes v1.35.3: every Kubernetes package is compiled once for all five
  binaries instead of twice (the dominant cost on a 2-core machine).
* volcano.sh/apis v1.15.1 is not served by the reachable module proxy; the
  wrapper pins v1.14.0 and the Volcano build adds the single missing constant
  (gomod/k8s/backport/) to a copy of that module under `src/`, wired in by a
  go.work file under `work/`. Go refuses overlays inside GOMODCACHE, hence the copy.
* The cache key encodes every pinned version plus a hash of the wrapper files
  and of the build recipe below, so changing a pin or a flag builds into a new
  directory and never mixes binaries of two recipes.
* A manifest written after each verified binary (size and mtime of the file)
  makes the warm path a handful of `stat` calls: no `go`, no subprocess.
* The exclusive lock makes parallel pytest-xdist workers and parallel CLI runs
  build once; waiters re-check the manifest after acquiring it. Components are
  built one at a time into temporary names and renamed atomically, so an
  interrupted build leaves no half-written binary behind.
* Every go subprocess runs in its own process group under a timeout and is
  killed with its children on timeout, error or KeyboardInterrupt.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from servecert.adapters import contract

# --- pinned versions ---------------------------------------------------------

K8S_VERSION = "v1.35.3"
"""k8s.io/kubernetes; the staging modules are replaced to v0.35.3 (gomod/k8s/go.mod)."""
VOLCANO_VERSION = "v1.15.1"
"""volcano.sh/volcano, which itself pins Kubernetes v1.35.3."""
VOLCANO_APIS_VERSION = "v1.14.0"
"""volcano.sh/apis as served by the module proxy (+ one backported constant)."""
ETCD_VERSION = "v3.6.16"
"""go.etcd.io/etcd/server/v3 (gomod/etcd/go.mod)."""
KWOK_VERSION = "v0.8.0"
"""sigs.k8s.io/kwok, installed with plain `go install`."""
MIN_GO_VERSION = (1, 26)
"""kwok v0.8.0 and etcd v3.6.16 declare `go 1.26.0`."""

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
"""The wrapper modules committed in the repository."""

BUILD_TIMEOUT_S = 60 * 60.0
"""Upper bound for one component's go command."""
VERSION_TIMEOUT_S = 60.0
"""Upper bound for running `<binary> --version`."""
HEARTBEAT_S = 10.0
"""Progress line interval while go runs (and while waiting for another builder)."""
GO_PARALLELISM = 2
"""`go build -p`: the machines this project runs on have 2 cores."""

_KUBE_LDFLAGS = (
    "-s",
    "-w",
    f"-X k8s.io/component-base/version.gitVersion={K8S_VERSION}",
    "-X k8s.io/component-base/version.gitMajor=1",
    f"-X k8s.io/component-base/version.gitMinor={K8S_VERSION.split('.')[1]}",
)
_BACKPORT_FILE = GOMOD_DIR / "k8s" / "backport" / "queue_allocation_gate.go.in"
_BACKPORT_TARGET = "pkg/apis/scheduling/v1beta1/zz_servecert_backport.go"
_MANIFEST = "manifest.json"
_CRD_COMPONENT = "volcano-crds"
_CRD_SUBDIR = "config/crd/volcano/bases"


@dataclass(frozen=True)
class Component:
    """One binary and the recipe that builds it."""

    name: str
    """Name used for progress, logs and the file in the bin directory."""
    package: str
    """Go package to build; with `install` set, a `pkg@version` for `go install`."""
    module: str | None
    """Wrapper module directory under gomod/, or None for `go install pkg@version`."""
    ldflags: tuple[str, ...]
    version_args: tuple[str, ...]
    """Arguments that make the binary print its version and exit 0."""
    expect: str
    """Text that the version output must contain."""
    workspace: bool = False
    """Build through the generated go.work (Volcano's backported volcano.sh/apis)."""


def _volcano(name: str, command: str) -> Component:
    """A binary of volcano.sh/volcano's ``cmd/<command>``, built through the go.work with the backported volcano.sh/apis."""
    return Component(
        name=name,
        package=f"volcano.sh/volcano/cmd/{command}",
        module="k8s",
        ldflags=(*_KUBE_LDFLAGS, f"-X volcano.sh/volcano/pkg/version.Version={VOLCANO_VERSION}"),
        version_args=("--version",),
        expect=f"Version: {VOLCANO_VERSION}",
        workspace=True,
    )


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="etcd",
        package=".",
        module="etcd",
        ldflags=("-s", "-w"),
        version_args=("--version",),
        expect=f"etcd Version: {ETCD_VERSION.lstrip('v')}",
    ),
    Component(
        name="kwok",
        package=f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
        module=None,
        ldflags=(
            "-s",
            "-w",
            f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={K8S_VERSION.lstrip('v')}",
        ),
        version_args=("--version",),
        expect=f"kwok version {KWOK_VERSION}",
    ),
    Component(
        name="kwokctl",
        package=f"sigs.k8s.io/kwok/cmd/kwokctl@{KWOK_VERSION}",
        module=None,
        ldflags=(
            "-s",
            "-w",
            f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={K8S_VERSION.lstrip('v')}",
        ),
        version_args=("--version",),
        expect=f"kwokctl version {KWOK_VERSION}",
    ),
    Component(
        name="kube-apiserver",
        package="k8s.io/kubernetes/cmd/kube-apiserver",
        module="k8s",
        ldflags=_KUBE_LDFLAGS,
        version_args=("--version",),
        expect=f"Kubernetes {K8S_VERSION}",
    ),
    Component(
        name="kube-controller-manager",
        package="k8s.io/kubernetes/cmd/kube-controller-manager",
        module="k8s",
        ldflags=_KUBE_LDFLAGS,
        version_args=("--version",),
        expect=f"Kubernetes {K8S_VERSION}",
    ),
    Component(
        name="kube-scheduler",
        package="k8s.io/kubernetes/cmd/kube-scheduler",
        module="k8s",
        ldflags=_KUBE_LDFLAGS,
        version_args=("--version",),
        expect=f"Kubernetes {K8S_VERSION}",
    ),
    Component(
        name="kubectl",
        package="k8s.io/kubernetes/cmd/kubectl",
        module="k8s",
        ldflags=_KUBE_LDFLAGS,
        version_args=("version", "--client"),
        expect=f"Client Version: {K8S_VERSION}",
    ),
    _volcano("vc-scheduler", "scheduler"),
    _volcano("vc-controller-manager", "controller-manager"),
)


@dataclass(frozen=True)
class BinarySet:
    """Absolute paths of the built binaries (all in one versioned directory)."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kwok: Path
    kwokctl: Path
    volcano_scheduler: Path
    volcano_controller_manager: Path
    volcano_crd_dir: Path
    """Copy of volcano.sh/volcano's config/crd/volcano/bases (*.yaml)."""

    @property
    def bin_dir(self) -> Path:
        """The directory holding every binary (kwokctl's `kubeBinaryPrefix`)."""
        return self.kube_apiserver.parent


class BinaryBuildError(RuntimeError):
    """The binaries could not be provided; the message says what to do."""


Progress = Callable[[str], None]

# --- cache layout ------------------------------------------------------------


def cache_root() -> Path:
    """`$SERVECERT_CACHE`, else `~/.cache/servecert` (never inside the repository): the vendor contract's."""
    return contract.cache_root()


def _goos_goarch() -> str:
    machine = platform.machine().lower()
    arch = {
        "x86_64": "amd64",
        "amd64": "amd64",
        "aarch64": "arm64",
        "arm64": "arm64",
    }.get(machine, machine)
    return f"{platform.system().lower()}-{arch}"


def _recipe_files() -> list[Path]:
    """The committed wrapper files (not stray build outputs in those directories)."""
    names = {"go.mod", "go.sum"}
    return sorted(p for p in GOMOD_DIR.rglob("*") if p.is_file() and (p.name in names or p.suffix == ".go" or p.name.endswith(".go.in")))


def versions_key() -> str:
    """Directory name for this recipe: pinned versions + hash of wrappers and recipe."""
    digest = hashlib.sha256()
    for path in _recipe_files():
        digest.update(path.relative_to(GOMOD_DIR).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    recipe = [dataclasses.astuple(c) for c in COMPONENTS]
    digest.update(json.dumps([recipe, GO_PARALLELISM, VOLCANO_APIS_VERSION, _CRD_SUBDIR]).encode())
    return f"k8s-{K8S_VERSION}_volcano-{VOLCANO_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}_{_goos_goarch()}_{digest.hexdigest()[:12]}"


def bin_dir() -> Path:
    """`<cache_root()>/bin/<versions_key()>`."""
    return cache_root() / "bin" / versions_key()


def built_tool(name: str) -> Path:
    """A program the setup built (``etcd``, ``kube-apiserver``, ...): the environments' ``tool`` for the adapters."""
    path = bin_dir() / name
    if not path.is_file():
        raise contract.AdapterError(f"{name} is not built at {path}: run `.venv/bin/servecert setup --env cluster` (it builds {name})")
    return path


def log_path(component: str) -> Path:
    """Where the full output of a component's last build is kept."""
    return cache_root() / "logs" / f"{component}.log"


def _binary_set(directory: Path) -> BinarySet:
    return BinarySet(
        kube_apiserver=directory / "kube-apiserver",
        kube_controller_manager=directory / "kube-controller-manager",
        kube_scheduler=directory / "kube-scheduler",
        kubectl=directory / "kubectl",
        etcd=directory / "etcd",
        kwok=directory / "kwok",
        kwokctl=directory / "kwokctl",
        volcano_scheduler=directory / "vc-scheduler",
        volcano_controller_manager=directory / "vc-controller-manager",
        volcano_crd_dir=directory / _CRD_COMPONENT,
    )


# --- manifest (the warm path) ------------------------------------------------


def _read_manifest(directory: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((directory / _MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


def _write_manifest(directory: Path, key: str, entries: dict[str, dict[str, Any]]) -> None:
    tmp = directory / f".{_MANIFEST}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps({"key": key, "entries": entries}, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / _MANIFEST)


def _file_stamp(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _entry_valid(directory: Path, name: str, entry: dict[str, Any] | None) -> bool:
    if entry is None:
        return False
    path = directory / name
    if name == _CRD_COMPONENT:
        try:
            count = sum(1 for p in path.iterdir() if p.suffix == ".yaml")
        except OSError:
            return False
        return count > 0 and count == entry.get("files")
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_size == entry.get("size") and st.st_mtime_ns == entry.get("mtime_ns") and os.access(path, os.X_OK)


def _missing(directory: Path) -> list[str]:
    entries = _read_manifest(directory)
    names = [c.name for c in COMPONENTS] + [_CRD_COMPONENT]
    return [n for n in names if not _entry_valid(directory, n, entries.get(n))]


def missing() -> list[str]:
    """The components not yet built (valid) in ``bin_dir()``: what ``ensure()`` would build now."""
    return _missing(bin_dir())


# --- go and subprocesses -----------------------------------------------------


def _go_not_found() -> BinaryBuildError:
    need = ".".join(str(n) for n in MIN_GO_VERSION)
    return BinaryBuildError(
        "The Go toolchain (`go`) was not found on PATH (or at $SERVECERT_GO). "
        "The embedded cluster compiles its binaries from Go modules: install "
        f"Go >= {need} from the Go website (go.dev/dl) or your distribution and "
        "put `go` on PATH, or skip building by running against an existing "
        "cluster: `--backend existing` with KUBECONFIG set."
    )


def find_go() -> str:
    """Path of the `go` command ($SERVECERT_GO or PATH); BinaryBuildError if absent."""
    candidate = os.environ.get("SERVECERT_GO") or "go"
    found = shutil.which(candidate)
    if found is None:
        raise _go_not_found()
    return found


def parse_go_version(text: str) -> tuple[int, int]:
    """`go1.26.8` (or `go version go1.26.8 linux/amd64`, `go1.27rc1`) -> (1, 26)."""
    match = re.search(r"\bgo(\d+)\.(\d+)", text)
    if match is None:
        raise BinaryBuildError(f"Could not read a Go version from {text.strip()!r}.")
    return int(match.group(1)), int(match.group(2))


def check_go(go: str) -> str:
    """Return the Go version string; BinaryBuildError if too old or not runnable."""
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    except FileNotFoundError as exc:
        raise _go_not_found() from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise BinaryBuildError(f"`{go} env GOVERSION` failed ({exc}); check the Go installation.") from exc
    if parse_go_version(out) < MIN_GO_VERSION:
        need = ".".join(str(n) for n in MIN_GO_VERSION)
        raise BinaryBuildError(
            f"{go} is {out}, but building the cluster binaries needs Go >= {need} "
            f"(kwok {KWOK_VERSION} and etcd {ETCD_VERSION} declare go {need}.0). "
            "Install a newer Go from the Go website (go.dev/dl) or your "
            "distribution, or use `--backend existing` with KUBECONFIG."
        )
    return out


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Terminate the process group of `proc` (go and its compile/link children)."""
    if proc.poll() is not None:
        return  # go waits for its own compile/link children before exiting
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_logged(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log: IO[str],
    log_file: Path,
    what: str,
    progress: Progress,
    timeout: float = BUILD_TIMEOUT_S,
    heartbeat: float = HEARTBEAT_S,
) -> float:
    """Run `argv`, output appended to `log`, heartbeats to `progress`; return seconds.

    The child gets its own session so that on timeout, failure of the caller or
    KeyboardInterrupt the whole process group (go plus compile/link) is killed.
    """
    log.write(f"$ (cd {cwd} && {' '.join(argv)})\n")
    log.flush()
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        while True:
            elapsed = time.monotonic() - start
            remaining = timeout - elapsed
            if remaining <= 0:
                _kill_group(proc)
                raise BinaryBuildError(f"{what} did not finish within {timeout:.0f}s and was stopped. Log: {log_file}\n{_tail(log_file)}")
            try:
                rc = proc.wait(timeout=min(heartbeat, remaining))
            except subprocess.TimeoutExpired:
                progress(f"{what}: still running, {time.monotonic() - start:.0f}s elapsed; log {log_file}")
                continue
            break
    except BaseException:
        _kill_group(proc)
        raise
    elapsed = time.monotonic() - start
    log.write(f"# exit status {rc} after {elapsed:.1f}s\n")
    log.flush()
    if rc != 0:
        raise BinaryBuildError(f"{what} failed (exit status {rc}). Full log: {log_file}\nLast lines:\n{_tail(log_file)}")
    return elapsed


def check_version(binary: Path, args: Sequence[str], expect: str, timeout: float = VERSION_TIMEOUT_S) -> str:
    """Run `binary args...`; return the matching output line, else BinaryBuildError."""
    try:
        done = subprocess.run(
            [str(binary), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BinaryBuildError(f"`{binary} {' '.join(args)}` did not exit within {timeout:.0f}s.") from exc
    except OSError as exc:
        raise BinaryBuildError(f"`{binary} {' '.join(args)}` could not be run: {exc}.") from exc
    output = (done.stdout or "") + (done.stderr or "")
    if done.returncode != 0 or expect not in output:
        raise BinaryBuildError(
            f"`{binary} {' '.join(args)}` exited {done.returncode} and printed "
            f"{output.strip()[:400]!r}, expected it to contain {expect!r}. Delete "
            f"{binary.parent} and rebuild; if it persists, the pinned versions or "
            "ldflags in servecert/harness/cluster/binaries.py are inconsistent."
        )
    for line in output.splitlines():
        if expect in line:
            return line.strip()
    return expect  # pragma: no cover - `expect in output` guarantees a line


class _Terminated(BaseException):
    """Raised inside a build when SIGTERM arrives, so that cleanup runs first."""


@contextlib.contextmanager
def _cleanup_before_sigterm() -> Iterator[None]:
    """While building, turn SIGTERM into an exception, then re-deliver it.

    go runs in its own session (so a timeout can kill its whole group), which also
    means a SIGTERM aimed at this process would not reach it. Here SIGTERM unwinds
    the build (killing go, removing temp files, releasing the lock) and is then
    raised again under the previous disposition. Only possible on the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:  # a second SIGTERM must not interrupt the cleanup
            raise _Terminated

    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if received:
        signal.raise_signal(signal.SIGTERM)
        raise BinaryBuildError("Build interrupted by SIGTERM; go was stopped, nothing half-written was kept.")


# --- locking -----------------------------------------------------------------


@contextlib.contextmanager
def build_lock(path: Path, progress: Progress, timeout: float, heartbeat: float = HEARTBEAT_S) -> Iterator[None]:
    """Hold an exclusive flock on `path`; report while another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        start = time.monotonic()
        last_report = -heartbeat
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            waited = time.monotonic() - start
            if waited >= timeout:
                raise BinaryBuildError(
                    f"Gave up after {waited:.0f}s waiting for {path}, held by another "
                    "build (pytest-xdist worker or CLI run). If no such build is "
                    "running, the process holding it is stuck: find it with `fuser` "
                    "on that file."
                )
            if waited - last_report >= heartbeat:
                progress(f"waiting for another build to release {path} ({waited:.0f}s)")
                last_report = waited
            time.sleep(min(0.5, max(0.05, timeout - waited)))
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


# --- building ----------------------------------------------------------------


def _stderr_progress(line: str) -> None:
    print(f"[servecert binaries] {line}", file=sys.stderr, flush=True)


def _go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"
    # Let `go` find its own toolchain even when it was given as an absolute path.
    env["PATH"] = os.pathsep.join([str(Path(go).parent), env.get("PATH", "")])
    return env


def _go_json(go: str, argv: Sequence[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [go, *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=30 * 60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BinaryBuildError(f"`go {' '.join(argv)}` timed out (module download?).") from exc
    if done.returncode != 0:
        raise BinaryBuildError(f"`go {' '.join(argv)}` in {cwd} failed: {(done.stderr or done.stdout).strip()[-1500:]}")
    data = json.loads(done.stdout)
    if not isinstance(data, dict) or data.get("Error"):
        raise BinaryBuildError(f"`go {' '.join(argv)}` in {cwd}: {data!r:.1500}")
    return data


def _module_dir(go: str, module: str, env: dict[str, str]) -> Path:
    """Directory of `module` as the k8s wrapper resolves it; downloads if needed."""
    data = _go_json(go, ["mod", "download", "-json", module], GOMOD_DIR / "k8s", env)
    return Path(str(data["Dir"]))


def _backported_apis(go: str, env: dict[str, str]) -> Path:
    """Copy volcano.sh/apis out of the module cache and add the backport file."""
    digest = hashlib.sha256(_BACKPORT_FILE.read_bytes()).hexdigest()[:12]
    target = cache_root() / "src" / f"volcano.sh-apis@{VOLCANO_APIS_VERSION}-backport-{digest}"
    if (target / _BACKPORT_TARGET).is_file():
        return target
    source = _module_dir(go, f"volcano.sh/apis@{VOLCANO_APIS_VERSION}", env)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    for dirpath, dirnames, filenames in os.walk(tmp):  # module cache files are read-only
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            p.chmod(p.stat().st_mode | 0o200)
    tmp.chmod(tmp.stat().st_mode | 0o200)
    shutil.copyfile(_BACKPORT_FILE, tmp / _BACKPORT_TARGET)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target


def _write_go_work(go: str, key: str, env: dict[str, str]) -> Path:
    apis = _backported_apis(go, env)
    work = cache_root() / "work" / key
    work.mkdir(parents=True, exist_ok=True)
    content = (
        "// Generated by servecert/harness/cluster/binaries.py; see gomod/k8s/backport/.\n"
        "go 1.25.0\n\n"
        f"use {json.dumps(str(GOMOD_DIR / 'k8s'))}\n\n"
        f"replace volcano.sh/apis => {json.dumps(str(apis))}\n"
    )
    path = work / "go.work"
    if not path.is_file() or path.read_text() != content:
        tmp = work / f".go.work.tmp-{os.getpid()}"
        tmp.write_text(content)
        os.replace(tmp, path)
    return path


def _build_one(
    go: str,
    *,
    comp: Component,
    directory: Path,
    key: str,
    progress: Progress,
    timeout: float,
) -> dict[str, Any]:
    env = _go_env(go)
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_file = logs / f"{comp.name}.log"
    tmp_dir = directory / f".tmp-{comp.name}-{os.getpid()}"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    try:
        with log_file.open("w") as log:
            log.write(f"# {comp.name} for {key}, started {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
            ldflags = " ".join(comp.ldflags)
            common = ["-p", str(GO_PARALLELISM), "-trimpath", "-ldflags", ldflags]
            if comp.module is None:
                env["GOBIN"] = str(tmp_dir)
                argv = [go, "install", *common, comp.package]
                cwd = tmp_dir  # outside any module: `go install pkg@version`
                built = tmp_dir / comp.name
            else:
                if comp.workspace:
                    env["GOWORK"] = str(_write_go_work(go, key, env))
                built = tmp_dir / comp.name
                argv = [go, "build", *common, "-o", str(built), comp.package]
                cwd = GOMOD_DIR / comp.module
            log.write(f"# GOWORK={env['GOWORK']} CGO_ENABLED=0 GOBIN={env.get('GOBIN', '')}\n")
            seconds = run_logged(
                argv,
                cwd=cwd,
                env=env,
                log=log,
                log_file=log_file,
                what=comp.name,
                progress=progress,
                timeout=timeout,
            )
            if not built.is_file():
                raise BinaryBuildError(f"{comp.name}: go reported success but {built} is missing. Log: {log_file}")
            version = check_version(built, comp.version_args, comp.expect)
            log.write(f"# version check: {version}\n")
        final = directory / comp.name
        os.replace(built, final)
        entry = _file_stamp(final)
        entry.update({"version": version, "build_seconds": round(seconds, 1)})
        return entry
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _copy_crds(go: str, directory: Path) -> dict[str, Any]:
    source = _module_dir(go, f"volcano.sh/volcano@{VOLCANO_VERSION}", _go_env(go)) / _CRD_SUBDIR
    files = sorted(source.glob("*.yaml"))
    if not files:
        raise BinaryBuildError(f"No Volcano CRDs (*.yaml) found in {source}.")
    final = directory / _CRD_COMPONENT
    tmp = directory / f".tmp-{_CRD_COMPONENT}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for f in files:
        shutil.copyfile(f, tmp / f.name)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return {"files": len(files), "source": str(source)}


def ensure(progress: Progress | None = None, *, timeout: float = BUILD_TIMEOUT_S) -> BinarySet:
    """Return the binaries, building whatever is missing (see the module docstring).

    Warm path: a few `stat` calls against the manifest, no subprocess. Cold path:
    takes `<cache_root()>/bin/<key>.lock`, re-checks, then builds each missing
    component in turn; `timeout` bounds each go command.
    """
    report = progress or _stderr_progress
    key = versions_key()
    directory = cache_root() / "bin" / key
    if not _missing(directory):
        return _binary_set(directory)

    go = find_go()
    go_version = check_go(go)
    wait_limit = len(COMPONENTS) * timeout  # a peer may be building all of them
    with _cleanup_before_sigterm(), build_lock(cache_root() / "bin" / f"{key}.lock", report, timeout=wait_limit):
        missing = _missing(directory)  # a peer may have built them while we waited
        if not missing:
            return _binary_set(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob(".tmp-*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        report(f"building {', '.join(missing)} into {directory} with {go_version}; logs in {cache_root() / 'logs'}")
        entries = _read_manifest(directory)
        started = time.monotonic()
        todo = [c for c in COMPONENTS if c.name in missing]
        for i, comp in enumerate(todo, 1):
            report(f"{comp.name}: building ({i}/{len(todo)})")
            entry = _build_one(
                go,
                comp=comp,
                directory=directory,
                key=key,
                progress=report,
                timeout=timeout,
            )
            entries[comp.name] = entry
            _write_manifest(directory, key, entries)
            size_mb = entry["size"] / 1e6
            report(f"{comp.name}: done in {entry['build_seconds']:.0f}s ({size_mb:.0f} MB) -> {entry['version']}")
        if _CRD_COMPONENT in missing:
            entries[_CRD_COMPONENT] = _copy_crds(go, directory)
            _write_manifest(directory, key, entries)
            report(f"{_CRD_COMPONENT}: copied {entries[_CRD_COMPONENT]['files']} files")
        report(f"all binaries ready in {time.monotonic() - started:.0f}s")
        still = _missing(directory)
        if still:
            raise BinaryBuildError(f"Built, but still invalid: {', '.join(still)} in {directory}.")
    return _binary_set(directory)


def main(argv: list[str] | None = None) -> int:
    """`python -m servecert.harness.cluster.binaries [--print]`: build if needed, report."""
    parser = argparse.ArgumentParser(
        prog="python -m servecert.harness.cluster.binaries",
        description="Build the embedded-cluster binaries into the servecert cache.",
    )
    parser.add_argument("--print", action="store_true", help="print name=path for every binary")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    try:
        started = time.monotonic()
        result = ensure(progress=(lambda _line: None) if args.quiet else None)
    except BinaryBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted; go processes stopped, nothing half-written was kept",
            file=sys.stderr,
        )
        return 130
    if args.print:
        for field in dataclasses.fields(result):
            print(f"{field.name}={getattr(result, field.name)}")
    else:
        print(f"{result.bin_dir} ({time.monotonic() - started:.2f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
