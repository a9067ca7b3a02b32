"""vllm-router 0.1.17 behind the adapter contract (registered as ``vllm-router``; extra ``servecert[vllm-router]``).

The router (Rust, PyPI ``vllm-router``) runs unmodified in its vLLM P/D mode:
``python -m vllm_router.launch_router --vllm-pd-disaggregation --prefill URL --decode URL``
with its default NIXL connector. Per request it sends the prefill engine the client's body
with ``max_tokens`` 1, ``stream`` false and ``kv_transfer_params {"do_remote_decode": true}``,
then the decode engine the client's body with the prefill's answer's ``kv_transfer_params``,
and relays the decode engine's answer (usage merged from both). The fake engines speak that
handshake (``pd_protocol`` ``vllm``, ``servecert.fakes.pd_wire``). Workers leave through its
``POST /remove_worker?url=``; in P/D mode it has no HTTP route to add one (``POST /workers``
answers "PD router requires specific add_prefill_server or add_decode_server methods"), so
``add_worker`` fails saying so. On a cluster its Kubernetes service discovery adds and drops
engine pods by their labels (``discovery_argv``). See ``docs/pd-routers.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecert.adapters.contract import PD_VLLM, AdapterError, ImplementationMetadata, WorkerRef
from servecert.adapters.pd_routers import deployment
from servecert.adapters.pd_routers.deployment import RouterHttp
from servecert.adapters.pd_routers.implementation import RouterImplementation

VERSION = "0.1.17"


@dataclass(frozen=True)
class VllmRouter:
    name: str = "vllm-router"
    pd_protocol: str = PD_VLLM
    module: str = "vllm_router"
    install: str = "pip install 'servecert[vllm-router]' (vllm-router==0.1.17)"

    def argv(self, port: int, metrics_port: int, prefill: list[WorkerRef], decode: list[WorkerRef], policy: str) -> list[str]:
        argv = [*deployment.python_module("vllm_router.launch_router"), "--vllm-pd-disaggregation"]
        for ref in prefill:
            argv += ["--prefill", ref.url]
        for ref in decode:
            argv += ["--decode", ref.url]
        return [*argv, *deployment.listen_args(port, metrics_port, policy), "--worker-startup-check-interval", "1"]

    def discovery_argv(
        self, port: int, metrics_port: int, namespace: str, prefill: dict[str, str], decode: dict[str, str], engine_port: int, policy: str
    ) -> list[str]:
        return [*deployment.python_module("vllm_router.launch_router"), "--vllm-pd-disaggregation",
                *deployment.discovery_args(namespace, prefill, decode, engine_port), *deployment.listen_args(port, metrics_port, policy),
                "--worker-startup-check-interval", "1"]  # fmt: skip

    def prefill_annotations(self, engine_port: int) -> dict[str, str]:
        return {}  # NB: its NIXL connector needs no bootstrap port: the prefill's answer names the KV's host and port

    async def add(self, http: RouterHttp, ref: WorkerRef) -> None:
        raise AdapterError(
            f'vllm-router {VERSION} cannot add a worker to a running P/D router over HTTP (POST /workers: "PD router requires '
            'specific add_prefill_server or add_decode_server methods"); only its Kubernetes service discovery adds workers'
        )

    async def remove(self, http: RouterHttp, ref: WorkerRef) -> None:
        status, body = await http.call("POST", "/remove_worker", params={"url": ref.url})
        if status != 200:
            raise AdapterError(f"vllm-router refused to remove {ref.url}: HTTP {status} {body!r}")


def implementation() -> RouterImplementation:
    """The entry point ``vllm-router``."""
    return RouterImplementation(
        kind=VllmRouter(),
        metadata=ImplementationMetadata(
            organization="vLLM project",
            project="vllm-router",
            url="https://github.com/vllm-project/router",
            version=deployment.installed_version("vllm-router", VERSION),
            contact=("servecert maintainers (adapter: servecert/adapters/pd_routers)",),
        ),
        supported_features=deployment.FEATURES,
    )
