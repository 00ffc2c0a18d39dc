"""Typed records and their stored layout: round trips, one-line errors for every unusable file, migrations."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from factories import record

from pytest_rnnperf.model.results import PathProof
from pytest_rnnperf.model.cases import Case, ModelCase, Shape
from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.process import PROBE, ProcessSummary, summarize
from pytest_rnnperf.model.records import (FORMAT_VERSION, BaselineError, CaseRecord, CrossRecord, RecordError,
                                          StoredRun)
from pytest_rnnperf.store.runs import benchmark_extra, load_run, run_meta
from pytest_rnnperf.store.schema import migrate_record
from pytest_rnnperf.model.stats import Interval

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for p in REPO.glob("baselines/*/*/*.json") if p.parent.name != "evidence")
EVIDENCE = sorted([*REPO.glob("baselines/*/evidence/*.json"), *REPO.glob("baselines/*/evidence/*.json.gz")])


def _file(records: list[dict[str, Any]], fmt: int = FORMAT_VERSION, gpu: str = "NVIDIA_H200") -> dict[str, Any]:
    """A stored-run JSON as the plugin writes it."""
    return {"machine_info": {"rnnperf": {"format": fmt, "gpu_slug": gpu, "environment": {"driver": "580"}}},
            "benchmarks": [{"extra_info": {"rnnperf": r}} for r in records], "datetime": "2026-11-22T00:00:00"}


def test_a_case_record_survives_the_round_trip() -> None:
    """to_dict -> JSON -> from_dict gives the same record, flags, notes and telemetry included."""
    flag = WindowFlag(FlagKind.THROTTLED, "clocks throttled during the 2.00 s window: power 0.50 s")
    rec = record(busy_pct=40.0, flags=(flag,), notes=("cudnn energy: window 0.9 s < 1 s",),
                 speedup=Interval(4.0, 3.9, 4.1, 0.95), energy_per_step_j={"cudnn": 0.12}, gpu_name="NVIDIA H200",
                 cudnn_dev_ms=0.4, generic_dev_ms=1.6, cost_s={"build": 0.5, "wall": 1.25})
    back = CaseRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec
    assert back.gpu_busy == pytest.approx(0.40) and back.warnings == (flag.message, "cudnn energy: window 0.9 s < 1 s")
    assert back.device_speedup == pytest.approx(4.0, rel=0.01)
    assert back.host_overhead_s("cudnn") == pytest.approx(0.6e-3, rel=0.05) and back.host_overhead_s("generic")


def test_a_record_keeps_its_process_host_probe_through_json_and_into_its_process_summary() -> None:
    """The host probe is stored with the record and becomes the ``host_probe`` metric of its process; older: none."""
    rec = replace(record(cudnn_dev_ms=0.4), host_probe_s=0.0021)
    back = CaseRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.host_probe_s == 0.0021
    summary = summarize(back, "this run")
    assert ProcessSummary.from_dict(summary.to_dict(), "file").get(PROBE) == 0.0021
    older = {k: v for k, v in rec.to_dict().items() if k != "host_probe_s"}
    assert CaseRecord.from_dict(older).host_probe_s is None and summarize(record(), "x").get(PROBE) is None


def test_a_model_record_and_a_cross_record_survive_the_round_trip() -> None:
    """A team's model keeps its id and description; a cross check keeps both frameworks."""
    model = record(case=ModelCase(id="tests/test_enc.py::test_enc", framework="torch", mode="infer", floor=2.0,
                                  description="Encoder: 1.20M parameters"))
    assert CaseRecord.from_dict(model.to_dict()) == model
    assert model.tflops("cudnn") is None  # an arbitrary model's FLOPs are unknown
    cross = CrossRecord(Case("torch", "gru", Shape(4, 2, 3, 5)), ("torch", "tf"), ("torch cudnn", "tf cudnn"),
                        (PathProof("cudnn", True, "x"),) * 2,
                        ParityReport("fp32", (ParityRow("torch cudnn vs tf cudnn", "output", float("inf"), 5e-5),)))
    data = json.loads(json.dumps(cross.to_dict()))
    assert data["parity"]["rows"][0]["error"] == "inf" and data["id"] == "torch-vs-tf-gru-train-fp32-T4-B2-I3-H5-L1"
    assert CrossRecord.from_dict(data) == cross


