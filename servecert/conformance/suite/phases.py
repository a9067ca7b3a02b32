"""Which phase of a case failed, so a report says "setup failed at cluster bring-up", not "call failed".

A case goes through three phases: ``setup`` (the environment: the embedded cluster brought up,
the implementation's operator installed, the case's namespace; and the deployment the check
needs becoming ready), ``check`` (the rule itself), and ``cleanup``. A failure in setup still
fails the case: a conformant implementation installs and deploys within its bounds. But the
reader needs to know that the rule was never reached, which step stopped it, how long that took,
and which log says why; ``SetupFailed`` carries those, and ``describe`` turns any failure into
the phase, step and log the report shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SETUP = "setup"
CHECK = "check"
CLEANUP = "cleanup"

CLUSTER_BRING_UP = "cluster bring-up"
OPERATOR_INSTALL = "operator install"
CASE_NAMESPACE = "case namespace"
DEPLOYMENT_READY = "deployment readiness"

# NB: the bring-up, install and build errors name their logs in their messages; the first one wins.
_LOG = re.compile(r"(?:Logs?:?\s+|log\s+)(?P<path>/[^\s:,;'\"]+)|(?P<file>/[^\s:,;'\"]+\.log)\b")


def log_named_in(text: str) -> str:
    """The first log file or log directory a message names ('' when none)."""
    found = _LOG.search(text)
    if found is None:
        return ""
    return found["path"] or found["file"] or ""


class SetupFailed(Exception):
    """A step of a case's setup failed (not an assertion of the check); the message names step, time and log."""

    def __init__(self, step: str, cause: BaseException, elapsed_s: float, log: str | Path | None = None) -> None:
        self.step = step
        self.cause = cause
        self.elapsed_s = elapsed_s
        self.log = str(log) if log else log_named_in(str(cause))
        where = f"\nlog: {self.log}" if self.log else ""
        super().__init__(f"setup failed at {step} after {elapsed_s:.1f} s: {type(cause).__name__}: {cause}{where}")


class DeploymentNotReady(AssertionError):
    """The deployment a check needs did not become ready within its bound: a failure in setup."""

    step = DEPLOYMENT_READY


@dataclass(frozen=True)
class Phase:
    """Where a failure happened: ``phase`` (setup, check, cleanup), the setup step, the log to read."""

    phase: str
    step: str = ""
    log: str = ""

    def label(self) -> str:
        return f"{self.phase}: {self.step}" if self.step else self.phase


def describe(failure: BaseException | None, cleanup_failed: bool) -> Phase:
    """The phase a case's outcome failed in (``check`` for a failed assertion of the rule)."""
    if isinstance(failure, SetupFailed):
        return Phase(SETUP, failure.step, failure.log)
    if isinstance(failure, DeploymentNotReady):
        return Phase(SETUP, failure.step, log_named_in(str(failure)))
    if failure is None and cleanup_failed:
        return Phase(CLEANUP)
    return Phase(CHECK)
