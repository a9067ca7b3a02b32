"""Kubernetes discovery for the reference frontend: engines are the WorkerMetadata objects of its namespace.

Data flow::

    every ``interval`` s (0.3): list servecert.io/v1alpha1 workermetadatas in <POD_NAMESPACE>
        with labelSelector nvidia.com/dynamo-namespace=<DYN_NAMESPACE>   (one call, <= call_timeout)
      -> {object name: Published(resourceVersion, spec.metadata)}
      -> SnapshotDiscovery.apply: register WorkerInfo.from_metadata(spec.metadata) for new or
         changed objects, unregister the engines of objects that are gone

Why objects and not files: on a cluster, engines and frontend share no folder, but both reach the
API server. Each engine creates its object when ready and deletes it on a clean stop; its pod owns
it, so the garbage collector removes it when the pod goes, even after a SIGKILL. An object with a
deletionTimestamp counts as gone already. The client is the synchronous ``kubernetes`` one, run in
a thread; an API error or timeout is logged once (and its end once) and the last view is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError as TransportError

from servecert.protocol import kube_names
from servecert.reference_impl import worker_metadata
from servecert.reference_impl.frontend.discovery import KubeDiscoverySettings, PollingDiscovery, Published

log = logging.getLogger("servecert.frontend.discovery")
POLL_INTERVAL_S = 0.3
CALL_TIMEOUT_S = 2.0


class KubernetesDiscovery(PollingDiscovery):
    """Workers from WorkerMetadata objects labelled with the frontend's Dynamo namespace.

    ``objects`` (a ``CustomObjectsApi`` or a test double) replaces the client built from
    ``kubeconfig``; building it raises ValueError naming the kubeconfig when it cannot be loaded.
    """

    def __init__(
        self,
        namespace: str,
        dynamo_namespace: str,
        kubeconfig: str | None = None,
        *,
        objects: Any = None,
        interval: float = POLL_INTERVAL_S,
        call_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        super().__init__(interval)
        self.namespace = namespace
        self.dynamo_namespace = dynamo_namespace
        self.call_timeout = call_timeout
        self._api: Any = None
        if objects is None:
            self._api = _api_client(kubeconfig)
            objects = client.CustomObjectsApi(self._api)
        self.objects = objects
        self.problem: str | None = None
        """Why the last listing failed (None when it worked); logged when it changes."""

    @classmethod
    def from_settings(cls, settings: KubeDiscoverySettings) -> KubernetesDiscovery:
        return cls(settings.namespace, settings.dynamo_namespace, settings.kubeconfig)

    async def listing(self) -> Mapping[str, Published] | None:
        try:
            # NB: _request_timeout bounds the call in its thread; wait_for is the backstop.
            items = await asyncio.wait_for(
                asyncio.to_thread(worker_metadata.live_items, self.objects, self.namespace, self.dynamo_namespace, self.call_timeout),
                self.call_timeout + 1.0,
            )
        except (ApiException, TransportError, OSError, TimeoutError, ValueError) as exc:
            self._report(worker_metadata.explain(exc, self.namespace, self.call_timeout, "frontend"))
            return None
        self._report(None)
        return {item["metadata"]["name"]: _published(item) for item in items}

    async def stop(self) -> None:
        await super().stop()
        if self._api is not None:
            self._api.close()

    def _report(self, problem: str | None) -> None:
        if problem == self.problem:
            return
        if problem is None:
            log.info("kubernetes discovery: listing works again; %d worker(s)", len(self.workers()))
        else:
            log.warning("kubernetes discovery: %s (keeping the %d known worker(s), retrying)", problem, len(self.workers()))
        self.problem = problem


def _published(item: Mapping[str, Any]) -> Published:
    return Published(str(item["metadata"].get("resourceVersion", "")), _spec_metadata(item))


def _spec_metadata(item: Mapping[str, Any]) -> Callable[[], Mapping[str, Any]]:
    def load() -> Mapping[str, Any]:
        meta = (item.get("spec") or {}).get("metadata")
        if not isinstance(meta, dict):
            raise TypeError(f"{kube_names.WM_KIND} {item['metadata']['name']} has no spec.metadata object")
        return meta

    return load


def _api_client(kubeconfig: str | None) -> Any:
    try:
        return config.new_client_from_config(config_file=kubeconfig)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        raise ValueError(f"cannot load the kubeconfig KUBECONFIG={kubeconfig}: {exc}") from None
