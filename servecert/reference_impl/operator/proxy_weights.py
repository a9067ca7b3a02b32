"""Making the DGD's HAProxy match a plan: frontends in slots, weights set, retiring frontends drained.

Data flow: ``dgd_rollout.plan`` says which frontend pods serve with which weight and which
drain; ``sync`` reads HAProxy's slots back (``show servers state``), points a free slot at each
serving frontend that has none, sets weights that differ (``set weight``: new requests only,
streams in flight stay where they are) — raises before lowers, so no moment between two
commands leaves every slot at 0 — then puts slots of pods that are gone back in maintenance (after
the raises: a frontend deleted without a drain may have held the only weight), drains the
retiring ones, and returns the streams still open on each draining frontend (``show stat``).
The caller then deletes a drained frontend, which finishes those streams on SIGTERM while
HAProxy keeps their connections. Level-based like the rest of the operator: the proxy is read
every time, so a restarted operator (or proxy) converges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from servecert.reference_impl.traffic_split.haproxy import BACKEND
from servecert.reference_impl.traffic_split.runtime_api import DRAIN, MAINT, RuntimeApi, Server


@dataclass(frozen=True)
class Frontend:
    name: str
    ip: str
    port: int


def _outside_maint(server: Server) -> bool:
    """Not in maintenance: serving, draining, or still pointing at a frontend; ``release`` puts it back."""
    return not server.admin_state & MAINT


def _slot_of(servers: Mapping[str, Server], frontend: Frontend) -> str | None:
    for slot, server in sorted(servers.items()):
        if server.address == frontend.ip and server.port == frontend.port:
            return slot
    return None


def _raises_first(servers: Mapping[str, Server], frontends: Mapping[str, Frontend], weights: Mapping[str, int]) -> list[tuple[str, int]]:
    """The weights in an order that never leaves the proxy with less than it will have: raises first, then lowers.

    Each command takes effect alone; lowering one frontend to 0 before raising another from 0
    would leave a moment with no server, which HAProxy answers with its own 503.
    """

    def serving_weight(name: str) -> int:
        slot = _slot_of(servers, frontends[name])
        return servers[slot].weight if slot is not None and servers[slot].in_service else 0

    return sorted(weights.items(), key=lambda item: (item[1] < serving_weight(item[0]), item[0]))


async def sync(api: RuntimeApi, frontends: Mapping[str, Frontend], weights: Mapping[str, int], draining: set[str]) -> dict[str, int]:
    """Apply; returns name -> streams in flight for each draining frontend that still has a slot."""
    servers = await api.servers()
    known = {(f.ip, f.port) for f in frontends.values()}
    # NB: slots already out of service first: a slot of a frontend that is gone may still be the only one weighted.
    free = sorted((slot for slot, s in servers.items() if (s.address, s.port) not in known), key=lambda n: (_outside_maint(servers[n]), n))
    for name, weight in _raises_first(servers, frontends, weights):
        frontend = frontends[name]
        found = _slot_of(servers, frontend)
        if found is None:
            if not free:
                raise RuntimeError(f"the proxy has no free slot for frontend {name}; raise dgd_pods.PROXY_SLOTS")
            taken = free.pop(0)
            if _outside_maint(servers[taken]):
                await api.release(taken)  # NB: a slot is pointed elsewhere only while out of service
            await api.assign(taken, frontend.ip, frontend.port, weight)
            continue
        server = servers[found]
        if server.weight != weight:
            await api.set_weight(found, weight)
        if not server.in_service:
            await api.command(f"set server {BACKEND}/{found} state ready")
    for slot in free:  # NB: after the raises: the frontends that take over are weighted before these go
        if _outside_maint(servers[slot]):
            await api.release(slot)
    open_streams: dict[str, int] = {}
    sessions: dict[str, int] | None = None
    for name in sorted(draining):
        retiring = frontends.get(name)
        drained = _slot_of(servers, retiring) if retiring else None
        if drained is None:
            continue
        if not servers[drained].admin_state & DRAIN:
            await api.drain(drained)
        if sessions is None:
            sessions = await api.sessions()
        open_streams[name] = sessions.get(drained, 0)
    return open_streams
