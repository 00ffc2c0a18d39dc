"""Why a timing window is not trusted, and how a value that could not be read is written.

Pure data shared by telemetry (measure), records (model) and verdicts (judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Sequence


# Clocks lowered because the GPU had little to do: not a sign of a noisy or hot machine.
BENIGN_POLICIES = frozenset({"low_utilization"})


# Idle is what a GPU between tests is; applications clocks are an operator's deliberate setting.
BENIGN_REASONS = frozenset({"gpu idle", "applications clocks setting"})


def unavailable(reason: str) -> str:
    """The one spelling of a field that could not be read: ``"unavailable: <reason>"``."""
    return f"unavailable: {reason}"


def is_unavailable(value: object) -> bool:
    """True for a field that holds ``"unavailable: <reason>"`` instead of a value."""
    return isinstance(value, str) and value.startswith("unavailable")


class FlagKind(str, Enum):
    """Why a timing window is not trusted to judge a regression."""

    THROTTLED = "throttled"  # clocks held back by power, heat or the board during the window
    THROTTLED_AT_END = "throttled_at_end"  # a throttle reason still active when the window closed
    FOREIGN_PROCESS = "foreign_process"  # another process appeared on the GPU during the window
    HOST_SLOWED = "host_slowed"  # set by the verdicts: a slower host slowed both sides alike
    OVERLAP = "overlap"  # set by the verdicts: device busy time moved but the kernels' total time held


@dataclass(frozen=True)
class WindowFlag:
    """One reason not to blame a timing window's result on the code, with the line that explains it."""

    kind: FlagKind
    message: str


def window_flags(duration_s: float, throttle_s: Mapping[str, Any], throttle_reasons: Sequence[str],
                 foreign_processes: Sequence[str]) -> tuple[WindowFlag, ...]:
    """The flags of a window from its counters (values that could not be read are skipped)."""
    out: list[WindowFlag] = []
    throttled = {k: v for k, v in throttle_s.items()
                 if isinstance(v, (int, float)) and v > 0 and k not in BENIGN_POLICIES}
    if throttled:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in throttled.items())
        out.append(WindowFlag(FlagKind.THROTTLED, f"clocks throttled during the {duration_s:.2f} s window: {parts}"))
    active = [r for r in throttle_reasons if r not in BENIGN_REASONS]
    if active:
        out.append(WindowFlag(FlagKind.THROTTLED_AT_END, f"clocks throttled at the end of the window: "
                                                         f"{', '.join(active)}"))
    if foreign_processes:
        out.append(WindowFlag(FlagKind.FOREIGN_PROCESS, "process(es) appeared on the GPU during the window: "
                              + ", ".join(foreign_processes)))
    return tuple(out)
