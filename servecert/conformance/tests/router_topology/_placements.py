"""Cluster shapes of the router tests, as data: where each worker sits for a given level.

Two workers on different *sides* differ at the tested level and agree on every broader one
(sides of a rack test share a zone; sides of a host test share a zone and a rack), so a test of
level L exercises exactly the L boundary. ``missing`` drops the level's label, as a pod whose
topology label was never injected.

The shapes that tell the rule from its shortcuts move one label at a time away from a prefill
worker's placement: ``agreeing_only_at`` keeps the level's value and changes every finer and
broader one (a router comparing every label, or the path from the broadest level down, finds no
match); ``differing_only_at`` changes the level's value alone (a router comparing another level,
the host or the zone, finds a match); ``sharing_nothing`` changes them all (a fallback that stays
"near" the prefill skips it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servecert.adapters.contract import WorkerSpec
from servecert.conformance.suite.test_case import ENVIRONMENTS, Case

LEVELS = ("zone", "rack", "host")
CLUSTER_LEVEL = "rack"
"""The one level a router test's cases run at on a cluster (the suite's choice, not the seed's). The process
environment judges the router at every level; what a cluster adds is the path to it (the operator's injection and
labels, the Downward API files, registration through the API server), which does not change with the level, and
OPERATOR-TOPOLOGY judges the operator's labels and injection at each level. A rack case's sides share a zone, so it
also shows the broader level's label flowing from each worker's own node. The zone and host cases took 156 s of
case time on a cluster one at a time; leaving them to the process environment shortened the cluster step by 76 s
(docs/timings.md, 2026-12-02)."""
POLICIES = ("fail", "fallback")
MODEL = "servecert-model"


def level_case(case_id: str, params: Mapping[str, Any]) -> Case:
    """A case at ``params["level"]``: in every environment at ``CLUSTER_LEVEL``, in process alone at the others."""
    return Case(case_id, params, environments=ENVIRONMENTS if params["level"] == CLUSTER_LEVEL else frozenset({"process"}))


def domains(level: str, side: int) -> dict[str, str]:
    zone = f"z{side}" if level == "zone" else "z0"
    rack = f"{zone}-r{side}" if level in ("zone", "rack") else f"{zone}-r0"
    host = f"{rack}-h{side}"
    return {"zone": zone, "rack": rack, "host": host}


def missing(level: str, side: int = 0) -> dict[str, str]:
    placed = domains(level, side)
    del placed[level]
    return placed


def agreeing_only_at(level: str, base: Mapping[str, str]) -> dict[str, str]:
    """``base``'s value at ``level``; a value of its own at every other level, finer and broader."""
    return {lv: value if lv == level else f"{value}-elsewhere" for lv, value in base.items()}


def differing_only_at(level: str, base: Mapping[str, str]) -> dict[str, str]:
    """``base``'s values at every level but ``level``, where it has a value of its own."""
    return {lv: f"{value}-other" if lv == level else value for lv, value in base.items()}


def sharing_nothing(base: Mapping[str, str]) -> dict[str, str]:
    """A value of its own at every level of ``base``."""
    return {lv: f"{value}-far" for lv, value in base.items()}


def worker(role: str, placed: Mapping[str, str], name: str = "") -> WorkerSpec:
    return WorkerSpec(role=role, name=name, domains=dict(placed))


def prefill(level: str, side: int, name: str = "") -> WorkerSpec:
    return worker("prefill", domains(level, side), name)


def decode(level: str, side: int, name: str = "") -> WorkerSpec:
    return worker("decode", domains(level, side), name)


def unlabelled_decode(level: str, name: str = "") -> WorkerSpec:
    return worker("decode", missing(level), name)


def unlabelled_prefill(level: str, name: str = "") -> WorkerSpec:
    return worker("prefill", missing(level), name)


def unlabelled_prefill_beside_decode(level: str, decode_unlabelled_too: bool = False) -> list[WorkerSpec]:
    """The only prefill worker lacks the level's label; a decode worker shares every other label, another is elsewhere.

    With ``decode_unlabelled_too`` the decode worker beside it lacks the level's label as well: two missing values are
    not a shared domain (a router comparing ``domains.get(level)`` on both sides finds them equal).
    """
    beside = unlabelled_decode(level, "unlabelled-decode") if decode_unlabelled_too else decode(level, 0)
    return [unlabelled_prefill(level, "unlabelled"), beside, decode(level, 1)]
