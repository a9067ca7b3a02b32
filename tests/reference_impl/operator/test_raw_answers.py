"""The reconciler reads the API server's answers as JSON and hands every connection back.

It asks the kubernetes client with ``_preload_content=False`` (no pydantic model of each object):
a created pod's name comes from the answer, since a proxy replica is named by the API server
(``generateName``; reading the manifest's name raised KeyError and left a DGD with one proxy
replica, make test of 19e9130), and a write's answer is drained and released, or urllib3 drops
the connection and the next call opens a new TLS one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client
import pytest

from servecert.protocol.kube_objects import as_dgd
from servecert.reference_impl.operator import dgd_pods, reconcile
from tests.reference_impl.operator import seed_objects


@dataclass
class Answer:
    """An urllib3 answer as the client returns it with ``_preload_content=False``."""

    body: dict[str, Any]
    released: bool = False

    @property
    def data(self) -> bytes:
        self.released = True
        return json.dumps(self.body).encode()

    def drain_conn(self) -> None:
        pass

    def release_conn(self) -> None:
        self.released = True


@dataclass
class Core:
    """The calls of ``CoreV1Api`` the test makes: creating pods (named by the server) and deleting them."""

    answers: list[Answer] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any], **kwargs: Any) -> Answer:
        assert kwargs.get("_preload_content") is False, kwargs
        name = body["metadata"].get("name") or f"{body['metadata']['generateName']}{len(self.created)}"
        self.created.append(body)
        self.answers.append(Answer({"kind": "Pod", "metadata": {"name": name, "namespace": namespace}}))
        return self.answers[-1]

    def delete_namespaced_pod(self, name: str, namespace: str, **kwargs: Any) -> Answer:
        assert kwargs.get("_preload_content") is False, kwargs
        self.answers.append(Answer({"kind": "Status", "status": "Success"}))
        return self.answers[-1]


def test_pods_named_by_the_server_are_created_and_every_answer_released(monkeypatch: pytest.MonkeyPatch) -> None:
    core = Core()
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", lambda _api: core)
    reconciler = reconcile.Reconciler(api=object())
    proxy = dgd_pods.proxy_pod(as_dgd(seed_objects.dgd()), reconciler.images)
    assert "name" not in proxy["metadata"], proxy["metadata"]
    reconciler._create_pods("ns", [proxy, proxy])
    reconciler._ignore(404, core.delete_namespaced_pod, "gone", "ns")
    assert len(core.created) == 2
    assert all(a.released for a in core.answers), core.answers
