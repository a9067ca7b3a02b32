"""The pod runner: pods on kwok's fake nodes whose image it knows become real local processes.

Data flow::

    PodWatcher (thread) --events--> PodRunner.run loop (ticks every TICK_S)
      adopt a bound pod with a known image:
        pod IP from our 127.<o>.0.0/16 block -> Downward API files in <pods>/<ns>_<name>_<uid>/volumes/
        -> status patch: Running, podIP(s), hostIP, Ready=False -> start each known container's command
           (env from the pod incl. valueFrom, $(VAR) expansion, mount paths mapped to the host dirs,
            plus KUBECONFIG=<the runner's own kubeconfig>: the fake pods' "service account")
      each tick: readiness probe GET http://<podIP>:<port><path> until 200 -> Ready=True patch
                 a process that exited -> restartCount+1, lastState.terminated, CrashLoopBackOff, restart
                 labels/annotations changed -> Downward API volume rewritten in one swap (atomic_dir)
      deletionTimestamp set -> SIGTERM, SIGKILL after the grace period -> delete the pod (grace 0)
      DELETED without that (a forced delete) -> SIGTERM now, SIGKILL after at most the grace period

Why: kwok fakes nodes and pod status but runs nothing; the suite needs real engines behind the
pod IPs that an operator and a router see, and kubelet's observable behaviour around them
(readiness, restarts, graceful termination). kwok's own pod stages skip these images (see
``servecert/harness/cluster/kwok_stages.py``), so nothing else writes their status. The runner owns the
IP it publishes: kwok never overwrites ``status.podIP`` of a pod its stages do not select.
Unknown images are ignored entirely; kwok plays their lifecycle as usual.

The service account: a real pod reaches the API server with the token kubelet mounts for its
service account. These processes run on the host, so the runner hands them its own kubeconfig
instead, as ``KUBECONFIG`` (a pod's own ``KUBECONFIG`` env wins). That is how a fake engine
publishes its WorkerMetadata and the reference frontend lists them (Kubernetes discovery). It is
the runner's identity, so no RBAC is modelled: every pod may do what the runner may.

Ground truth outlives the pod: a pod's directory goes when the pod does, but the suite judges what
its engine served afterwards (a rolling update deletes workers mid-test). So every fake-engine
container gets ``SERVECERT_GROUNDTRUTH_FILE=<groundtruth_dir(pods_dir)>/<ns>_<name>_<uid8>.jsonl``
(unless the pod sets it), a folder beside the pods' that the runner never deletes; a restarted
container appends to the same file. ``servecert.fakes.groundtruth.read_json_lines`` reads the folder.
Container logs outlive the pod the same way, for whoever debugs a failed run: when a pod goes, its
``<container>.log`` files move to ``<pod_logs_dir(pods_dir)>/<ns>_<name>_<uid8>/``.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import ipaddress
import logging
import os
import queue
import shutil
import threading
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.fakes.pod_runner import atomic_dir, images, podspec
from servecert.fakes.pod_runner.supervisor import ContainerRun, now_rfc3339
from servecert.fakes.pod_runner.watching import Event, PodWatcher
from servecert.fakes.pod_runner.zygote import Zygote
from servecert.protocol import waiting

TICK_S = 0.1
PROBE_INTERVAL_S = 0.3
PROBE_TIMEOUT_S = 1.0
DEFAULT_GRACE_S = 30.0
FORCED_DELETE_GRACE_CAP_S = 5.0
ENV_GROUNDTRUTH_FILE = "SERVECERT_GROUNDTRUTH_FILE"
"""Where ``servecert engine serve`` appends its ground-truth records (see ``servecert.fakes.serve``)."""
PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR", "SERVECERT_CACHE")
"""Host variables a process needs to run at all (the interpreter, its packages)."""
log = logging.getLogger("pod_runner")


class IpPool:
    """Pod IPs from a loopback block, skipping .0 and .255 of each /24.

    Fresh addresses first; freed ones only once the block is used up, oldest first. A freed
    address is not handed out again at once: a process of the pod that had it may still be
    closing its sockets, and a new pod answering on a reused IP must never be confused with it.
    """

    def __init__(self, cidr: str) -> None:
        self.network = ipaddress.IPv4Network(cidr)
        if not self.network.is_loopback:
            raise ValueError(f"--pod-cidr {cidr} must be inside 127.0.0.0/8: pod IPs are loopback addresses here")
        self._next = int(self.network.network_address) + 2
        self._free: collections.deque[str] = collections.deque()
        self._used: set[str] = set()

    def contains(self, ip: str) -> bool:
        with contextlib.suppress(ValueError):
            return ipaddress.IPv4Address(ip) in self.network
        return False

    def take(self, preferred: str | None = None) -> str:
        if preferred and self.contains(preferred) and preferred not in self._used:
            self._used.add(preferred)
            return preferred
        while self._next < int(self.network.broadcast_address):
            value, self._next = self._next, self._next + 1
            ip = str(ipaddress.IPv4Address(value))
            if value & 0xFF in (0, 255) or ip in self._used:
                continue
            self._used.add(ip)
            return ip
        while self._free:
            ip = self._free.popleft()
            if ip not in self._used:
                self._used.add(ip)
                return ip
        raise RuntimeError(f"pod IP block {self.network} is exhausted")

    def release(self, ip: str) -> None:
        if ip in self._used:
            self._used.discard(ip)
            self._free.append(ip)


@dataclass
class PodWork:
    uid: str
    namespace: str
    name: str
    pod: dict[str, Any]
    ip: str
    host_ip: str
    directory: Path
    containers: list[ContainerRun] = field(default_factory=list)
    start_time: str = field(default_factory=now_rfc3339)
    dirty: bool = True
    deleting: bool = False
    written: dict[str, dict[str, str]] = field(default_factory=dict)
    """Downward API volumes as last written: volume name -> {relative path: content}."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def groundtruth_dir(pods_dir: Path) -> Path:
    """The folder of the fake engines' ground-truth files: beside ``pods_dir``, so deleting a pod's directory keeps them."""
    return pods_dir.parent / "groundtruth"