def test_only_the_main_side_of_a_case_carries_the_record() -> None:
    """The cuDNN entry holds the full record; the generic entry points at it."""
    rec = record()
    assert benchmark_extra(rec, "cudnn")["rnnperf"]["generic"]["samples_s"]
    assert benchmark_extra(rec, "generic")["rnnperf"]["see"].startswith("the cudnn entry")
    alone = record(cudnn_ms=None)
    assert "samples_s" in benchmark_extra(alone, "generic")["rnnperf"]["generic"]


def _good() -> dict[str, Any]:
    """A valid stored record."""
    return record(seed=1).to_dict()


def _edit(path: str, value: Any) -> dict[str, Any]:
    """A valid record with one field (dotted path) replaced."""
    rec = _good()
    *parents, last = path.split(".")
    target: Any = rec
    for key in parents:
        target = target[key]
    target[last] = value
    return rec


def test_a_gzipped_run_reads_as_the_run_itself(tmp_path: Path) -> None:
    """Evidence runs are kept gzipped: the loader reads them as it reads the plain file."""
    data = json.dumps(_file([])).encode()
    plain, packed = tmp_path / "0001_x.json", tmp_path / "run.json.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    assert load_run(packed).records == load_run(plain).records
    assert load_run(packed).environment == load_run(plain).environment


