"""The one loop of timed rounds, for wall and device time alike: a Timer times each round, a criterion ends them.

A round times every side once, in order, or (``alternate``) in reverse order every other round: A-B, B-A, the
ABBA pattern under which a linear drift cancels in the ratio. Before each round the criterion
(``model.stopping``) sees the samples so far and the seconds spent on the timer's clock since ``started``, and
says go on or stop and why; the reason travels with the samples to the record.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Sequence

from pytest_rnnperf.model.stopping import Criterion
from pytest_rnnperf.model.timing import Round, Step, Sync, Timer


@dataclass(frozen=True)
class Sampling:
    """The rounds of each side, the order the sides ran in each round ("ab", "ba"), and why they stopped."""

    rounds: tuple[tuple[Round, ...], ...]
    order: tuple[str, ...]
    stopped: str

    def samples(self, side: int) -> tuple[float, ...]:
        """Seconds per step of ``side``, one per round."""
        return tuple(r.per_step_s for r in self.rounds[side])


def sample(timer: Timer, sides: Sequence[tuple[Step, int]], sync: Sync, until: Criterion,
           started: float | None = None, alternate: bool = False) -> Sampling:
    """Time rounds of ``sides`` ((step, steps per round) each) until ``until`` stops them.

    ``started``: when the time budget began on ``timer.now()``'s clock (now when None).
    """
    begun = timer.now() if started is None else started
    taken: list[list[Round]] = [[] for _ in sides]
    samples: list[list[float]] = [[] for _ in sides]
    order: list[str] = []
    while not (decision := until.decide(samples, lambda: timer.now() - begun)).stop:
        turn = list(range(len(sides)))
        if alternate and len(order) % 2 == 1:
            turn.reverse()
        for k in turn:
            step, steps = sides[k]
            done = timer.block(step, steps, sync)
            taken[k].append(done)
            samples[k].append(done.per_step_s)
        order.append("".join(string.ascii_lowercase[k] for k in turn))
    return Sampling(tuple(tuple(r) for r in taken), tuple(order), decision.reason)