def pod_logs_dir(pods_dir: Path) -> Path:
    """The folder where a deleted pod's container logs are kept (``cluster down`` removes it with the rest)."""
    return pods_dir.parent / "pod-logs"


def is_runnable(pod: Mapping[str, Any], registry: Mapping[str, images.ImageSpec]) -> bool:
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    known = any(images.lookup(c.get("image", ""), dict(registry)) for c in spec.get("containers") or [])
    return bool(spec.get("nodeName")) and known and phase not in ("Succeeded", "Failed")


def grace_seconds(pod: Mapping[str, Any]) -> float:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    for value in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
        if value is not None:
            return float(value)
    return DEFAULT_GRACE_S


class PodRunner:
    def __init__(
        self,
        api: Any,
        pods_dir: Path,
        pod_cidr: str,
        registry: Mapping[str, images.ImageSpec] | None = None,
        backoff: tuple[float, float] = (0.5, 5.0),
        kubeconfig: Path | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.zygote = zygote
        """Forks the pods' Python programs from a warm parent (``zygote``); None: each starts as a subprocess."""
        self.kubeconfig = kubeconfig
        """Passed to every pod process as KUBECONFIG (see the module docstring); None: not passed."""
        self.pods_dir = pods_dir
        self.ips = IpPool(pod_cidr)
        self.registry = dict(registry if registry is not None else images.KNOWN_IMAGES)
        self.backoff = backoff
        self.work: dict[str, PodWork] = {}
        self._probes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="probe")
        self._node_ips: dict[str, str] = {}
        self.refused: set[str] = set()
        """uids of pods that cannot run (bad env ref, ...): reported once as an Event, then ignored."""

    # --- loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event, ready_file: Path | None = None) -> None:
        events: queue.Queue[Event] = queue.Queue()
        PodWatcher(self.core.api_client, events, stop).start()
        synced = False
        try:
            while not stop.is_set():
                tick = waiting.Deadline(TICK_S)
                while not tick.expired:
                    try:
                        kind, payload = events.get(timeout=tick.remaining())
                    except queue.Empty:
                        break
                    self.handle(kind, payload)
                    if kind == "SYNC" and not synced and ready_file is not None:
                        synced = True
                        ready_file.parent.mkdir(parents=True, exist_ok=True)
                        ready_file.write_text(str(os.getpid()))
                self.tick()
        finally:
            self.shutdown()

    def handle(self, kind: str, payload: Any) -> None:
        if kind == "SYNC":
            seen = set()
            for pod in payload:
                seen.add(pod["metadata"]["uid"])
                self.observe(pod)
            for uid in [u for u in self.work if u not in seen]:
                self.forced_delete(self.work[uid])
        elif kind == "DELETED":
            work = self.work.get(payload["metadata"]["uid"])
            if work is not None:
                self.forced_delete(work)
        else:
            self.observe(payload)

    def observe(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        work = self.work.get(uid)
        if work is None:
            if uid in self.refused:
                return
            if is_runnable(pod, self.registry) and not pod["metadata"].get("deletionTimestamp"):
                self.adopt(pod)
            return
        work.pod = pod
        self.write_downward(work)
        if pod["metadata"].get("deletionTimestamp") and not work.deleting:
            work.deleting = True
            grace = grace_seconds(pod)
            log.info("%s: deleting, SIGTERM with %.0fs grace", work.key, grace)
            for run in work.containers:
                run.terminate(grace)

    def tick(self) -> None:
        for work in list(self.work.values()):
            self.tick_pod(work)
            if work.dirty and not work.deleting:
                self.patch_status(work)
            if work.deleting and not any(run.running for run in work.containers):
                self.finish_delete(work)

    # --- one pod ----------------------------------------------------------------------------

    def adopt(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ip = self.ips.take((pod.get("status") or {}).get("podIP"))
        directory = self.pods_dir / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        work = PodWork(
            uid=meta["uid"],
            namespace=meta["namespace"],
            name=meta["name"],
            pod=pod,
            ip=ip,
            host_ip=self.node_ip(spec["nodeName"]),
            directory=directory,
        )
        # NB: fieldRefs to status.podIP must see the IP we are about to publish.
        pod.setdefault("status", {}).update({"podIP": ip, "podIPs": [{"ip": ip}], "hostIP": work.host_ip})
        self.write_downward(work)
        try:
            work.containers = [self.container_run(work, c) for c in spec.get("containers") or []]
        except (podspec.PodSpecError, ValueError) as exc:
            log.warning("%s: cannot run: %s", f"{meta['namespace']}/{meta['name']}", exc)
            self.ips.release(ip)
            shutil.rmtree(directory, ignore_errors=True)
            self.event(pod, "Failed", str(exc))
            self.refused.add(meta["uid"])
            return
        self.work[work.uid] = work
        log.info("%s: adopted on %s with IP %s", work.key, spec["nodeName"], ip)
        self.patch_status(work)

    def container_run(self, work: PodWork, container: Mapping[str, Any]) -> ContainerRun:
        restart_policy = (work.pod.get("spec") or {}).get("restartPolicy", "Always")
        spec = images.lookup(container.get("image", ""), self.registry)
        run = ContainerRun(
            name=container["name"],
            image=container.get("image", ""),
            argv=[],
            env={},
            cwd=work.directory,
            health_url=None,
            restart_policy=restart_policy,
            backoff_base=self.backoff[0],
            backoff_cap=self.backoff[1],
            zygote=self.zygote,
        )
        if spec is None:
            run.ready, run.started_at, run.waiting_reason = True, now_rfc3339(), None
            return run
        mapping = self.mount_map(work, container)
        env = podspec.container_env(work.pod, container, self.lookup)
        env = {k: podspec.remap_path(v, mapping) for k, v in env.items()}
        for var, default_path in spec.mount_env.items():
            if var not in env and default_path in mapping:
                env[var] = mapping[default_path]
        given = images.container_args(spec, list(container.get("command") or []), list(container.get("args") or []))
        args = [podspec.remap_path(podspec.expand(a, env), mapping) for a in given]
        port = podspec.container_port(container, spec.default_port, spec.port_flag, args)
        run.argv = spec.command(images.Launch(args=args, host=work.ip, port=port))
        base = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
        run.env = {**base, "HOSTNAME": work.name, **self.identity_env(), **self.groundtruth_env(work, spec), **env}
        run.health_url = f"http://{work.ip}:{port}{podspec.readiness_path(container, spec.health_path)}"
        return run

    def groundtruth_env(self, work: PodWork, spec: images.ImageSpec) -> dict[str, str]:
        """For a fake engine: the file its ground truth goes to, named after the pod (a pod's own value wins)."""
        if spec.image != images.FAKE_ENGINE_IMAGE:
            return {}
        path = groundtruth_dir(self.pods_dir) / f"{work.namespace}_{work.name}_{work.uid[:8]}.jsonl"
        return {ENV_GROUNDTRUTH_FILE: str(path.resolve())}

    def identity_env(self) -> dict[str, str]:
        """The fake pods' "service account": the runner's own kubeconfig, by absolute path."""
        return {"KUBECONFIG": str(self.kubeconfig.resolve())} if self.kubeconfig is not None else {}

    def mount_map(self, work: PodWork, container: Mapping[str, Any]) -> dict[str, str]:
        volumes = {v["name"]: v for v in (work.pod.get("spec") or {}).get("volumes") or []}
        mapping: dict[str, str] = {}
        for name, mount_path in podspec.mounts(container):
            volume = volumes.get(name, {})
            host = work.directory / "volumes" / name
            if podspec.is_downward(volume) or "emptyDir" in volume:
                host.mkdir(parents=True, exist_ok=True)
                mapping[mount_path] = str(host)
        return mapping

    def write_downward(self, work: PodWork) -> None:
        """(Re)write each Downward API volume whose content changed, all its files in one swap."""
        pod = dict(work.pod)
        pod["status"] = {**(pod.get("status") or {}), "podIP": work.ip, "podIPs": [{"ip": work.ip}], "hostIP": work.host_ip}
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if not podspec.is_downward(volume):
                continue
            files = podspec.downward_files(pod, volume)
            if work.written.get(volume["name"]) == files:
                continue
            atomic_dir.write_payload(work.directory / "volumes" / volume["name"], files)
            work.written[volume["name"]] = files

    def tick_pod(self, work: PodWork) -> None:
        for run in work.containers:
            code = run.exited()
            if code is not None:
                log.info("%s/%s: exited with %d", work.key, run.name, code)
                run.record_exit(code, stopping=work.deleting)
                work.dirty = True
            if work.deleting:
                run.kill_if_overdue()
                continue
            if run.due():
                run.start()
                log.info("%s/%s: started pid %s", work.key, run.name, run.proc.pid if run.proc else "?")
                work.dirty = True
            self.probe(work, run)

    def probe(self, work: PodWork, run: ContainerRun) -> None:
        if not run.running or run.ready or run.health_url is None:
            return
        if run.probe is not None and run.probe.done():
            ok = bool(run.probe.result())
            run.probe = None
            if ok:
                run.ready = True
                work.dirty = True
                log.info("%s/%s: ready", work.key, run.name)
                return
        if run.probe is None and (run.probe_wait is None or run.probe_wait.expired):
            run.probe_wait = waiting.Deadline(PROBE_INTERVAL_S)
            run.probe = self._probes.submit(_http_ok, run.health_url)

    # --- status and deletion ----------------------------------------------------------------

    def status(self, work: PodWork) -> dict[str, Any]:
        runs = work.containers
        ready = bool(runs) and all(r.ready for r in runs)
        finished = [r for r in runs if r.terminated is not None]
        phase = "Running"
        if runs and len(finished) == len(runs):
            phase = "Succeeded" if all(r.terminated and r.terminated["exitCode"] == 0 for r in finished) else "Failed"
        now = now_rfc3339()
        flag = "True" if ready else "False"
        conditions = [
            {"type": "Initialized", "status": "True", "lastTransitionTime": work.start_time},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
            {"type": "Ready", "status": flag, "lastTransitionTime": now},
        ]
        return {
            "phase": phase,
            "podIP": work.ip,
            "podIPs": [{"ip": work.ip}],
            "hostIP": work.host_ip,
            "hostIPs": [{"ip": work.host_ip}],
            "startTime": work.start_time,
            "conditions": conditions,
            "containerStatuses": [r.status() for r in runs],
        }

    def patch_status(self, work: PodWork) -> None:
        try:
            self.core.patch_namespaced_pod_status(work.name, work.namespace, {"status": self.status(work)})
            work.dirty = False
        except ApiException as exc:
            if exc.status == 404:
                self.forced_delete(work)
            else:
                log.warning("%s: status patch failed: %s %s", work.key, exc.status, exc.reason)

    def finish_delete(self, work: PodWork) -> None:
        body = client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=work.uid))
        try:
            self.core.delete_namespaced_pod(work.name, work.namespace, body=body, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("%s: delete failed: %s %s; retrying", work.key, exc.status, exc.reason)
                return
        log.info("%s: processes stopped, pod deleted", work.key)
        self.forget(work)

    def forced_delete(self, work: PodWork) -> None:
        """The pod object is gone (force-deleted, or missing after a re-list): stop its processes."""
        grace = min(grace_seconds(work.pod), FORCED_DELETE_GRACE_CAP_S)
        for run in work.containers:
            run.terminate(grace)
        for _ in waiting.holding(grace + 5.0, 0.05):
            if not any(r.running for r in work.containers):
                break
            for run in work.containers:
                run.kill_if_overdue()
        for run in work.containers:
            run.stop_now(timeout=1.0)
        self.forget(work)

    def forget(self, work: PodWork) -> None:
        self.work.pop(work.uid, None)
        self.ips.release(work.ip)
        self.keep_logs(work)
        shutil.rmtree(work.directory, ignore_errors=True)

    def keep_logs(self, work: PodWork) -> None:
        kept = pod_logs_dir(self.pods_dir) / work.directory.name
        for log_file in work.directory.glob("*.log"):
            with contextlib.suppress(OSError):
                kept.mkdir(parents=True, exist_ok=True)
                shutil.move(log_file, kept / log_file.name)

    def shutdown(self) -> None:
        for work in list(self.work.values()):
            for run in work.containers:
                run.stop_now()
            with contextlib.suppress(OSError):
                for pid_file in work.directory.glob("*.pid"):
                    pid_file.unlink()
        self._probes.shutdown(wait=False, cancel_futures=True)
        if self.zygote is not None:
            self.zygote.stop()

    # --- cluster lookups --------------------------------------------------------------------

    def node_ip(self, node: str) -> str:
        if node not in self._node_ips:
            ip = ""
            with contextlib.suppress(ApiException):
                addresses = self.core.read_node_status(node).status.addresses or []
                ip = next((a.address for a in addresses if a.type == "InternalIP"), "")
            if not ip:
                return "127.0.0.1"
            self._node_ips[node] = ip
        return self._node_ips[node]

    def lookup(self, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        try:
            if kind == "configmap":
                return dict(self.core.read_namespaced_config_map(name, namespace).data or {})
            data = self.core.read_namespaced_secret(name, namespace).data or {}
            return {k: base64.b64decode(v).decode() for k, v in data.items()}
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def event(self, pod: Mapping[str, Any], reason: str, message: str) -> None:
        meta = pod["metadata"]
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=meta["namespace"]),
            involved_object=client.V1ObjectReference(kind="Pod", name=meta["name"], namespace=meta["namespace"], uid=meta["uid"]),
            reason=reason,
            message=message,
            type="Warning",
            source=client.V1EventSource(component="servecert-pod-runner"),
        )
        with contextlib.suppress(ApiException):
            self.core.create_namespaced_event(meta["namespace"], body)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as resp:
            return bool(resp.status == 200)
    except Exception:  # any failure is "not ready yet"
        return False
