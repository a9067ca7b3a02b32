"""Keep a fake engine's iterations on the simulated clock when the machine wakes it late.

Data flow. While an engine stays busy, each iteration asks ``Pace.sleep_s`` how long to sleep
for its priced duration: the time left until the iteration's end *on the simulated schedule*
(the previous iteration's scheduled end plus this one's duration), not the duration itself. An
iteration that ended late, because the event loop woke the engine late or the fake's own
bookkeeping took CPU, so shortens the next sleep, down to none, until the engine is back on
schedule. When the engine goes idle (no work, blocked on KV, an injected stall) the schedule
starts afresh at the next iteration.

Why. A GPU iteration takes its time whatever the host's CPU does; a fake's ``asyncio.sleep``
returns when the loop gets to it. At time scale 4 a 5 ms late wake-up is 20 ms of simulated time
on every decode step, and on a busy 2-core machine the fakes served a planner scenario's tokens
at a TPOT of 100-108 ms where the timing model gives 83 ms: the SLA checks judged the harness's
lateness as the planner's (issue 49). Catching up keeps each engine's throughput and its
streams' mean inter-token time at the model's figures, which are what the checks' calibration
assumed; a single token may still come late, and the next ones sooner.

The catch-up is bounded (``CATCH_UP_LIMIT_S`` real seconds behind): an engine further behind
gives up the excess, counted in ``lost_s``, so a machine too starved to keep simulated time is
visible (the engine's ``servecert_engine_pace_lost_seconds_total``) rather than hidden by a burst
of instant iterations. ``made_up_s`` counts the lateness the shorter sleeps made up.
"""

from __future__ import annotations

from dataclasses import dataclass

CATCH_UP_LIMIT_S = 0.25
"""Real seconds an engine may be behind its simulated schedule and still make them up: more than the event-loop lag
measured under `stress --cpu 2` (worst 168 ms), and one simulated second at the planner scenarios' time scale of 4."""


@dataclass
class Pace:
    limit_s: float = CATCH_UP_LIMIT_S
    due_s: float | None = None
    """When (monotonic real seconds) the last iteration should have ended; None while the engine is idle."""
    made_up_s: float = 0.0
    """Real seconds of lateness made up by shortened sleeps."""
    lost_s: float = 0.0
    """Real seconds of lateness beyond ``limit_s``, given up."""

    def sleep_s(self, duration_s: float, now: float) -> float:
        """Real seconds to sleep for an iteration of ``duration_s`` (real seconds) that starts at ``now``."""
        behind = 0.0 if self.due_s is None else now - self.due_s
        if behind > self.limit_s:
            self.lost_s += behind - self.limit_s
            behind = self.limit_s
        self.due_s = now - behind + duration_s
        if behind > 0:
            self.made_up_s += min(duration_s, behind)
        return max(0.0, duration_s - behind)

    def idle(self) -> None:
        """The engine stopped iterating: the next iteration starts a new schedule."""
        self.due_s = None
