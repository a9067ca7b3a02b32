"""The API server's own JSON, as the kubernetes client received it: no client models.

Data flow: a call of the client with ``_preload_content=False`` -> ``from_response`` / ``items_of``
-> plain dicts (camelCase, as in YAML) named by the views in ``kube_objects``; a watch through
``RawWatch`` -> events whose ``object`` is such a dict.

Why: the client builds a pydantic model of every object it reads, and each caller here turned it
back into a dict. In a rollout's certify run that was a quarter of the suite's CPU (the pod watch
and the pollers read every pod version), a quarter of the reference operator's (its 1 s resync lists
each DGD's pods) and a third of the service proxy's (its watch of every pod in the cluster).
One copy for the suite, the reference operator and the fakes, which import none of each other.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import watch


def from_response(response: Any) -> Any:
    """The JSON of an answer read with ``_preload_content=False`` (the client raised on an error status)."""
    return json.loads(response.data)


def items_of(response: Any) -> list[Any]:
    """The ``items`` of a list answer read with ``_preload_content=False``."""
    return list(from_response(response).get("items") or [])


class RawWatch(watch.Watch):  # type: ignore[misc]
    """A watch whose events carry the server's JSON as it came (``object`` and ``raw_object`` alike).

    NB: not the stream's ``deserialize=False``: with it, the client (37.0.2) reads an ERROR event's
    ``raw_object``, which only its own decoding sets, so an expired resourceVersion raised KeyError
    instead of the ``ApiException`` 410 the caller lists again on.
    """

    def get_return_type(self, func: Any) -> None:
        return None


def release(response: Any) -> None:
    """Reads and drops the body of an answer read with ``_preload_content=False`` that no one needs.

    Why: urllib3 returns a connection to the client's pool only once its body was read; unread, the
    connection is dropped when the answer is collected and the next call opens a new TLS one.
    """
    response.drain_conn()
    response.release_conn()
