"""``proxy_weights.sync`` never leaves the proxy without a serving frontend between two of its commands.

Each runtime API command takes effect alone, so the order matters: a frontend lowered to 0 before
the other is raised from 0 leaves a moment in which HAProxy answers every request with its own 503
("No server is available"). The fake API below applies each command to its slots and checks, after
every command, that some slot still serves whenever one served before the sync began.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from servecert.reference_impl.operator import proxy_weights
from servecert.reference_impl.operator.proxy_weights import Frontend
from servecert.reference_impl.traffic_split.runtime_api import DRAIN, MAINT, Server

PORT = 8000


@dataclass
class RecordingApi:
    """The runtime API's calls that ``sync`` makes, applied to in-memory slots."""

    slots: dict[str, Server]
    commands: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    def _serves(self) -> bool:
        return any(s.weight > 0 and s.in_service for s in self.slots.values())

    def _apply(self, command: str, slot: str, **change: object) -> None:
        served_before = self._serves()
        self.slots[slot] = Server(**{**self.slots[slot].__dict__, **change})  # type: ignore[arg-type]
        self.commands.append(command)
        if served_before and not self._serves():
            self.gaps.append(command)

    async def servers(self) -> dict[str, Server]:
        return dict(self.slots)

    async def sessions(self) -> dict[str, int]:
        return {}

    async def assign(self, slot: str, address: str, port: int, weight: int) -> None:
        self._apply(f"assign {slot}", slot, address=address, port=port, weight=weight, admin_state=0)

    async def set_weight(self, slot: str, weight: int) -> None:
        self._apply(f"weight {slot} {weight}", slot, weight=weight)

    async def command(self, line: str) -> str:
        slot = line.split()[2].split("/")[1]
        self._apply(line, slot, admin_state=0)
        return ""

    async def drain(self, slot: str) -> None:
        self._apply(f"drain {slot}", slot, admin_state=DRAIN)

    async def release(self, slot: str) -> None:
        self._apply(f"maint {slot}", slot, admin_state=MAINT)


def slot(name: str, ip: str, weight: int, admin_state: int = 0) -> Server:
    return Server(name, ip, PORT, weight, True, admin_state)


def frontends(*names: str) -> dict[str, Frontend]:
    return {n: Frontend(n, f"127.0.9.{i + 1}", PORT) for i, n in enumerate(names)}


@pytest.mark.parametrize(("first", "second"), [("fe-a", "fe-b"), ("fe-b", "fe-a")])
async def test_a_swap_from_one_frontend_to_the_other_raises_before_it_lowers(first: str, second: str) -> None:
    """Whichever name sorts first, all traffic moving from ``first`` to ``second`` never passes through zero."""
    fes = frontends("fe-a", "fe-b")
    api = RecordingApi({"fe1": slot("fe1", fes[first].ip, 256), "fe2": slot("fe2", fes[second].ip, 0)})
    await proxy_weights.sync(api, fes, {first: 0, second: 256}, set())  # type: ignore[arg-type]
    assert api.gaps == [], api.commands
    assert api.slots["fe1"].weight == 0 and api.slots["fe2"].weight == 256


async def test_a_new_frontend_is_in_service_before_the_old_one_is_lowered() -> None:
    fes = frontends("fe-old", "fe-z-new")  # NB: the new one sorts last
    free = Server("fe2", "127.0.0.1", 1, 0, False, MAINT)
    api = RecordingApi({"fe1": slot("fe1", fes["fe-old"].ip, 256), "fe2": free})
    await proxy_weights.sync(api, fes, {"fe-z-new": 256, "fe-old": 0}, set())  # type: ignore[arg-type]
    assert api.gaps == [], api.commands
    assert api.commands.index("assign fe2") < api.commands.index("weight fe1 0")


async def test_every_order_of_three_frontends_keeps_one_serving() -> None:
    """Each frontend in turn takes all the traffic from the other two, from every starting point."""
    names = ("fe-a", "fe-b", "fe-c")
    fes = frontends(*names)
    for before, after in itertools.permutations(names, 2):
        api = RecordingApi({f"fe{i + 1}": slot(f"fe{i + 1}", fes[n].ip, 256 if n == before else 0) for i, n in enumerate(names)})
        await proxy_weights.sync(api, fes, {n: 256 if n == after else 0 for n in names}, set())  # type: ignore[arg-type]
        assert api.gaps == [], (before, after, api.commands)


async def test_a_frontend_deleted_without_a_drain_loses_its_slot_only_after_its_replacement_is_weighted() -> None:
    """The only weighted frontend's pod went without a drain (evicted, killed): its slot still holds all the weight.

    Releasing it first (as ``sync`` once did) left HAProxy no usable slot until the replacement was
    assigned — a window of HAProxy's own 503 ("No server is available", ``<NOSRV>``). The replacement
    takes a slot already in maintenance, is weighted, and only then does the gone frontend's slot go.
    """
    fes = frontends("fe-new")
    api = RecordingApi(
        {
            "fe1": slot("fe1", "127.0.9.99", 256),  # NB: the gone frontend's address: no live pod has it
            "fe2": slot("fe2", "127.0.0.1", 0, admin_state=MAINT),
        }
    )
    await proxy_weights.sync(api, fes, {"fe-new": 256}, set())  # type: ignore[arg-type]
    assert api.gaps == [], api.commands
    assert api.commands == ["assign fe2", "maint fe1"], api.commands
