"""A fake of cupti-python's ``cupti`` module at the library boundary: kernels that fake steps "launch"."""

from __future__ import annotations

import enum
from types import SimpleNamespace
from typing import Any, Callable


class FakeCupti:
    """Records kernels while tracing is enabled and hands them over on flush, on a clock of its own units.

    ``clock`` gives host seconds (a fake clock in tests); CUPTI's timestamps are ``units_per_ns`` units per
    nanosecond of it, as when another client of CUPTI registered its own timestamp source.
    """

    class ActivityKind(enum.IntEnum):
        MEMCPY = 1
        MEMSET = 2
        CONCURRENT_KERNEL = 10

    class ActivityMemcpyKind(enum.IntEnum):
        DTOD = 8

    def __init__(self, clock: Callable[[], float], units_per_ns: float = 1.0) -> None:
        self.clock = clock
        self.units_per_ns = units_per_ns
        self.enabled: set[int] = set()
        self.pending: list[SimpleNamespace] = []
        self.completed: Callable[[list[Any]], None] | None = None
        self.lost = False  # True: another profiler took the buffers, nothing is delivered
        self.windows = 0  # traced windows so far (each registers its callbacks once)

    def get_timestamp(self) -> int:
        """Now, in CUPTI units."""
        return int(self.clock() * 1e9 * self.units_per_ns)

    def launch(self, name: str, seconds: float, kind: int = 10) -> None:
        """A kernel (or memset/memcpy) that starts now and runs ``seconds`` on the device."""
        if kind in self.enabled:
            start = self.get_timestamp()
            self.pending.append(SimpleNamespace(kind=kind, start=start,
                                                end=start + int(seconds * 1e9 * self.units_per_ns), name=name,
                                                copy_kind=8))

    def activity_register_callbacks(self, requested: Callable[[], Any], completed: Callable[[list[Any]], None]) -> None:
        """Keep the completed-buffer callback."""
        self.completed = completed
        self.windows += 1

    def activity_enable(self, kind: int) -> None:
        """Start recording ``kind``."""
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        """Stop recording ``kind``."""
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag: int) -> None:
        """Deliver what was recorded (unless the buffers were lost)."""
        if self.completed is not None and not self.lost:
            self.completed(self.pending)
        self.pending = []
