"""Seed 004: a spec change reaches the pods, each replica replaced whole, the new pods labelled with the new generation.

The seed labels every pod ``fusioninfer.io/revision: <InferenceService generation>`` "for update
detection", and gives pod lifecycle to one LeaderWorkerSet per replica, which replaces a group
whose template changed as a whole (all its pods deleted and created again). So, after a change to
every role's template (an env var of the first container): every pod of the service must end up
running the new template (read from the pods' own spec), labelled with the new generation, Ready,
and the status must say it observed that generation. Over the whole update, watched from the API
server, no replica may ever have live pods (not terminating) of two templates at once: a
replica is a gang, and half of it on a new template is neither the old replica nor the new one.

Cases: story 2 (P/D, six single-pod replicas in two roles) and story 3 (two replicas of four
pods): a replica of one pod cannot show mixing, so story 3 is where a pod-by-pod update is
caught. The pods land on a node of the case's own (an extended resource only it offers).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.inference_service import _own_node as own_node
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects

MARK = "SERVECERT_TEMPLATE"
"""The env var the change sets on every role's first container: which template a pod runs, read from its spec."""
NEW = "2"


def template_of(pod: kube_objects.Pod) -> str:
    """The value of ``MARK`` in the pod's first container ("" before the change)."""
    return kc.env_value(pod, MARK) or ""


def changed_roles(body: dict[str, Any]) -> list[dict[str, Any]]:
    roles = copy.deepcopy(manifests.roles(body))
    for role in roles:
        container = role["template"]["spec"]["containers"][0]
        container["env"] = [*(container.get("env") or []), {"name": MARK, "value": NEW}]
    return roles


def replica_of(pod: kube_objects.Pod) -> tuple[str, str]:
    labels = pod["metadata"].get("labels") or {}
    return str(labels.get(kn.IS_ROLE_LABEL)), str(labels.get(kn.IS_REPLICA_LABEL))


def replicas_must_never_mix_templates(events: Sequence[tuple[float, str, kube_objects.Pod]], what: str) -> None:
    """Replay the watch: after every event, each replica's live pods (not terminating) run one template."""
    live: dict[str, kube_objects.Pod] = {}
    start = events[0][0] if events else 0.0
    for at, kind, pod in events:
        name = pod["metadata"]["name"]
        if kind == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            live.pop(name, None)
        else:
            live[name] = pod
        replica = replica_of(pod)
        members = [p for p in live.values() if replica_of(p) == replica]
        templates = {template_of(p) or "old" for p in members}
        if len(templates) > 1:
            names = sorted(f"{p['metadata']['name']}={template_of(p) or 'old'}" for p in members)
            raise AssertionError(
                f"{what}: replica {replica[0]}-{replica[1]} ran two templates at once {at - start:.1f}s into the update: {names}; "
                "seed 004 replaces a replica as one LeaderWorkerSet group, whole"
            )


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    body = await own_node.deploy(env, ctx.case.id)
    service, total = body["metadata"]["name"], own_node.total_pods(body)
    selector = f"{kn.IS_SERVICE_LABEL}={service}"

    async def serving(template: str, generation: int | None) -> list[kube_objects.Pod] | None:
        pods = [p for p in await kc.pods(env, selector) if not p["metadata"].get("deletionTimestamp")]
        done = len(pods) == total and all(kc.pod_ready(p) and template_of(p) == template for p in pods)
        if generation is not None:
            found = await kc.get(env, kc.ISVC, service)
            labels_ok = all(kube_objects.labels_of(p).get(kn.IS_REVISION_LABEL) == str(generation) for p in pods)
            observed = kube_objects.status_of(found).get("observedGeneration") == generation
            done = done and labels_ok and observed
        return pods if done else None

    await kc.wait_for(lambda: serving("", None), t.pods_ready_s, f"{ctx.case.id}: {total} pods of {service} Ready")
    history = kc.PodHistory(env).start()
    try:
        await kc.patch(env, kc.ISVC, service, {"spec": {"roles": changed_roles(body)}})
        found = await kc.get(env, kc.ISVC, service)
        generation = kube_objects.generation_of(found)
        what = f"{ctx.case.id}: after a change to every role's template (generation {generation})"
        try:
            await kc.wait_for(lambda: serving(NEW, generation), t.inference_service_update_s, what)
        except AssertionError:
            pods = await kc.pods(env, selector)
            found = await kc.get(env, kc.ISVC, service)
            seen = sorted(
                f"{p['metadata']['name']}: template {template_of(p) or 'old'}, revision "
                f"{kube_objects.labels_of(p).get(kn.IS_REVISION_LABEL)}, ready {kc.pod_ready(p)}"
                + (", terminating" if p["metadata"].get("deletionTimestamp") else "")
                for p in pods
            )
            raise AssertionError(
                f"{what}: within {t.inference_service_update_s:g}s not every pod ran the new template, Ready, labelled revision "
                f"{generation} with status.observedGeneration {generation}; observedGeneration "
                f"{kube_objects.status_of(found).get('observedGeneration')}; pods: {seen}"
            ) from None
    finally:
        history.stop()
    replicas_must_never_mix_templates(list(history.events), what)


TEST = ConformanceTest(
    short_name="InferenceServiceRollingUpdate",
    description="A change to every role's template reaches every pod, each replica replaced whole (never two templates at "
    "once), labelled with the new generation as its revision; status.observedGeneration follows.",
    features=(features.INFERENCE_SERVICE_UPDATE,),
    environments=frozenset({"cluster"}),
    slow=True,
    cases=(Case("story2"), Case("story3")),
    check=check,
    seed=SeedRef(
        "004",
        "LeaderWorkerSet (LWS) Workload Management",
        "fusioninfer.io/revision | InferenceService generation for update detection |",
        note="The seed gives pod lifecycle to one LWS per replica; LWS replaces a group whose template changed as a whole. "
        "The suite does not judge the order replicas are replaced in: one LWS per replica would replace them all at once.",
    ),
)
