"""sglang-router 0.3.2 behind the adapter contract (registered as ``sglang-router``; extra ``servecert[sglang-router]``).

The router (SGLang Model Gateway, Rust, PyPI ``sglang-router``) runs unmodified in P/D mode:
``python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP_PORT
--decode URL``. Per request it picks a prefill and a decode engine and sends both the same
body at once, with ``bootstrap_host`` (the prefill URL's host), ``bootstrap_port`` (the port
given with that prefill) and a random ``bootstrap_room``; it returns the decode engine's answer
once the prefill engine's has ended. The fake engines speak that pairing (``pd_protocol``
``sglang``, ``servecert.fakes.pd_wire``): each prefill's bootstrap port is its engine's HTTP port. Workers
join through ``POST /workers`` and leave through ``DELETE /workers/{id}``; on a cluster its
Kubernetes service discovery finds the engine pods (a prefill's bootstrap port in its
``sglang.ai/bootstrap-port`` annotation). See ``docs/pd-routers.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecert.adapters.contract import PD_SGLANG, AdapterError, ImplementationMetadata, WorkerRef
from servecert.adapters.pd_routers import deployment
from servecert.adapters.pd_routers.deployment import RouterHttp, host_port
from servecert.adapters.pd_routers.implementation import RouterImplementation

VERSION = "0.3.2"
BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"
"""Where its Kubernetes service discovery reads a prefill pod's bootstrap port (its default ``bootstrap_port_annotation``)."""


@dataclass(frozen=True)
class SglangRouter:
    name: str = "sglang-router"
    pd_protocol: str = PD_SGLANG
    module: str = "sglang_router"
    install: str = "pip install 'servecert[sglang-router]' (sglang-router==0.3.2)"

    def argv(self, port: int, metrics_port: int, prefill: list[WorkerRef], decode: list[WorkerRef], policy: str) -> list[str]:
        argv = [*deployment.python_module("sglang_router.launch_router"), "--pd-disaggregation"]
        for ref in prefill:
            argv += ["--prefill", ref.url, str(host_port(ref))]
        for ref in decode:
            argv += ["--decode", ref.url]
        return [*argv, *deployment.listen_args(port, metrics_port, policy)]

    def discovery_argv(
        self, port: int, metrics_port: int, namespace: str, prefill: dict[str, str], decode: dict[str, str], engine_port: int, policy: str
    ) -> list[str]:
        return [*deployment.python_module("sglang_router.launch_router"), "--pd-disaggregation",
                *deployment.discovery_args(namespace, prefill, decode, engine_port),
                *deployment.listen_args(port, metrics_port, policy)]  # fmt: skip

    def prefill_annotations(self, engine_port: int) -> dict[str, str]:
        return {BOOTSTRAP_ANNOTATION: str(engine_port)}  # NB: each prefill's bootstrap port is its engine's HTTP port

    async def add(self, http: RouterHttp, ref: WorkerRef) -> None:
        body: dict[str, object] = {"url": ref.url, "worker_type": ref.role}
        if ref.role == "prefill":
            body["bootstrap_port"] = host_port(ref)
        status, answer = await http.call("POST", "/workers", json=body)
        if status not in (200, 201, 202):
            raise AdapterError(f"sglang-router refused to add {ref.url}: HTTP {status} {answer!r}")

    async def remove(self, http: RouterHttp, ref: WorkerRef) -> None:
        listed = (await http.workers()).get(ref.url)
        if listed is None:
            return
        status, answer = await http.call("DELETE", f"/workers/{listed['id']}")
        if status not in (200, 202, 204):
            raise AdapterError(f"sglang-router refused to remove {ref.url}: HTTP {status} {answer!r}")


def implementation() -> RouterImplementation:
    """The entry point ``sglang-router``."""
    return RouterImplementation(
        kind=SglangRouter(),
        metadata=ImplementationMetadata(
            organization="SGLang project",
            project="sglang-router (SGLang Model Gateway)",
            url="https://github.com/sgl-project/sglang/tree/main/sgl-model-gateway",
            version=deployment.installed_version("sglang-router", VERSION),
            contact=("servecert maintainers (adapter: servecert/adapters/pd_routers)",),
        ),
        supported_features=deployment.FEATURES,
    )
