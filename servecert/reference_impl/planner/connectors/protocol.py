"""The interface of a connector."""

from __future__ import annotations

from typing import Protocol

ISSUED = "issued"
UNCHANGED = "unchanged"
AWAITING_ACK = "awaiting_ack"


class Connector(Protocol):
    async def scale_to(self, prefill: int, decode: int) -> str:
        """Ask for these counts; returns ISSUED, UNCHANGED, or AWAITING_ACK (refused: previous not done)."""
        ...

    async def in_progress(self) -> bool:
        """Whether the last request has not been carried out yet (and is still awaited)."""
        ...

    async def asked(self) -> tuple[int, int] | None:
        """The (prefill, decode) counts the deployment is asked to run now, where the connector keeps them (the DGD's
        replicas); None when only the planner knows (the Virtual connector: the planner starts from the workers it sees)."""
        ...

    async def timed_out(self) -> bool:
        """Whether the last request was abandoned, never carried out: plan from the workers that run."""
        ...
