"""Stored runs: what goes into a pytest-benchmark JSON file, and reading one back, validated and migrated.

Stored runs are pytest-benchmark JSON files. ``machine_info["rnnperf"]`` holds the format version, the GPU
slug and the environment; the cuDNN entry of every case (the generic one where it ran alone) carries the
case's record in ``extra_info["rnnperf"]``.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_rnnperf.model.fields import RecordError, as_list, json_kind
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import (BASELINE, CARD, FORMAT_VERSION, KEPT, BaselineError, CaseRecord, StoredRun,
                                          case_to_dict)
from pytest_rnnperf.store import accepts
from pytest_rnnperf.store.baselines import find_all
from pytest_rnnperf.store.schema import formats, migrate_record, readable


def run_meta(gpu_slug: str, environment: Mapping[str, str], fingerprint: str, kind: str = BASELINE) -> dict[str, Any]:
    """What goes under ``machine_info["rnnperf"]`` of a stored run."""
    return {"format": FORMAT_VERSION, "gpu_slug": gpu_slug, "fingerprint": fingerprint,
            "environment": dict(environment), "kind": kind}


def benchmark_extra(record: CaseRecord, side: str, processes: Iterable[ProcessSummary] = ()) -> dict[str, Any]:
    """``extra_info`` of one side's pytest-benchmark entry: the full record (and extra processes) on the main side only."""
    main = "cudnn" if record.cudnn is not None else "generic"
    if side == main:
        extra: dict[str, Any] = {"rnnperf": record.to_dict()}
        more = [p.to_dict() for p in processes]
        if more:
            extra["rnnperf_processes"] = more
        return extra
    return {"rnnperf": {"case": case_to_dict(record.case), "side": side,
                        "see": f"the {main} entry of this case for the full record"}}


def without_cases(data: Mapping[str, Any], case_ids: Iterable[str]) -> dict[str, Any]:
    """``data`` (a pytest-benchmark JSON) without the entries of ``case_ids``: both sides share the case id as group."""
    drop = set(case_ids)
    return {**data, "benchmarks": [b for b in data.get("benchmarks", []) if b.get("group") not in drop]}


def timed_cases(data: Mapping[str, Any]) -> int:
    """How many cases of ``data`` (a pytest-benchmark JSON) have a cuDNN entry."""
    return len({b.get("group") for b in data.get("benchmarks", []) if (b.get("params") or {}).get("side") == "cudnn"})


def _processes_from_benchmarks(benchmarks: Iterable[Any], name: str) -> dict[str, tuple[ProcessSummary, ...]]:
    """Case id -> the extra processes' summaries stored beside its record (``extra_info["rnnperf_processes"]``)."""
    out: dict[str, tuple[ProcessSummary, ...]] = {}
    for bench in benchmarks:
        extra = bench.get("extra_info") or {}
        more = extra.get("rnnperf_processes") if isinstance(extra, Mapping) else None
        if more is None:
            continue
        rows = as_list(more, "extra_info.rnnperf_processes")
        try:
            summaries = tuple(ProcessSummary.from_dict(row, f"{name}#{i + 2}") for i, row in enumerate(rows))
        except ValueError as exc:
            raise RecordError(str(exc)) from None
        for s in summaries:
            out[s.case_id] = out.get(s.case_id, ()) + (s,)
    return out


def reported_from_meta(meta: Mapping[str, Any], name: str) -> dict[str, ProcessSummary]:
    """Case id -> the summary of a case a kept run reported (``machine_info["rnnperf"]["reported"]``, format 4)."""
    out: dict[str, ProcessSummary] = {}
    for row in as_list(meta.get("reported", []), "machine_info.rnnperf.reported"):
        try:
            summary = ProcessSummary.from_dict(row, name)
        except ValueError as exc:
            raise RecordError(f"machine_info.rnnperf.reported: {exc}") from None
        if summary.case_id in out:
            raise RecordError(f"machine_info.rnnperf.reported holds case {summary.case_id} twice; keep one")
        out[summary.case_id] = summary
    return out


