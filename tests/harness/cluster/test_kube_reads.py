"""The facade's pod reads give the API server's own JSON, and an expired watch says so as a 410.

The reads skip the client's models (``kube_raw.from_response``, ``kube_raw.RawWatch``, which the
operator and the fakes share): what the suite's verdicts read, managedFields times among them (the
rollout timeline is timed by them), must be the server's form, and the pod watch's caller relists
only on an ``ApiException`` 410.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from servecert.harness.cluster import kube
from servecert.protocol import kube_objects, kube_raw, waiting
from tests.harness.cluster import checks


@pytest.mark.cluster
def test_a_listed_and_a_watched_pod_are_the_servers_json(api: Any) -> None:
    with checks.namespace(api, "reads") as ns:
        listed, version = kube.list_pods_at(api, ns)
        assert listed == [] and version
        kube.create_pod(api, ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "servecert/plain:1"}]}})
        seen: list[tuple[str, kube_objects.Pod]] = []

        def added() -> bool:
            seen.extend(kube.watch_pods(api, ns, version))
            return any(kind == "ADDED" for kind, _ in seen)

        waiting.until(added, timeout_s=30, what="the pod's ADDED event")
        [pod] = kube.list_pods(api, ns)
        watched = next(p for kind, p in seen if kind == "ADDED")
        assert watched["metadata"]["uid"] == pod["metadata"]["uid"]
        for found in (pod, watched):
            stamp = found["metadata"]["managedFields"][0]["time"]
            assert stamp.endswith("Z") and datetime.datetime.fromisoformat(stamp).tzinfo is not None, stamp
            assert found["spec"]["containers"][0]["image"] == "servecert/plain:1"


class _GoneResponse:
    """A watch answer whose one event is the server's "resourceVersion too old" (HTTP 200, an ERROR event)."""

    status = 200

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        yield json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}).encode()
        yield b"\n"

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def list_namespaced_pod(namespace: str, watch: bool = False, **_: Any) -> _GoneResponse:
    return _GoneResponse()


def test_an_expired_resource_version_is_raised_as_410_for_the_caller_to_list_again() -> None:
    """The client's own ``deserialize=False`` raised KeyError('raw_object') here, which the pod history only retried."""
    with pytest.raises(ApiException) as raised:
        list(kube_raw.RawWatch().stream(list_namespaced_pod, "ns", resource_version="1", timeout_seconds=5))
    assert raised.value.status == 410, raised.value
