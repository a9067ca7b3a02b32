"""``servecert bench rollout``'s weight trajectory: the proxy's samples named by frontend pod, and how fast they follow workers."""

from __future__ import annotations

from typing import Any

from servecert.benchmarks import proxy_weight_sampler as sampler
from servecert.conformance.tests.rollout_isolation._verdict import Timeline


def pod(name: str, kind: str, ip: str, ready: bool = True) -> dict[str, Any]:
    image = "servecert/frontend:1.6.1" if kind == "frontend" else "servecert/fake-engine:1.6.1"
    args = [] if kind == "frontend" else ["--role", kind]
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"image": image, "args": args}]},
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


FE_OLD, FE_NEW = pod("fe-old", "frontend", "127.0.1.1"), pod("fe-new", "frontend", "127.0.1.2")
BASE = {"fe-old": FE_OLD, "fe-new": FE_NEW, "p-old": pod("p-old", "prefill", "127.0.1.3"), "d-old": pod("d-old", "decode", "127.0.1.4")}
TIMELINE = Timeline(
    [
        (10.0, dict(BASE)),
        (12.0, {**BASE, "p-new": pod("p-new", "prefill", "127.0.1.5", ready=False)}),
        (13.0, {**BASE, "p-new": pod("p-new", "prefill", "127.0.1.5")}),
        (14.0, {**BASE, "p-new": pod("p-new", "prefill", "127.0.1.5"), "d-new": pod("d-new", "decode", "127.0.1.6")}),
    ]
)
SAMPLES = [
    (9.0, {"127.0.1.1:8000": 256}),
    (11.0, {"127.0.1.1:8000": 256, "127.0.1.2:8000": 0}),
    (14.3, {"127.0.1.1:8000": 128, "127.0.1.2:8000": 128}),
    (15.0, {}),
]


def test_the_trajectory_names_frontends_from_the_rollout_start() -> None:
    since = sampler.since(SAMPLES, changed_at=11.5)
    assert [t for t, _ in since] == [11.0, 14.3, 15.0]
    assert sampler.trajectory(since, TIMELINE, changed_at=11.5) == [
        "-0.5s fe-new=0, fe-old=256",
        "+2.8s fe-new=128, fe-old=128",
        "+3.5s (no frontend in service)",
    ]


def test_each_weight_change_is_timed_from_the_last_worker_change_before_it() -> None:
    # NB: worker changes at 10 (old Ready), 13 (p-new Ready), 14 (d-new Ready); p-new created unready at 12 is none
    # -> delays 11.0-10, 14.3-14, 15.0-14
    assert sampler.reaction_times(SAMPLES, TIMELINE) == {"weight_changes": 3, "median_s": 1.0, "max_s": 1.0}


def test_a_frontend_becoming_ready_is_a_change_weights_follow() -> None:
    unready = {**BASE, "fe-new": pod("fe-new", "frontend", "127.0.1.2", ready=False)}
    timeline = Timeline([(10.0, unready), (10.8, dict(BASE))])
    assert sampler.reaction_times(SAMPLES[:2], timeline) == {"weight_changes": 1, "median_s": 0.2, "max_s": 0.2}


def test_no_weight_change_says_so() -> None:
    assert sampler.reaction_times(SAMPLES[:1], TIMELINE) == {"weight_changes": 0}
