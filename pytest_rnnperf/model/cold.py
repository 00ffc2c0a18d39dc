"""A case's cold costs: what it paid before its first timed step, in seconds.

Each side's first call after build is the step that builds cuDNN's execution plans, autotunes or compiles (a
new cuDNN once added ~1.6 s there, unseen by the steady rounds); compiled backends (torch.compile, JAX/XLA) also
say how long their compile took and whether the compile cache served it. A process's cold costs are judged
against the same costs of the case's history (``judge.rules.Cold``); a cache hit is keyed apart (the ``_cached``
tags), so a hit is never judged against misses, nor a miss against hits. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pytest_rnnperf.model.fields import RecordError, as_mapping, as_text, as_time
from pytest_rnnperf.model.metrics import COMPILE, COMPILE_CACHED, FIRST_CALL, FIRST_CALL_CACHED, SIDES, side_tag

# How a build met the compile cache: it loaded its programs (HIT), compiled them (MISS); "" where no cache took part.
HIT, MISS = "hit", "miss"
CACHE_STATES = ("", HIT, MISS)


def cache_state(hits: int, misses: int) -> str:
    """A build's cache state from the cache's counts during it: any miss compiled (MISS); hits alone, HIT; else ""."""
    return MISS if misses else HIT if hits else ""


@dataclass(frozen=True)
class ColdCost:
    """Seconds of each side's first call after build, of the compile (compiled backends), and the cache's part."""

    first_call_s: Mapping[str, float] = field(default_factory=dict)  # "cudnn"/"generic" -> seconds
    compile_s: float | None = None
    cache: str = ""  # HIT, MISS, or "" where no compile cache served the build
    first: bool = False  # the process's first case of its framework (``backends.cold.first_of_process``)

    def key(self, tag: str) -> str:
        """The summary key of a cold metric (FIRST_CALL or COMPILE) in this process's cache state."""
        return {FIRST_CALL: FIRST_CALL_CACHED, COMPILE: COMPILE_CACHED}[tag] if self.cache == HIT else tag

    def metrics(self) -> dict[str, float]:
        """Summary keys -> seconds: ``<side>/first_call`` per side and ``compile`` (``_cached`` ones on a cache hit)."""
        out = {side_tag(side, self.key(FIRST_CALL)): s for side, s in self.first_call_s.items()}
        if self.compile_s is not None:
            out[self.key(COMPILE)] = self.compile_s
        return out

    def describe(self) -> str:
        """One line, e.g. "first call: cudnn 1.84 s, generic 0.05 s; compile 12.3 s (compile cache miss)"."""
        calls = ", ".join(f"{side} {s:.3g} s" for side, s in self.first_call_s.items())
        parts = [f"first call: {calls}"] if calls else []
        if self.compile_s is not None:
            parts.append(f"compile {self.compile_s:.3g} s")
        text = "; ".join(parts) or "no cold cost measured"
        text += f" (compile cache {self.cache})" if self.cache else ""
        return text + (" (the process's first case of its framework)" if self.first else "")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        out = {"first_call_s": dict(self.first_call_s), "compile_s": self.compile_s, "compile_cache": self.cache}
        return {**out, "first_in_process": True} if self.first else out

    @classmethod
    def from_dict(cls, data: Any) -> ColdCost | None:
        """A stored cold cost; None for a record written before cold costs were measured. RecordError names a bad field."""
        if data is None:
            return None
        d = as_mapping(data, "cold")
        calls = as_mapping(d.get("first_call_s", {}), "cold.first_call_s")
        unknown = sorted(set(calls) - set(SIDES))
        if unknown:
            raise RecordError(f"cold.first_call_s names {unknown[0]!r}, not one of {', '.join(SIDES)}")
        seconds = {str(k): as_time(v, f"cold.first_call_s.{k}", part=True) for k, v in calls.items()}
        compile_s = None if d.get("compile_s") is None else as_time(d["compile_s"], "cold.compile_s", part=True)
        cache = as_text(d.get("compile_cache", ""), "cold.compile_cache")
        if cache not in CACHE_STATES:
            raise RecordError(f"cold.compile_cache is {cache!r}, not one of {HIT!r}, {MISS!r} or ''")
        first = d.get("first_in_process", False)
        if not isinstance(first, bool):
            raise RecordError(f"cold.first_in_process is {first!r}, not true or false")
        return cls(seconds, compile_s, cache, first)


__all__ = ["CACHE_STATES", "ColdCost", "HIT", "MISS", "cache_state"]