def _records_from_benchmarks(benchmarks: Iterable[Any], version: int) -> dict[str, CaseRecord]:
    """Case id -> record, from the entries whose ``extra_info["rnnperf"]`` holds a full record."""
    out: dict[str, CaseRecord] = {}
    where: dict[str, int] = {}
    for index, bench in enumerate(benchmarks):
        if not isinstance(bench, Mapping):
            raise RecordError(f"benchmarks[{index}] is {type(bench).__name__}, not an object")
        extra = bench.get("extra_info", {})
        if not isinstance(extra, Mapping) or "rnnperf" not in extra:
            if "extra_info" in bench and not isinstance(extra, Mapping):
                raise RecordError(f"{_entry(index, bench)}: extra_info is {json_kind(extra)}, not an object")
            continue  # another plugin's benchmark in the same file
        record = extra["rnnperf"]
        if not isinstance(record, Mapping):
            raise RecordError(f"{_entry(index, bench)}: extra_info.rnnperf is {json_kind(record)}, not an object")
        if "see" in record and "generic" not in record:
            continue  # the other side's entry, pointing at the full record (benchmark_extra)
        for key in ("case", "generic"):  # a record without them would read as a case the baseline never saw
            if key not in record:
                raise RecordError(f"{_entry(index, bench)}: extra_info.rnnperf has no '{key}'")
        parsed = CaseRecord.from_dict(migrate_record(record, version))
        if parsed.id in out:  # which copy to judge against is anyone's guess
            raise RecordError(f"case {parsed.id} is stored twice (benchmarks[{where[parsed.id]}] and "
                              f"benchmarks[{index}]); keep one")
        out[parsed.id], where[parsed.id] = parsed, index
    return out


def _reported_apart(records: Mapping[str, CaseRecord], reported: Mapping[str, ProcessSummary]) -> None:
    """RecordError where a case is stored both as a record and as reported: which one teaches the history is unclear."""
    both = sorted(set(records) & set(reported))
    if both:
        raise RecordError(f"case {both[0]} is stored both as a record and as reported (machine_info.rnnperf.reported); "
                          f"keep one")


def _entry(index: int, bench: Mapping[str, Any]) -> str:
    """How an error names a benchmark entry: its index and pytest-benchmark's name of it."""
    name = bench.get("name")
    return f"benchmarks[{index}]" + (f" ({name})" if isinstance(name, str) else "")


def records_problem(data: Mapping[str, Any]) -> str | None:
    """Why a stored run about to be written would not read back (a case twice, a malformed record), or None."""
    meta = (data.get("machine_info") or {}).get("rnnperf") or {}
    try:
        records = _records_from_benchmarks(data.get("benchmarks", []), FORMAT_VERSION)
        _reported_apart(records, reported_from_meta(meta, "this run"))
    except RecordError as exc:
        return str(exc)
    return None


def read_json(path: Path) -> Any:
    """The JSON of a stored run, plain or gzipped; BaselineError (one line, naming the file) when it does not parse."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":  # gzip: evidence runs are kept compressed (a tenth of the size)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise BaselineError(f"{path}: a gzip file that does not unpack ({exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}): "
                            f"not a pytest-benchmark JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not valid JSON (truncated or hand-edited?): {exc.msg} "
                            f"(line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise BaselineError(f"{path}: not valid JSON (nested too deeply)") from None
    return data


def load_run(path: Path) -> StoredRun:
    """Read and validate one stored run; BaselineError (one line, naming the file) when it is unusable."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise BaselineError(f"{path}: not a pytest-benchmark file (no 'benchmarks' list)")
    machine_info = data.get("machine_info")
    meta = machine_info.get("rnnperf") if isinstance(machine_info, dict) else None
    if not isinstance(meta, dict):
        raise BaselineError(f"{path}: no machine_info.rnnperf section: not written by pytest-rnnperf")
    version = meta.get("format")
    if not readable(version):
        raise BaselineError(f"{path}: unknown baseline format {version!r} (this pytest-rnnperf reads formats "
                            f"{formats()}); record a new baseline or upgrade pytest-rnnperf")
    environment = meta.get("environment", {})
    if not isinstance(environment, dict):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.environment: not an object")
    kind = meta.get("kind", BASELINE)
    if kind not in (BASELINE, KEPT):
        raise BaselineError(f"{path}: machine_info.rnnperf.kind is {kind!r}, not {BASELINE!r} or {KEPT!r}")
    claims = meta.get("claims", [])
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.claims: not a list of test names")
    check_costs = meta.get("check_costs", {})
    if not isinstance(check_costs, dict) or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0
                                                    for s in check_costs.values()):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.check_costs: not an object of test names to seconds")
    suspects = meta.get("suspects", {})
    if not isinstance(suspects, dict) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                                 for n in suspects.values()):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.suspects: not an object of case ids to nights >= 1")
    outside = _outside_from_meta(meta.get("outside"), path)
    cards = meta.get("cards", {})
    if not isinstance(cards, dict) or not all(isinstance(c, str) for c in cards.values()):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.cards: not an object of case ids to GPU UUIDs")
    if "reported" in meta and (version < 4 or kind != KEPT):  # only a kept run of format 4 or later reports cases
        raise BaselineError(f"{path}: machine_info.rnnperf.reported is stored only by a kept run of format 4 or later "
                            f"(this one: {kind}, format {version})")
    try:
        records = _records_from_benchmarks(data["benchmarks"], version)
        processes = _processes_from_benchmarks(data["benchmarks"], path.name)
        reported = reported_from_meta(meta, path.name)
        _reported_apart(records, reported)
    except RecordError as exc:
        raise BaselineError(f"{path}: malformed record: {exc}") from None
    return StoredRun(path=path, gpu_slug=str(meta.get("gpu_slug", "")),
                     environment={str(k): str(v) for k, v in environment.items()},
                     records=records, datetime=str(data.get("datetime", "")), format=version, kind=kind,
                     processes=processes, claims=tuple(claims), suspects={str(k): n for k, n in suspects.items()},
                     reported=reported, check_costs={str(k): float(v) for k, v in check_costs.items()},
                     outside=outside, cards={str(k): v for k, v in cards.items()},
                     all_cards=cards_of_meta(environment, meta, cards))


