"""Stored baselines: find, validate, write atomically, compare with verdicts, diff the environments.

Layout (pytest-benchmark's own file storage, one folder per GPU model so that a model is never compared
with another model's numbers):

    baselines/<gpu_slug>/<pytest-benchmark machine id>/NNNN_<tag>.json

Each file is pytest-benchmark JSON; ``machine_info["rnnperf"]`` holds our format version, the GPU slug
and the full environment, and the cuDNN entry of every case carries the case's record (raw samples of
both sides, per-round speedups, parity, telemetry) in ``extra_info["rnnperf"]``. Files are never
overwritten: recording a baseline adds the next number, and the newest number is the baseline.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .stats import Comparison

# .stats (scipy) is imported where verdicts are made, not here: pytest_configure checks the baseline tag
# through this module, and every pytest session should not pay a second for scipy.stats to do that.

FORMAT_VERSION = 1
_NAME = re.compile(r"^(\d{4})_(.+)\.json$")


class BaselineError(Exception):
    """A stored file that cannot be used; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class StoredRun:
    """A validated stored run: where it came from, its environment and the records keyed by case id."""

    path: Path
    gpu_slug: str
    environment: dict[str, str]
    records: dict[str, dict[str, Any]]
    datetime: str = ""


def run_meta(gpu_slug: str, environment: dict[str, str], fingerprint: str) -> dict[str, Any]:
    """What goes under ``machine_info["rnnperf"]`` of a stored run."""
    return {"format": FORMAT_VERSION, "gpu_slug": gpu_slug, "fingerprint": fingerprint,
            "environment": dict(environment)}


def _files(folder: Path) -> list[Path]:
    """Numbered JSON files directly under ``folder``/*/ (pytest-benchmark's machine-id subfolders)."""
    if not folder.is_dir():
        return []
    return [p for p in folder.glob("*/*.json") if _NAME.match(p.name)]


def find_latest(root: Path, gpu_slug: str, machine_id: str | None = None) -> Path | None:
    """The newest baseline of this GPU model: highest number, preferring this machine id's folder."""
    files = _files(root / gpu_slug)
    if not files:
        return None
    def key(p: Path) -> tuple[int, int]:
        return (1 if machine_id and p.parent.name == machine_id else 0, int(_NAME.match(p.name).group(1)))  # type: ignore[union-attr]
    return max(files, key=key)


def gpus_with_baselines(root: Path) -> list[str]:
    """GPU slugs that have at least one baseline file under ``root``."""
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and _files(d))


