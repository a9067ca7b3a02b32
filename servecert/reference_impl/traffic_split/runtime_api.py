"""HAProxy's runtime API, over its TCP admin socket: fill a server slot, set weights, read the state back.

One command per connection (the socket closes after answering), each bounded by a timeout. An
answer HAProxy prefixes as an error raises ``RuntimeApiError`` with the command and the answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from servecert.reference_impl.traffic_split.haproxy import BACKEND

TIMEOUT_S = 5.0


class RuntimeApiError(RuntimeError):
    """HAProxy refused a runtime command; the message holds the command and its answer."""


MAINT = 0x01
"""HAProxy's admin-state bit of forced maintenance (``state maint``; the config's ``disabled`` sets it too)."""
DRAIN = 0x08
"""Forced drain (``state drain``)."""


@dataclass(frozen=True)
class Server:
    name: str
    address: str
    port: int
    weight: int
    operational: bool
    admin_state: int

    @property
    def in_service(self) -> bool:
        """Takes new requests at its weight: neither in maintenance nor draining."""
        return not self.admin_state & (MAINT | DRAIN)


@dataclass(frozen=True)
class RuntimeApi:
    host: str
    port: int

    async def command(self, line: str, check: bool = True) -> str:
        """Send one command; ``check=False`` for listings whose column names would read as refusals."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), TIMEOUT_S)
        try:
            writer.write(line.encode() + b"\n")
            await writer.drain()
            answer = (await asyncio.wait_for(reader.read(), TIMEOUT_S)).decode()
        finally:
            writer.close()
        lowered = answer.lower()
        if check and any(word in lowered for word in ("unknown command", "no such", "require", "invalid", "not found", "error")):
            raise RuntimeApiError(f"HAProxy refused {line!r}: {answer.strip()}")
        return answer

    async def assign(self, slot: str, address: str, port: int, weight: int) -> None:
        """Point a slot at a frontend and put it in service with ``weight``."""
        await self.command(f"set server {BACKEND}/{slot} addr {address} port {port}")
        await self.command(f"set weight {BACKEND}/{slot} {weight}")
        await self.command(f"set server {BACKEND}/{slot} state ready")

    async def set_weight(self, slot: str, weight: int) -> None:
        """New requests only: connections (streams) already on the slot are untouched."""
        await self.command(f"set weight {BACKEND}/{slot} {weight}")

    async def drain(self, slot: str) -> None:
        """No new requests to the slot; its streams in flight go on."""
        await self.command(f"set server {BACKEND}/{slot} state drain")

    async def release(self, slot: str) -> None:
        """Take a drained slot out of service (call once its streams ended)."""
        await self.command(f"set server {BACKEND}/{slot} state maint")

    async def servers(self) -> dict[str, Server]:
        """``show servers state`` of the backend, by slot name."""
        answer = await self.command(f"show servers state {BACKEND}")
        out: dict[str, Server] = {}
        for line in answer.splitlines():
            fields = line.split()
            if len(fields) < 19 or not fields[0].isdigit():
                continue
            # be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight ... srv_port(18)
            out[fields[3]] = Server(fields[3], fields[4], int(fields[18]), int(fields[7]), fields[5] == "2", int(fields[6]))
        return out

    async def sessions(self) -> dict[str, int]:
        """Current sessions (streams in flight) per slot, from ``show stat``'s ``scur`` column."""
        answer = await self.command("show stat", check=False)
        header: list[str] = []
        out: dict[str, int] = {}
        for line in answer.splitlines():
            if line.startswith("# "):
                header = line[2:].split(",")
                continue
            fields = line.split(",")
            if not header or len(fields) < len(header) or fields[0] != BACKEND:
                continue
            row = dict(zip(header, fields, strict=False))
            if row.get("svname") not in ("BACKEND", "FRONTEND") and row.get("scur", "").isdigit():
                out[row["svname"]] = int(row["scur"])
        return out
