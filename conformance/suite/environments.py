"""Where a case runs: a fresh environment per case, created by name.

``process``: fake engines on loopback addresses in the suite's own process
(``fixtures.process_env.ProcessEnvironment``); router and planner profiles run here in seconds.
``cluster``: a kube-apiserver with kwok nodes; not available yet, so the runner gives tests that
need it the verdict ``wrong-environment`` and refuses ``--env cluster`` up front. Each case gets
its own environment so no engine, port or ground-truth record leaks from one case to the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fixtures.adapter import Environment

    class SuiteEnvironment(Environment, Protocol):
        """An adapter-facing ``Environment`` the suite can also close."""

        async def close(self) -> None: ...


KNOWN = ("process", "cluster")
AVAILABLE = ("process",)


class EnvironmentUnavailable(Exception):
    """The environment is known but cannot be created here; the message says which ones can."""


def check_available(name: str) -> None:
    if name not in KNOWN:
        raise EnvironmentUnavailable(f"unknown environment {name!r}; known: {', '.join(KNOWN)}")
    if name not in AVAILABLE:
        raise EnvironmentUnavailable(f"the {name} environment is not available yet; available: {', '.join(AVAILABLE)}")


def unavailable_reason(name: str) -> str:
    """Why a test that runs only in ``name`` cannot run here (empty when it can)."""
    return "" if name in AVAILABLE else f"the {name} environment is not available yet"


def create(name: str) -> SuiteEnvironment:
    """A fresh environment for one case (call its ``close()`` afterwards)."""
    check_available(name)
    from fixtures.process_env import ProcessEnvironment

    return ProcessEnvironment()