@pytest.mark.parametrize("raw, message", [
    (b"\xff\xfe{}", "not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"benchmarks": [', "not valid JSON (truncated or hand-edited?): Expecting value (line 1, column 17)"),
    (b'{"benchmarks": [{"a": "unterminated', "Unterminated string starting at (line 1, column 23)"),
    (b"[]", "not a pytest-benchmark file (no 'benchmarks' list)"),
    (b"\x1f\x8b\x08\x00truncated", "a gzip file that does not unpack"),
    (b'{"benchmarks": [], "machine_info": {}}', "no machine_info.rnnperf section"),
    (b'{"benchmarks": [], "machine_info": "x"}', "no machine_info.rnnperf section"),
    (json.dumps(_file([], fmt=99)).encode(), "unknown baseline format 99"),
    (json.dumps(_file([], fmt="1")).encode(), "unknown baseline format '1'"),  # type: ignore[arg-type]
    (b'{"benchmarks": [1], "machine_info": {"rnnperf": {"format": 1}}}', "benchmarks[0] is int, not an object"),
    (json.dumps({"benchmarks": [], "machine_info": {"rnnperf": {"format": 2, "environment": []}}}).encode(),
     "malformed machine_info.rnnperf.environment"),
    (json.dumps({"benchmarks": [], "machine_info": {"rnnperf": {"format": 2, "claims": "test_x"}}}).encode(),
     "malformed machine_info.rnnperf.claims: not a list of test names"),
    (json.dumps({"benchmarks": [], "machine_info": {"rnnperf": {"format": 4, "check_costs": {"test_x": "9 s"}}}}).encode(),
     "malformed machine_info.rnnperf.check_costs: not an object of test names to seconds"),
    (json.dumps({"benchmarks": [], "machine_info": {"rnnperf": {"format": 4, "outside": {"seconds": 58}}}}).encode(),
     "malformed machine_info.rnnperf.outside: not an object of seconds >= 0 and cases >= 1"),
    (json.dumps({"benchmarks": [], "machine_info": {"rnnperf": {"format": 4, "cards": {"case": 0}}}}).encode(),
     "malformed machine_info.rnnperf.cards: not an object of case ids to GPU UUIDs"),
])
def test_an_unusable_file_is_one_line_naming_it(tmp_path: Path, raw: bytes, message: str) -> None:
    """Every unusable file gives one line that names it and the problem, and the file is left as it was."""
    path = tmp_path / "0001_x.json"
    path.write_bytes(raw)
    with pytest.raises(BaselineError) as info:
        load_run(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)
    assert "\n" not in str(info.value) and "at at" not in str(info.value)
    assert path.read_bytes() == raw


@pytest.mark.parametrize("field, value, message", [
    ("cudnn.samples_s", [], "cudnn samples_s is empty"),
    ("cudnn.samples_s", [1e-3, float("inf")], "cudnn samples_s holds inf, not a finite number"),
    ("cudnn.samples_s", [1e-3, float("nan")], "cudnn samples_s holds nan, not a finite number"),
    ("generic.samples_s", [0.0, 1e-3], "generic samples_s holds 0.0: times must be > 0 s"),
    ("generic.samples_s", [-1e-3], "generic samples_s holds -0.001: times must be > 0 s"),
    ("generic.samples_s", "1e-3", "generic samples_s is text ('1e-3'), not a list"),
    ("generic.samples_s", [True], "generic samples_s holds a boolean (True), not a number"),
    ("generic.steps_per_block", 0, "generic steps_per_block is 0: must be >= 1"),
    ("generic", None, "generic is null (None), not an object"),
    ("speedup", {"estimate": 4.0, "low": 4.5, "high": 5.0}, "speedup: estimate 4.0 is not within [4.5, 5.0]"),
    ("case.id", "torch-gru-train-fp32-T28-B128-I28-H128-L1", "does not match its fields"),
    ("case.cell", "lstmm", "unknown cell 'lstmm'"),
    ("telemetry", [1], "telemetry is a list ([1]), not an object"),
    ("flags", [{"kind": "hot", "message": "x"}], "flags[].kind 'hot' is not one of"),
    ("cudnn_device", {"busy": {"samples_s": [], "timer": "device"}, "work": {"samples_s": [1e-3], "timer": "x"},
                      "launches_per_step": 1}, "cudnn device samples_s is empty"),
    ("cost_s", {"wall": "long"}, "cost_s.wall holds text ('long'), not a number"),
])
def test_a_hand_edited_record_is_refused_in_one_line(tmp_path: Path, field: str, value: Any, message: str) -> None:
    """Samples that would crash the statistics later are refused when the file is read, naming file and case."""
    path = tmp_path / "0001_x.json"
    path.write_text(json.dumps(_file([_edit(field, value)])))
    with pytest.raises(BaselineError) as info:
        load_run(path)
    text = str(info.value)
    assert text.startswith(f"{path}: malformed record: ") and message in text, text
    assert "\n" not in text


@pytest.mark.parametrize("field", ["cudnn.samples_s", "generic.samples_s"])
def test_a_record_with_implausibly_many_samples_is_refused_when_read(tmp_path: Path, field: str) -> None:
    """D11: a record of 2,000,000 samples was read, then failed every test with a MemoryError from the bootstrap."""
    path = tmp_path / "0001_x.json"
    path.write_text(json.dumps(_file([_edit(field, [1e-3] * 10_001)])))
    with pytest.raises(BaselineError) as info:
        load_run(path)
    side = field.split(".")[0]
    assert f"{side} samples_s holds 10001 samples: at most 10000" in str(info.value), str(info.value)


def test_format_1_records_are_migrated_when_read(tmp_path: Path) -> None:
    """A format-1 record (no timer, warnings as strings, a stored device_busy) reads as format 2."""
    v1 = _good()
    for key in ("flags", "notes", "gpu_busy"):
        v1.pop(key)
    for side in ("cudnn", "generic"):
        v1[side].pop("timer")
    v1["telemetry"] = {"duration_s": 2.0, "utilization": {"mean": 30.0}, "throttle_s": {"power": 0.5,
                       "low_utilization": 1.0, "thermal": "unavailable: NotSupported"},
                       "throttle_reasons": [], "foreign_processes": "unavailable: NoPermission"}
    v1["warnings"] = ["clocks throttled during the 2.00 s window: power 0.50 s", "cudnn energy: window 0.9 s"]
    v1["device_busy"] = 0.95  # what early format-1 files stored: the cuDNN-only window's reading
    path = tmp_path / "0001_x.json"
    path.write_text(json.dumps(_file([v1], fmt=1)))
    run = load_run(path)
    (rec,) = run.records.values()
    assert run.format == 1 and rec.cudnn is not None and rec.cudnn.timer == "wall"
    assert rec.flags == (WindowFlag(FlagKind.THROTTLED, "clocks throttled during the 2.00 s window: power 0.50 s"),)
    assert rec.notes == ("cudnn energy: window 0.9 s",)
    assert rec.gpu_busy == pytest.approx(0.30)


def _kept(records: list[dict[str, Any]], reported: list[dict[str, Any]], fmt: int = FORMAT_VERSION,
          kind: str = "kept") -> dict[str, Any]:
    """A kept run as the plugin writes it, with the summaries of the cases it reported."""
    data = _file(records, fmt=fmt)
    data["machine_info"]["rnnperf"].update(kind=kind, reported=reported)
    return data


def test_a_kept_run_reads_back_its_reported_cases_as_reported_processes(tmp_path: Path) -> None:
    """The reported case has no record; its one process reads as reported, under the file's name."""
    clean = record(cudnn_dev_ms=0.5)
    slowed = summarize(record(case_id="tests/test_m.py::test_m", cudnn_dev_ms=0.7), "")
    path = tmp_path / "0002_run.json"
    path.write_text(json.dumps(_kept([clean.to_dict()], [slowed.to_dict()])))
    run = load_run(path)
    assert list(run.records) == [clean.id]
    (summary,) = run.summaries("tests/test_m.py::test_m")
    assert summary.reported and summary.source == "0002_run.json" and summary.metrics == slowed.metrics
    assert not any(s.reported for s in run.summaries(clean.id))


@pytest.mark.parametrize("fmt, kind, both, message", [
    (3, "kept", False, "reported is stored only by a kept run of format 4 or later (this one: kept, format 3)"),
    (FORMAT_VERSION, "baseline", False, "(this one: baseline, format 4)"),
    (FORMAT_VERSION, "kept", True, "is stored both as a record and as reported"),
])
def test_reported_cases_where_no_kept_run_writes_them_are_refused_in_one_line(tmp_path: Path, fmt: int, kind: str,
                                                                             both: bool, message: str) -> None:
    """A report in an older format's file or a baseline, or beside the case's own record: which teaches is unclear."""
    rec = record()
    report = summarize(rec if both else record(case_id="tests/test_m.py::test_m"), "").to_dict()
    path = tmp_path / "0002_run.json"
    path.write_text(json.dumps(_kept([rec.to_dict()], [report], fmt=fmt, kind=kind)))
    with pytest.raises(BaselineError) as info:
        load_run(path)
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_an_unknown_record_format_is_refused() -> None:
    """A record newer than this package is not guessed at."""
    with pytest.raises(RecordError, match=f"unknown format {FORMAT_VERSION + 1}"):
        migrate_record(_good(), version=FORMAT_VERSION + 1)


def test_run_meta_carries_the_format() -> None:
    """Every written run says which format it is in."""
    assert run_meta("NVIDIA_H200", {"driver": "580"}, "abc")["format"] == FORMAT_VERSION


# ------------------------------------------------------------------------------------ committed files


def test_the_repository_has_committed_baselines() -> None:
    """The files the next tests read exist (a broken glob would make them pass on nothing)."""
    assert len(COMMITTED) >= 4 and all(p.parent.parent.parent.name == "baselines" for p in COMMITTED)
    assert len(EVIDENCE) >= 10


@pytest.mark.parametrize("path", COMMITTED + EVIDENCE, ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_run_loads_and_sits_in_its_gpus_folder(path: Path) -> None:
    """A corrupt committed baseline would otherwise pass CPU CI unnoticed: each loads, in its GPU's folder."""
    run = load_run(path)
    gpu_folder = path.parent.parent.name if path.parent.name == "evidence" else path.parent.parent.name
    assert run.gpu_slug == gpu_folder
    assert run.records and all(r.cudnn is not None or r.generic for r in run.records.values())
    assert sum(r.cudnn is not None for r in run.records.values()) >= 1


@pytest.mark.parametrize("path", COMMITTED + EVIDENCE, ids=lambda p: str(p.relative_to(REPO)))
def test_format_1_flags_are_what_the_old_warnings_said(path: Path) -> None:
    """The migration's flags (from the counters) are exactly the warnings format 1 matched by their words."""
    raw_bytes = path.read_bytes()
    data = json.loads(gzip.decompress(raw_bytes) if path.suffix == ".gz" else raw_bytes)
    if data["machine_info"]["rnnperf"]["format"] != 1:
        pytest.skip("written in a later format")
    run = load_run(path)
    for bench in data["benchmarks"]:
        raw = bench["extra_info"].get("rnnperf", {})
        if "generic" not in raw:
            continue
        old = [w for w in raw.get("warnings", []) if "throttled" in w or "process" in w]
        rec = run.records[raw["case"]["id"]]
        assert [f.message for f in rec.flags] == old
        assert list(rec.warnings) == raw.get("warnings", [])


def test_a_stored_run_keeps_the_seconds_of_its_claims_and_parity_tests_and_the_newest_is_the_price(
        tmp_path: Path) -> None:
    """``check_costs`` reads back as stored; a history prices a test by the newest run that timed it, None where none
    did (an older file, or a test never stored)."""
    from pytest_rnnperf.store.stored import Stored

    runs = []
    for n, costs in ((2, {"test_a": 12.5}), (1, {"test_a": 30.0, "test_b": 4.0})):
        data = _file([])
        data["machine_info"]["rnnperf"].update(claims=sorted(costs), check_costs=costs)
        path = tmp_path / f"000{n}_run.json"
        path.write_text(json.dumps(data))
        runs.append(load_run(path))
    assert runs[0].check_costs == {"test_a": 12.5}
    stored = Stored(tuple(runs))  # newest first
    assert (stored.check_cost("test_a"), stored.check_cost("test_b"), stored.check_cost("test_c")) == (12.5, 4.0, None)


def test_a_stored_runs_summaries_are_made_once_and_a_changed_copy_makes_its_own() -> None:
    """A night asks a stored file for a case's summaries in its history and its forecast: the same answer each time,
    and a copy with other records (dataclasses.replace) summarizes those, not the original's."""
    run = StoredRun(Path("0001_run.json"), "NVIDIA_H100", {}, {"c": record(host_probe_s=0.002)})
    first = run.summaries("c")
    assert run.summaries("c") == first and first[0].get(PROBE) == 0.002
    first.clear()  # a caller's list is its own
    assert len(run.summaries("c")) == 1
    changed = replace(run, records={"c": record(host_probe_s=0.004)})
    assert changed.summaries("c")[0].get(PROBE) == 0.004 and run.summaries("c")[0].get(PROBE) == 0.002


def test_a_sharded_file_knows_each_case_s_card_and_every_card_its_workers_ran_on(tmp_path: Path) -> None:
    """A file recorded under pytest-xdist names each case's card, and its workers' lines name the start of theirs: the
    full UUIDs stand for those; a file of one process knows its environment's card alone."""
    data = _file([])
    first, second = "GPU-0521f675-dff0-9a67-5303-6b5c367949d6", "GPU-835fcb8a-47e0-0626-860b-63d36184c45d"
    data["machine_info"]["rnnperf"]["environment"] = {"gpu.uuid": first}
    data["machine_info"]["rnnperf"]["workers"] = [f"gw0 NVIDIA H200 ({first[:12]})", f"gw1 NVIDIA H200 ({second[:12]})"]
    path = tmp_path / "0001_baseline.json"
    path.write_text(json.dumps(data))
    older = load_run(path)  # before the cases' cards were stored
    assert older.all_cards == (first, second[:12]) and older.card_of("case") is None and older.ran_on(second)
    data["machine_info"]["rnnperf"]["cards"] = {"case": second}
    path.write_text(json.dumps(data))
    run = load_run(path)
    assert run.all_cards == (first, second) and run.card_of("case") == second and run.card_of("other") is None
    del data["machine_info"]["rnnperf"]["workers"], data["machine_info"]["rnnperf"]["cards"]
    path.write_text(json.dumps(data))
    assert load_run(path).card_of("case") == first and not load_run(path).ran_on(second)
