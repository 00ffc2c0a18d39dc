"""Each side's first call after build, timed: the cold cost a case pays before its steady rounds (``model.cold``).

A backend's build already runs one untimed step per side (it surfaces out-of-memory there); ``first_calls`` runs
that step, synced, on the host clock. What a process pays once, whichever case comes first (the CUDA context,
loading cuDNN and cuBLAS, their handles), is paid before it by ``once_per_process``, so a case's first call does
not depend on its place in the run. No framework is imported here.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from pytest_rnnperf.backends import INJECT_COLD_ENV, injection_for

_warmed: set[str] = set()  # what this process already paid its one-time costs for (see once_per_process)
_started: set[str] = set()  # the frameworks whose first case this process has built (see first_of_process)


def once_per_process(key: str, warm: Callable[[], None]) -> None:
    """Run ``warm`` the first time ``key`` is asked for in this process, never again."""
    if key not in _warmed:
        warm()
        _warmed.add(key)


def first_of_process(framework: str) -> bool:
    """True for the first case of ``framework`` this process builds, False after.

    That case's first call can still carry what the warm-up does not reach (a fresh runner's empty driver caches),
    so its cold costs are reported, never failed (``judge.rules.Cold``).
    """
    first = framework not in _started
    _started.add(framework)
    return first


def cold_delay_s(case_id: str, environ: Mapping[str, str] | None = None) -> float:
    """Seconds RNNPERF_INJECT_COLD_DELAY_MS adds to the cuDNN side's first call of ``case_id`` (0 when none matches)."""
    return (injection_for(case_id, INJECT_COLD_ENV, environ) or 0.0) / 1e3


def first_calls(sides: Mapping[str, Any], sync: Callable[[], None], case_id: str,
                clock: Callable[[], float] = time.perf_counter,
                sleep: Callable[[float], None] = time.sleep) -> dict[str, float]:
    """Run each side's first step after build, synced, and return its seconds by side (None sides are left out).

    The cuDNN side sleeps RNNPERF_INJECT_COLD_DELAY_MS inside this call (fault injection: no timed step sees it).
    ``clock`` and ``sleep`` are seams for a fake device's clock.
    """
    delay = cold_delay_s(case_id)
    out = {}
    for name, side in sides.items():
        if side is None:
            continue
        started = clock()
        side.step()
        if name == "cudnn" and delay:
            sleep(delay)  # injected cold cost, inside the first call only
        sync()
        out[name] = clock() - started
    return out


__all__ = ["cold_delay_s", "first_calls", "first_of_process", "once_per_process"]
