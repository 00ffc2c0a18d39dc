"""What pytest-xdist workers hand the controller, how it merges them, and the baselines it records from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import record
from fake_nvml import FakeNVML

from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.measure.placement import place
from pytest_rnnperf.report.files import as_json_safe
from pytest_rnnperf.report.rows import build_rows
from pytest_rnnperf.report.text import summary_lines
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession, WorkerRun
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.judge.verdicts import CaseVerdict, Policy, judge

SOFTWARE = {"python": "3.11.7", "python_minor": "3.11"}


def worker(k: int, nvml: FakeNVML, runtime: dict[str, dict[str, str]], **fields: Any) -> RnnperfSession:
    """A worker's session on GPU k of ``nvml`` (two workers), with the given framework runtime fields."""
    placement = place(f"gw{k}", 2, {}, nvml)
    assert placement.index == k
    return RnnperfSession(Run(gpu=read_gpu_info(k, nvml), software=SOFTWARE, placement=placement),
                          Measured(runtime=runtime, **fields))


def controller(tmp_path: Path) -> RnnperfSession:
    """The controller's session, recording into ``tmp_path``/baselines."""
    return RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software=SOFTWARE, root=tmp_path / "baselines",
                              machine_id="Linux-CPython-3.11-64bit"))


def stub_json(entries: list[Any] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stands in for pytest-benchmark's JSON: the entries it was given and the rnnperf section."""
    return {"benchmarks": entries or [], "machine_info": {"rnnperf": meta}}


def test_a_verdict_survives_the_trip_to_the_controller() -> None:
    """CaseVerdict.as_dict -> JSON -> from_dict gives the same verdict (device basis, kernel time, host overhead)."""
    base = record(cudnn_dev_ms=0.5, generic_dev_ms=2.0, seed=1)
    slower = record(cudnn_ms=1.2, cudnn_dev_ms=0.6, generic_dev_ms=2.0, seed=2)
    for verdict in (judge(base, slower, Policy()), judge(record(seed=1), record(cudnn_ms=1.2, seed=2), Policy())):
        assert verdict is not None
        assert CaseVerdict.from_dict(json.loads(json.dumps(as_json_safe(verdict.as_dict())))) == verdict


def test_the_controller_merges_results_verdicts_unjudged_skips_and_benchmark_entries(tmp_path: Path) -> None:
    """Everything a worker measured and judged reaches the controller; its entries go through ``add_entries``. Its
    count of failures does not: the controller heard each failed report itself (plugin/live.py)."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    done = record(cudnn_dev_ms=0.5, generic_dev_ms=2.0)
    verdict = judge(done, done, Policy())
    assert verdict is not None
    gw1 = worker(1, nvml, {"torch": {"torch.version": "2.13"}}, results=[done], verdicts={done.id: verdict},
                 unjudged=["torch-gru"], failed=1, skipped=[("c", "why")], notes=["a note"])
    source = {"name": "test_pair[x]", "nodeid": "t.py::test_pair[x]", "params": {}, "callspec_id": "x"}
    gw1.measured.bench_sources.append((source, done))
    run = controller(tmp_path)
    added: list[tuple[dict[str, Any], Any]] = []
    run.merge_worker(gw1.worker_output(), add_entries=lambda source, rec: added.append((source, rec)) or ["entry"])
    [merged] = run.workers()
    assert (merged.id, merged.gpu.uuid, merged.placement.pin) == ("gw1", nvml.uuids[1], nvml.uuids[1])
    assert [r.id for r in run.measured.results] == [done.id] and run.measured.results[0].cudnn == done.cudnn
    assert run.measured.verdicts == {done.id: verdict} and run.measured.unjudged == ["torch-gru"]
    assert (run.measured.failed, run.measured.skipped, run.measured.notes) == (0, [("c", "why")], ["a note"])
    assert [(s["nodeid"], r.id) for s, r in added] == [("t.py::test_pair[x]", done.id)] and merged.entries == ["entry"]


def test_workers_of_one_model_record_one_file_with_every_frameworks_fields(tmp_path: Path) -> None:
    """gw0 ran the torch cases, gw1 the TF ones: no conflict, one file whose environment holds both."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = controller(tmp_path)
    for k, runtime in enumerate(({"torch": {"torch.cudnn_version": "9.19.0"}}, {"tf": {"tf.cudnn_version": "9.3.0"}})):
        gw = worker(k, nvml, runtime, results=[record(case_id=f"case{k}")])
        gw.measured.bench_sources.append(({}, gw.measured.results[0]))
        run.merge_worker(gw.worker_output(), add_entries=lambda source, rec: [{"name": rec.id}])
    [line] = run.record_baseline(stub_json, benchmarks_on=True)
    assert line.startswith("baseline recorded: ") and "NVIDIA_H200/Linux-CPython-3.11-64bit/0001_baseline.json" in line
    stored = json.loads(Path(line.split(": ", 1)[1]).read_text())
    meta = stored["machine_info"]["rnnperf"]
    assert [b["name"] for b in stored["benchmarks"]] == ["case0", "case1"]
    assert meta["environment"]["torch.cudnn_version"] == "9.19.0" and meta["environment"]["tf.cudnn_version"] == "9.3.0"
    assert [w.split(" (")[0] for w in meta["workers"]] == ["gw0 NVIDIA H200", "gw1 NVIDIA H200"]


def test_workers_of_one_model_that_disagree_on_the_fingerprint_record_nothing(tmp_path: Path) -> None:
    """Two H200 workers with different cuDNN builds: the baseline is refused with the field, not written."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = controller(tmp_path)
    for k, version in enumerate(("9.19.0", "9.20.0")):
        run.merge_worker(worker(k, nvml, {"torch": {"torch.cudnn_version": version}},
                                results=[record(case_id=f"case{k}")]).worker_output())
    assert run.record_baseline(stub_json, benchmarks_on=True) == [
        "baseline of NVIDIA_H200 not recorded: its workers disagree on the fingerprint (torch.cudnn_version 9.19.0 (gw0) "
        "vs 9.20.0 (gw1)); a baseline must come from one setup"]
    assert not (tmp_path / "baselines").exists()


def test_workers_on_two_models_record_a_file_each_and_report_each_model_apart(tmp_path: Path) -> None:
    """An H200 and an H100 worker: one file per model, and one report view per model with its own results."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    run = controller(tmp_path)
    for k in range(2):
        gw = worker(k, nvml, {}, results=[record(case_id=f"case{k}")])
        gw.measured.bench_sources.append(({}, gw.measured.results[0]))
        run.merge_worker(gw.worker_output(), add_entries=lambda source, rec: [{"name": rec.id}])
    lines = run.record_baseline(stub_json, benchmarks_on=True)
    assert ["NVIDIA_H200/" in lines[0], "NVIDIA_H100_80GB_HBM3/" in lines[1]] == [True, True]
    views = run.model_views()
    assert [(v.gpu.gpu_slug, [r.id for r in v.measured.results]) for v in views] == [
        ("NVIDIA_H200", ["case0"]), ("NVIDIA_H100_80GB_HBM3", ["case1"])]
    assert [w["gpu_slug"] for w in run.as_dict()["workers"]] == ["NVIDIA_H200", "NVIDIA_H100_80GB_HBM3"]


def test_the_run_s_ending_names_the_last_worker_to_hand_over_with_the_seconds_its_subprocesses_took_to_exit(
        tmp_path: Path) -> None:
    """Each worker times its subprocesses' exit before it hands over; the controller's ending takes the last one's."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = controller(tmp_path)
    assert run.ending() is None  # no test ended: nothing to say
    for k, close_s in ((0, 0.4), (1, 6.5)):
        gw = worker(k, nvml, {}, results=[record(case_id=f"case{k}")])
        gw.close()  # no subprocess started: timed all the same
        assert gw.close_s is not None and 0 <= gw.close_s < 1
        gw.close_s = close_s
        run.merge_worker(gw.worker_output())
    run.tests_ended = 100.0
    run.handed_over = {"gw1": 107.4, "gw0": 101.0}
    ending = run.ending()
    assert ending is not None and (ending.worker, ending.close_s) == ("gw1", 6.5)
    assert abs((ending.handover_s or 0) - 7.4) < 1e-9
    assert [w.as_dict()["close_s"] for w in run.workers()] == [0.4, 6.5]
    # One process: its own exit only.
    one = worker(0, nvml, {})
    one.tests_ended, one.close_s = 5.0, 1.5
    assert one.ending() is not None and (one.ending().worker, one.ending().close_s) == ("", 1.5)  # type: ignore[union-attr]


def _planned(tmp_path: Path, nvml: FakeNVML) -> RnnperfSession:
    """The controller of ``controller``, foreseeing two workers on the GPUs of ``nvml`` (``-n 2``)."""
    run = controller(tmp_path)
    run.plan = [WorkerRun(place(f"gw{k}", 2, {}, nvml), read_gpu_info(k, nvml)) for k in range(2)]
    return run


def test_a_worker_that_handed_over_nothing_is_named_and_leaves_no_baseline_and_no_kept_run(tmp_path: Path) -> None:
    """-n 2 interrupted while the controller waited: gw0's results came, gw1's never did, and pytest passed exit status
    0 (its own Ctrl-C handler raised again). The summary names gw1 instead of "all checks passed", nothing is stored."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = _planned(tmp_path, nvml)
    gw0 = worker(0, nvml, {}, results=[record(case_id="case0")])
    gw0.measured.bench_sources.append(({}, gw0.measured.results[0]))
    run.merge_worker(gw0.worker_output(), add_entries=lambda source, rec: [{"name": rec.id}])
    why = "gw1 handed over no results (the run was interrupted, or it crashed)"
    assert summary_lines(run)[0] == f"rnnperf: {why}"
    assert run.record_baseline(stub_json, benchmarks_on=True) == [
        f"baseline not recorded: {why}; a baseline must come from a complete run"]
    assert run.keep_run(stub_json, benchmarks_on=True) == [f"run not kept: {why}; the history keeps complete runs only"]
    assert run.measured.unrecorded and not (tmp_path / "baselines").exists()  # asked for, not written: exit status 1


def test_failures_the_controller_heard_of_count_once_and_the_status_says_so_without_the_workers_results(
        tmp_path: Path) -> None:
    """The controller counts each failed report as it arrives (plugin/live.py); a worker's own count of the same
    reports is not added again, and with the workers' results lost the status still says how many failed."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = _planned(tmp_path, nvml)
    run.measured.failed = 2  # heard as gw0's two failed reports came
    run.merge_worker(worker(0, nvml, {}, results=[record(case_id="case0")], failed=2).worker_output())
    assert run.measured.failed == 2
    assert summary_lines(run)[0] == ("rnnperf: 2 test(s) failed; gw1 handed over no results (the run was interrupted, "
                                     "or it crashed)")
    run.merge_worker(None, error="worker gw1 crashed")  # xdist reported its test as failed: heard already
    assert run.measured.failed == 2


def test_an_interruption_pytest_did_not_pass_on_as_its_exit_status_records_nothing(tmp_path: Path) -> None:
    """A second Ctrl-C inside pytest's own handler leaves pytest_sessionfinish an exit status of 0: the interruption
    the plugin heard of (pytest_keyboard_interrupt) keeps the partial run out of the baselines and the history."""
    run = controller(tmp_path)
    run.measured.results.append(record())
    run.interrupted = "the run was interrupted (KeyboardInterrupt)"
    assert build_rows(run).status == "the run was interrupted (KeyboardInterrupt)"
    assert run.record_baseline(stub_json, benchmarks_on=True) == [
        "baseline not recorded: the run was interrupted (KeyboardInterrupt); a baseline must come from a complete run"]
    assert run.keep_run(stub_json, benchmarks_on=True) == [
        "run not kept: the run was interrupted (KeyboardInterrupt); the history keeps complete runs only"]
    assert not (tmp_path / "baselines").exists()


def test_a_worker_handed_down_twice_is_merged_once(tmp_path: Path) -> None:
    """pytest-xdist calls testnodedown twice for a worker stopped by Ctrl-C, with the same output: its cases once."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    run = controller(tmp_path)
    gw0 = worker(0, nvml, {}, results=[record(case_id="case0")])
    gw0.measured.bench_sources.append(({}, gw0.measured.results[0]))
    output = gw0.worker_output()
    added: list[str] = []
    for _ in range(2):
        run.merge_worker(output, add_entries=lambda source, rec: added.append(rec.id) or [{"name": rec.id}])
    assert [r.id for r in run.measured.results] == ["case0"] and added == ["case0"]


def test_a_run_that_failed_only_on_regressions_is_told_how_to_record_them_and_one_with_other_failures_is_not(
        tmp_path: Path) -> None:
    """A record over an old history after a cuDNN update: its failures are the update's regressions, so the refusal
    names --rnnperf-no-fail-regression; a failure the verdicts do not explain (a parity test, an error) gets no hint."""
    slow, fast = record(cudnn_dev_ms=1.0, generic_dev_ms=2.0), record(cudnn_dev_ms=0.5, generic_dev_ms=2.0)
    verdict = judge(fast, slow, Policy())
    assert verdict is not None and verdict.fails
    run = controller(tmp_path)
    run.measured.verdicts[slow.id] = verdict
    run.measured.failed = 1
    assert run.record_baseline(stub_json, benchmarks_on=True) == [
        "baseline not recorded: 1 test(s) failed; a baseline must come from a clean run (all 1 regressed against the "
        "stored history: if that is intended, add --rnnperf-no-fail-regression to record it)"]
    run.measured.failed = 2
    assert run.record_baseline(stub_json, benchmarks_on=True) == [
        "baseline not recorded: 2 test(s) failed; a baseline must come from a clean run"]


def test_a_run_over_two_gpu_models_opens_with_the_failures_and_silent_workers_its_model_blocks_cannot_see(
        tmp_path: Path) -> None:
    """Each GPU model's block judges its workers' share and hears no failed report: the run's own status comes first,
    in the terminal and on the job page, and a clean run still reads "all checks passed"."""
    from pytest_rnnperf.report.markdown import markdown

    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    run = controller(tmp_path)
    for k in range(2):
        run.merge_worker(worker(k, nvml, {}, results=[record(case_id=f"case{k}")]).worker_output())
    assert summary_lines(run)[0] == "rnnperf: all checks passed"
    run.measured.failed = 1  # a failure outside any case's verdict, heard by the controller
    run.interrupted = "the run was interrupted (KeyboardInterrupt)"
    status = "1 test(s) failed; the run was interrupted (KeyboardInterrupt)"
    assert summary_lines(run)[0] == f"rnnperf: {status}"
    assert markdown(run).startswith(f"## pytest-rnnperf: {status}\n")
