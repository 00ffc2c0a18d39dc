"""Per-case device-time noise of one GPU model, measured from stored runs, and the thresholds it justifies.

Within one process a case's device time is steady to well under 1%, but some cases settle differently from
process to process: kernels that run concurrently on cuDNN's streams overlap one way or another, and a kernel
then takes a different time (baselines/<gpu>/evidence/README.md has the runs). One run cannot tell that from a
regression, but null runs can: ``measure`` takes
the spread (max/min - 1) of each case's cuDNN device time over several stored runs of the same GPU model
and software, and ``Noise.effect`` raises that case's threshold to ``MARGIN`` times its spread.

The file is ``baselines/<gpu>/noise.json``, written by ``python -m pytest_rnnperf noise RUN RUN ...`` from
runs the suite stored; nothing here is typed in by hand. Pure: no pytest, no framework.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_rnnperf.model.records import BaselineError, StoredRun
from pytest_rnnperf.judge.verdicts import Policy

FORMAT = 1
FILE_NAME = "noise.json"
MAX_SPREAD = 1.0  # 100%: a case that moved more between runs was changed, not noisy
# A new process may land a little beyond the range the null runs saw.
MARGIN = 1.25


@dataclass(frozen=True)
class Noise:
    """Device-time spread per case id over ``runs`` stored runs (file names in ``sources``)."""

    spread: Mapping[str, float] = field(default_factory=dict)
    runs: int = 0
    sources: tuple[str, ...] = ()

    def effect(self, case_id: str, floor: float) -> float:
        """The device-time threshold of a case: ``floor``, or MARGIN times its measured spread if larger."""
        return max(floor, MARGIN * self.spread.get(case_id, 0.0))

    def raised(self, floor: float) -> int:
        """How many cases this noise judges above ``floor``."""
        return sum(self.effect(case_id, floor) > floor for case_id in self.spread)

    def applied_to(self, policy: Policy) -> Policy:
        """``policy`` with each measured case's device-time threshold."""
        return policy.with_device_effects({case_id: self.effect(case_id, policy.device_effect)
                                           for case_id in self.spread})

    def to_dict(self) -> dict[str, Any]:
        """The stored form."""
        return {"format": FORMAT, "runs": self.runs, "sources": list(self.sources),
                "margin": MARGIN, "device_spread": dict(sorted(self.spread.items()))}


def measure(runs: Sequence[StoredRun]) -> Noise:
    """The spread of each case's cuDNN device time (median per run) over the runs that have it (two or more)."""
    medians: dict[str, list[float]] = {}
    for run in runs:
        for case_id, record in run.records.items():
            if record.cudnn_device is not None:
                medians.setdefault(case_id, []).append(record.cudnn_device.busy.median)
    spread = {case_id: max(values) / min(values) - 1.0 for case_id, values in medians.items()
              if len(values) >= 2 and min(values) > 0}
    return Noise(spread=spread, runs=len(runs), sources=tuple(run.path.name for run in runs))


def load(path: Path) -> Noise:
    """Read a noise file; BaselineError with one line naming the file and what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable noise file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path}: not a noise file of format {FORMAT} (write it with: python -m pytest_rnnperf "
                            f"noise RUN RUN ... --out {path})")
    spread = data.get("device_spread")
    if not isinstance(spread, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0 for k, v in spread.items()):
        raise BaselineError(f"{path}: device_spread must map case ids to finite numbers >= 0")
    wide = next(((k, v) for k, v in spread.items() if v > MAX_SPREAD), None)
    if wide is not None:  # a spread that wide raises the case's threshold past any slowdown: its gate is off
        raise BaselineError(f"{path}: device_spread of {wide[0]} is {wide[1]:g}: at most 1 (100%); runs that moved "
                            f"more were not null runs")
    runs = data.get("runs")
    sources = data.get("sources")
    return Noise(spread={k: float(v) for k, v in spread.items()}, runs=runs if isinstance(runs, int) else 0,
                 sources=tuple(str(s) for s in sources) if isinstance(sources, list) else ())