# A worker's line as the session writes it (``gw1 NVIDIA H200 (GPU-835fcb8a)``): the start of its card's UUID.
_WORKER_CARD = re.compile(r"\((GPU-[0-9a-fA-F-]+)\)")


def cards_of_meta(environment: Mapping[str, Any], meta: Mapping[str, Any], cards: Mapping[str, str]) -> tuple[str, ...]:
    """Every card a stored run's processes ran on: its environment's, its pytest-xdist workers' (the start of each
    UUID, from their lines), those its recording's extra processes took turns on, and its cases' own."""
    workers = meta.get("workers", [])
    extra = meta.get("extra_cards", [])
    named = [m.group(1) for line in (workers if isinstance(workers, list) else []) if isinstance(line, str)
             if (m := _WORKER_CARD.search(line))]
    found = [environment.get(CARD), *named, *(extra if isinstance(extra, list) else []), *cards.values()]
    full = [str(c) for c in found if isinstance(c, str) and c]
    # A worker's 12 characters stand for the full UUID the environment or a case names.
    return tuple(dict.fromkeys(c for c in full if not any(o != c and o.startswith(c) for o in full)))


def _outside_from_meta(found: Any, path: Path) -> tuple[float, int] | None:
    """``machine_info.rnnperf.outside`` as (seconds, cases); None where the run stored none (written before it was)."""
    if found is None:
        return None
    seconds, cases = (found.get("seconds"), found.get("cases")) if isinstance(found, dict) else (None, None)
    if (not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0
            or not isinstance(cases, int) or isinstance(cases, bool) or cases < 1):
        raise BaselineError(f"{path}: malformed machine_info.rnnperf.outside: not an object of seconds >= 0 and "
                            f"cases >= 1")
    return float(seconds), cases


def run_identity(run: StoredRun) -> tuple[Any, ...] | None:
    """What makes two files the same run: its GPU model, start and every raw sample (None for a run without records).

    The start tells apart two runs whose samples agree (a fake clock's, in tests); a copy keeps both.
    """
    if not run.records:
        return None
    return (run.gpu_slug, run.datetime, tuple(sorted((case_id, r.generic.samples, r.cudnn.samples if r.cudnn else ())
                                       for case_id, r in run.records.items())))


@dataclass(frozen=True)
class Loaded:
    """Stored runs, each counted once, and one-line notes on what was skipped or counted once."""

    runs: tuple[StoredRun, ...]
    notes: tuple[str, ...] = ()
    accepted: accepts.Accepted | None = None  # the change judging restarts at (``store.accepts``), if any


def distinct(runs: Sequence[StoredRun], notes: Sequence[str] = ()) -> Loaded:
    """``runs`` with a copy of a run already among them (another number, tag or name) left out, and a note saying so.

    A copy counted twice would be one more process in a case's history and narrow the noise it is judged by.
    """
    unique: list[StoredRun] = []
    first: dict[tuple[Any, ...], StoredRun] = {}
    out = list(notes)
    for run in runs:
        key = run_identity(run)
        if key is not None and key in first:
            out.append(f"{run.path} holds the same run as {first[key].path}: counted once")
            continue
        if key is not None:
            first[key] = run
        unique.append(run)
    return Loaded(tuple(unique), tuple(out))


def load_paths(paths: Sequence[Path]) -> Loaded:
    """The stored runs at ``paths`` (newest first, as ``find_all`` lists them), a copy counted once as its oldest file.

    BaselineError (one line naming the file) for a file that cannot be used.
    """
    oldest_first = distinct([load_run(p) for p in reversed(paths)])
    return Loaded(oldest_first.runs[::-1], oldest_first.notes)


def load_model(root: Path, gpu_slug: str, machine_id: str | None = None) -> Loaded:
    """Every stored run of one GPU model to judge against, newest first, each counted once: those stored since its
    newest accepted change (``store.accepts``); BaselineError as ``find_all`` and ``load_run``."""
    loaded = load_paths(find_all(root, gpu_slug, machine_id))
    accepted = accepts.newest(accepts.load(root / gpu_slug / accepts.FILE_NAME))
    runs, left_out = accepts.after(loaded.runs, accepted)
    if accepted is None:
        return loaded
    return Loaded(runs, (*loaded.notes, accepts.note(accepted, left_out)), accepted)
