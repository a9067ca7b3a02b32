"""Which pod events should reconcile their DGD now: a pod got its address, became Ready or stopped being Ready, began
terminating, or went.

Data flow: kopf hands every event of a DGD's pods (workers, frontends, its proxy) to
``PodTriggers.seen(pod, event type)``, which keeps each pod's last (ready, terminating) pair in
memory (with whether it has an address: a new proxy replica must be given its weights before it can become
Ready) and answers True when it changed; the handler then reconciles the owning DGD
(``dgd_owner``) through ``OneAtATime.run_soon``, so a burst of events costs at most two reconciles.

Why: seed 001 4.3.3 and the rollout issue ask for weights that change as workers become ready,
not on a timer. The 1 s resync alone applied a readiness change up to a second (more under load)
late; it stays as the level-based safety net. A pod first seen not ready (one the operator just
created) is no change; a pod first seen Ready (after an operator restart) is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servecert.protocol import kube_names as kn
from servecert.protocol.kube_objects import Pod
from servecert.reference_impl.operator.inference_service import pod_ready


def dgd_owner(pod: Pod) -> tuple[str, str] | None:
    """(name, uid) of the DGD that owns the pod, or None."""
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == kn.DGD_KIND and ref.get("name") and ref.get("uid"):
            return str(ref["name"]), str(ref["uid"])
    return None


@dataclass
class PodTriggers:
    _last: dict[str, tuple[bool, bool, bool]] = field(default_factory=dict)

    def seen(self, pod: Pod, event_type: str | None) -> bool:
        """True when this event changes what a reconcile of the pod's DGD would do with it."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self._last.pop(uid, None)
            return True
        now = (pod_ready(pod), bool(meta.get("deletionTimestamp")), bool((pod.get("status") or {}).get("podIP")))
        before = self._last.get(uid, (False, False, False))
        self._last[uid] = now
        return now != before