def records_from_benchmarks(benchmarks: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Case id -> full record, from the cuDNN (or generic-only) entries' ``extra_info["rnnperf"]``."""
    out: dict[str, dict[str, Any]] = {}
    for bench in benchmarks:
        record = (bench.get("extra_info") or {}).get("rnnperf")
        if isinstance(record, dict) and "generic" in record and "case" in record:
            out[record["case"]["id"]] = record
    return out


def load_run(path: Path) -> StoredRun:
    """Read and validate one stored run; BaselineError (one line, naming the file) when it is unusable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not valid JSON (truncated or hand-edited?): {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise BaselineError(f"{path}: not a pytest-benchmark file (no 'benchmarks' list)")
    meta = (data.get("machine_info") or {}).get("rnnperf")
    if not isinstance(meta, dict):
        raise BaselineError(f"{path}: no machine_info.rnnperf section: not written by pytest-rnnperf")
    if meta.get("format") != FORMAT_VERSION:
        raise BaselineError(f"{path}: unknown baseline format {meta.get('format')!r} (this pytest-rnnperf reads "
                            f"format {FORMAT_VERSION}); record a new baseline or upgrade pytest-rnnperf")
    try:
        records = records_from_benchmarks(data["benchmarks"])
        for case_id, record in records.items():
            samples = record["generic"]["samples_s"]
            if not samples or not all(isinstance(s, (int, float)) and s > 0 for s in samples):
                raise ValueError(f"case {case_id}: generic samples are not positive numbers")
            if record.get("cudnn") is not None:
                if not all(isinstance(s, (int, float)) and s > 0 for s in record["cudnn"]["samples_s"]):
                    raise ValueError(f"case {case_id}: cudnn samples are not positive numbers")
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(f"{path}: malformed record: {exc}") from None
    return StoredRun(path=Path(path), gpu_slug=str(meta.get("gpu_slug", "")),
                     environment={str(k): str(v) for k, v in (meta.get("environment") or {}).items()},
                     records=records, datetime=str(data.get("datetime", "")))


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` cannot be the name part of a baseline file, or None when it can."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
        return f"{tag!r}: use letters, digits, '.', '_' and '-' only"
    return None


def write_new(folder: Path, tag: str, data: dict[str, Any]) -> Path:
    """Write ``data`` as the next ``NNNN_<tag>.json`` in ``folder``, atomically and never over a file.

    The JSON goes to a temporary file in the same folder, is fsynced, then hard-linked to its final name:
    a link fails if the name exists (so two writers cannot take the same number) and a reader never sees
    a half-written file (a killed run leaves at most a stray temporary file, never a truncated baseline).
    """
    problem = tag_problem(tag)
    if problem:
        raise ValueError(f"baseline tag: {problem}")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rnnperf-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=True)
            fh.flush()
            os.fsync(fh.fileno())
        for _ in range(1000):
            numbers = [int(m.group(1)) for p in folder.glob("*.json") if (m := _NAME.match(p.name))]
            target = folder / f"{max(numbers, default=0) + 1:04d}_{tag}.json"
            try:
                os.link(tmp, target)
                return target
            except FileExistsError:
                continue  # another writer took that number: take the next
        raise BaselineError(f"{folder}: could not find a free baseline number")
    finally:
        os.unlink(tmp)


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict of one case against its baseline: cuDNN time (decides) and speedup (reported)."""

    case_id: str
    time: Comparison
    speedup: Comparison | None
    flagged: str = ""  # why the window is not trusted (throttled, shared GPU); empty when clean
    remeasured: bool = False
    host_bound: str = ""  # e.g. "host-bound: GPU busy 20%" when the wider threshold applied

    @property
    def verdict(self) -> str:
        """The case's verdict: the cuDNN-time verdict, which is what regresses when cuDNN gets slower.

        The speedup also moves when the generic side changes, which is not a cuDNN regression; it is
        reported and the floor gate guards it.
        """
        return str(self.time.verdict)

    @property
    def outcome(self) -> str:
        """The verdict as counted in summaries: a regression in an untrusted window reads "regressed (not failed)"."""
        return "regressed (not failed)" if self.verdict == "regressed" and self.flagged else self.verdict

    @property
    def regressed(self) -> bool:
        """Regressed in a clean window (a throttled or shared window is reported, not blamed on the code)."""
        from .stats import Verdict

        return self.time.verdict == Verdict.REGRESSED and not self.flagged

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        def comp(c: Comparison | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"verdict": str(c.verdict), "ratio": c.ratio.estimate, "low": c.ratio.low, "high": c.ratio.high,
                    "p_value": c.p_value, "baseline_median": c.baseline_median, "current_median": c.current_median,
                    "min_effect": c.min_effect, "explain": c.explain()}
        return {"case": self.case_id, "verdict": self.verdict, "regressed": self.regressed, "flagged": self.flagged,
                "remeasured": self.remeasured, "host_bound": self.host_bound, "cudnn_time": comp(self.time), "speedup": comp(self.speedup)}


def window_flag(record: dict[str, Any]) -> str:
    """Why a record's timing window is not trusted: throttled clocks or another process on the GPU."""
    reasons = [w for w in record.get("warnings", []) if "throttled" in w or "process" in w]
    return "; ".join(reasons)


# Below this GPU-busy fraction (over the paired timing window, see runner.device_busy) a case is small
# enough that its step time is mostly host time (Python, framework dispatch, kernel launches). Measured on
# H200s, three null runs: cases at >= 50% busy moved at most 6.4% (median 0.9%), cases below moved a
# median 14% and up to 69%. Those get HOST_BOUND_EFFECT instead of min_effect.
HOST_BOUND_BELOW = 0.5
HOST_BOUND_EFFECT = 0.35


def compare_records(case_id: str, baseline: dict[str, Any], current: dict[str, Any], min_effect: float = 0.05,
                    remeasured: bool = False, host_bound_effect: float = HOST_BOUND_EFFECT) -> CaseVerdict | None:
    """Verdict of one case (None when either side has no cuDNN timing to compare).

    A case that kept the GPU busy less than HOST_BOUND_BELOW of the time in either run is judged with
    ``host_bound_effect``: its time mostly measures the host, which drifts between runs far more than
    the within-run interval shows, so a tight threshold would flag noise.
    """
    from .runner import device_busy
    from .stats import Verdict, compare

    if baseline.get("cudnn") is None or current.get("cudnn") is None:
        return None
    # Recomputed from the telemetry, not read from the stored ``device_busy`` field: records written by
    # earlier versions stored the cuDNN-only reading there.
    busy = [b for b in (device_busy(baseline), device_busy(current)) if b is not None]
    host_bound = bool(busy) and min(busy) < HOST_BOUND_BELOW
    effect = max(min_effect, host_bound_effect) if host_bound else min_effect
    time_cmp = compare("cudnn time", baseline["cudnn"]["samples_s"], current["cudnn"]["samples_s"],
                       min_effect=effect)
    speed_cmp = None
    if baseline.get("round_speedups") and current.get("round_speedups"):
        speed_cmp = compare("speedup", baseline["round_speedups"], current["round_speedups"],
                            higher_is_better=True, min_effect=effect)
    note = f"host-bound: GPU busy {min(busy):.0%}" if host_bound else ""
    flagged = window_flag(current)
    if (host_bound and time_cmp.verdict == Verdict.REGRESSED and speed_cmp is not None
            and speed_cmp.verdict in (Verdict.UNCHANGED, Verdict.IMPROVED)):
        # A host-bound step measures the host as much as cuDNN. When the host is slower (another machine of
        # the same model, a busier neighbour), the generic side, timed interleaved in the same window and
        # host-bound too, slows alike and the speedup holds; a slower cuDNN path moves the speedup. In the
        # stored H100/H200 evidence runs all 6 host-bound time regressions of cases nobody slowed kept their
        # speedup unchanged, and none of the 10 deliberately slowed host-bound cases did.
        host = f"the host slowed both sides alike: speedup {_signed(speed_cmp.ratio.estimate - 1)}, {speed_cmp.verdict}"
        flagged = "; ".join(filter(None, (flagged, host)))
    return CaseVerdict(case_id, time_cmp, speed_cmp, flagged=flagged, remeasured=remeasured, host_bound=note)


def _signed(x: float) -> str:
    """A relative change as a signed whole percentage, e.g. -3%."""
    return f"{x * 100:+.0f}%"


def compare_runs(old: StoredRun, new: StoredRun, min_effect: float = 0.05,
                 host_bound_effect: float = HOST_BOUND_EFFECT) -> list[CaseVerdict]:
    """Verdicts for every case the two runs share, in the new run's order."""
    out = []
    for case_id, record in new.records.items():
        if case_id in old.records:
            v = compare_records(case_id, old.records[case_id], record, min_effect, host_bound_effect=host_bound_effect)
            if v is not None:
                out.append(v)
    return out
