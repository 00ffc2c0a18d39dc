"""The host's own speed: a fixed CPU workload timed once per process, stored with every record it measured.

A case's host overhead (wall minus device time) is the code under test as much as the host: a release that
launches more kernels raises it on any host. This probe is the same interpreter work on every night, so across
processes its time moves with the host alone (a slower CPU, a loaded VM), and the judge can ask whether a step
that lost overlap ran on a slower host. Pure Python: it imports no framework.
"""

from __future__ import annotations

import functools
import statistics
import time

# Nine repetitions of ~1-2 ms each: about 15 ms once per process; the median of nine ignores a preempted one.
REPEATS = 9
ITERATIONS = 8000


def _workload(n: int = ITERATIONS) -> int:
    """Dictionary look-ups, hashing and integer arithmetic: what a framework's dispatch does between launches."""
    table = {i: str(i) for i in range(64)}
    total = 0
    for i in range(n):
        s = table[i & 63]
        total += len(s) + (i * 2654435761 & 0xFFFF)
        total ^= hash((s, i)) & 0xFF
    return total


def time_probe(repeats: int = REPEATS) -> float:
    """The median seconds of ``repeats`` runs of the fixed workload, timed now."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        _workload()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@functools.cache
def host_probe_s() -> float:
    """This process's probe time in seconds: timed at the first call, the same value for every later record."""
    return time_probe()
