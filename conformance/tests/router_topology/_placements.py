"""Cluster shapes of the router tests, as data: where each worker sits for a given level.

Two workers on different *sides* differ at the tested level and agree on every broader one
(sides of a rack test share a zone; sides of a host test share a zone and a rack), so a test of
level L exercises exactly the L boundary. ``missing`` drops the level's label, as a pod whose
topology label was never injected.
"""

from __future__ import annotations

from fixtures.adapter import WorkerSpec

LEVELS = ("zone", "rack", "host")
MODEL = "servecert-model"


def domains(level: str, side: int) -> dict[str, str]:
    zone = f"z{side}" if level == "zone" else "z0"
    rack = f"{zone}-r{side}" if level in ("zone", "rack") else f"{zone}-r0"
    host = f"{rack}-h{side}"
    return {"zone": zone, "rack": rack, "host": host}


def missing(level: str, side: int = 0) -> dict[str, str]:
    placed = domains(level, side)
    del placed[level]
    return placed


def prefill(level: str, side: int, name: str = "") -> WorkerSpec:
    return WorkerSpec(role="prefill", name=name, domains=domains(level, side))


def decode(level: str, side: int, name: str = "") -> WorkerSpec:
    return WorkerSpec(role="decode", name=name, domains=domains(level, side))


def unlabelled_decode(level: str, name: str = "") -> WorkerSpec:
    return WorkerSpec(role="decode", name=name, domains=missing(level))
