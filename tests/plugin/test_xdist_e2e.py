"""End-to-end: ``pytest -n <gpus>`` puts one pytest-xdist worker on each fake GPU and merges what they measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FAKE_GPU_CONFTEST, load_json, run
from pytest_rnnperf.measure.threads import allowed_cpus, cpu_ranges, host_cpus, own_cpus, thread_share

LSTM = "torch-lstm-train-fp32-T4-B2-I3-H5-L1"
GRU = "torch-gru-train-fp32-T4-B2-I3-H5-L1"
UUID = "GPU-0000000{}-aaaa-bbbb-cccc-1234567890ab"
H100 = "NVIDIA H100 80GB HBM3"


def _seen(path: Path) -> set[tuple[str, str, str, str]]:
    """(case, xdist worker, backend subprocess?, CUDA_VISIBLE_DEVICES) of every build the fake backend did."""
    return {tuple(line.split()) for line in path.read_text().splitlines()}  # type: ignore[misc]


def _baselines(project: pytest.Pytester) -> list[Path]:
    """Every stored baseline file, in path order."""
    return sorted(project.path.glob("baselines/*/*/*.json"))


def test_two_workers_on_two_gpus_time_every_case_and_merge_it(project: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """-n 2 on two GPUs: each worker pins its own GPU, times its case on the cuDNN side, and the controller merges
    the cases, their devices, pytest-benchmark's entries and one baseline file."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_SEEN", str(project.path / "seen.txt"))
    result = run(project, "-p", "xdist", "-n", "2", "--rnnperf-report-dir=out", "--benchmark-json=out.json",
                 "--rnnperf-update-baseline")
    result.assert_outcomes(passed=2)
    gpus = f"gw0 NVIDIA H200 ({UUID.format(0)[:12]}), gw1 NVIDIA H200 ({UUID.format(1)[:12]})"
    # Each worker pinned itself to its own CPUs, and the summary (which hears the workers) says which.
    cpus = [sorted(own_cpus(allowed_cpus(), k, thread_share(host_cpus(), 2))) for k in (0, 1)]
    pinned = f"gw0 NVIDIA H200 ({UUID.format(0)[:12]}) on CPUs {cpu_ranges(cpus[0])}, " \
             f"gw1 NVIDIA H200 ({UUID.format(1)[:12]}) on CPUs {cpu_ranges(cpus[1])}"
    result.stdout.fnmatch_lines([f"rnnperf: pytest-xdist: 2 workers, one GPU each: {gpus}",
                                 "*rnnperf summary*", f"pytest-xdist: 2 workers, one GPU each: {pinned}",
                                 "cuDNN vs generic*", "*baseline recorded: *0001_baseline.json*"])
    assert "SKIPPED" not in result.stdout.str()

    report = load_json(project.path / "out" / "rnnperf.json")
    assert sorted(r["case"]["id"] for r in report["results"]) == [GRU, LSTM]  # every case once
    assert all(r["cudnn"] is not None for r in report["results"])  # timed on the cuDNN side, not skipped
    workers = {w["worker"]: w for w in report["workers"]}
    assert {w: (workers[w]["cuda_visible_devices"], workers[w]["device"]["uuid"]) for w in workers} == {
        "gw0": (UUID.format(0), UUID.format(0)), "gw1": (UUID.format(1), UUID.format(1))}
    assert sorted(c for w in workers.values() for c in w["cases"]) == [GRU, LSTM]
    # What the framework saw: each case was built in the worker that reports it, under that worker's pin.
    assert _seen(project.path / "seen.txt") == {(c, w, "0", workers[w]["cuda_visible_devices"])
                                                for w in workers for c in workers[w]["cases"]}

    entries = load_json(project.path / "out.json")
    assert sorted((b["group"], b["params"]["side"]) for b in entries["benchmarks"]) == [
        (GRU, "cudnn"), (GRU, "generic"), (LSTM, "cudnn"), (LSTM, "generic")]
    assert entries["benchmarks"][0]["stats"]["rounds"] == 8
    assert len(entries["machine_info"]["rnnperf"]["workers"]) == 2

    [stored] = _baselines(project)
    assert stored.parent.parent.name == "NVIDIA_H200"
    data = load_json(stored)
    assert {b["group"] for b in data["benchmarks"]} == {GRU, LSTM}
    assert data["machine_info"]["rnnperf"]["workers"] == gpus.split(", ")
    # Each case's card is its worker's: the file's environment names the first worker's alone.
    assert data["machine_info"]["rnnperf"]["cards"] == {c: workers[w]["device"]["uuid"] for w in workers
                                                         for c in workers[w]["cases"]}
    assert len(set(data["machine_info"]["rnnperf"]["cards"].values())) == 2
    md = (project.path / "out" / "summary.md").read_text()
    assert f"- gw1: NVIDIA H200, uuid {UUID.format(1)}, CUDA_VISIBLE_DEVICES={UUID.format(1)}" in md

    # The next run is judged in the workers against that file; the verdicts reach the controller's summary, and
    # pytest-benchmark's own compare sees the merged entries beside the stored ones.
    again = run(project, "-n", "2", "--rnnperf-report-dir=out", "--benchmark-compare",
                "--benchmark-compare-fail=median:50%")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*against the history*", "*device x3*", "verdicts: 2 unchanged"])
    tables = (project.path / "out" / "benchmark.txt").read_text()  # pytest-benchmark's tables, out of the terminal
    for source in ("0001_", "NOW)"):
        assert f"test_pair[cudnn-torch-gru-train-fp32-T4-B2-I3-H5-L1] ({source}" in tables
    assert again.ret == pytest.ExitCode.OK
    assert {v["case"] for v in load_json(project.path / "out" / "rnnperf.json")["verdicts"]} == {GRU, LSTM}


def test_a_night_under_two_workers_is_kept_for_the_history_and_the_next_night_is_judged_against_it(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A two-GPU runner records its baseline and keeps its nightly under -n 2 (the workflow adds -n auto where a
    runner has several GPUs, and such a night was refused before its first test): each file holds both workers'
    cases and GPUs and the parity test a worker passed (a later night skips it as stored), and the next night, under
    -n 2 or in one process, counts the kept run among the stored processes."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    project.makepyfile(test_kept_night_reference="""
        from pytest_rnnperf.model.cases import Case, Shape

        def test_reference(rnnperf):
            rnnperf.check(rnnperf.reference(Case("torch", "gru", Shape(6, 3, 3, 5))))
    """)
    run(project, "-n", "2", "--rnnperf-update-baseline").assert_outcomes(passed=3)
    assert load_json(_baselines(project)[0])["machine_info"]["rnnperf"]["claims"] == ["test_reference"]

    def processes(*args: str) -> set[int]:
        """How many stored processes each case is judged across, in a run with ``args``."""
        run(project, *args, "--rnnperf-report-dir=out").assert_outcomes(passed=2, skipped=1)
        return {v["processes"] for v in load_json(project.path / "out" / "rnnperf.json")["verdicts"]}

    [recorded] = processes()
    night = run(project, "-n", "2", "--rnnperf-keep-run")
    night.assert_outcomes(passed=2, skipped=1)
    night.stdout.fnmatch_lines(["*run kept for the history: *0002_run.json*"])
    kept = load_json(project.path / "baselines" / "NVIDIA_H200" / _baselines(project)[0].parent.name / "0002_run.json")
    meta = kept["machine_info"]["rnnperf"]
    assert meta["kind"] == "kept" and meta["gpu_slug"] == "NVIDIA_H200" and len(meta["workers"]) == 2
    assert sorted((b["group"], b["params"]["side"]) for b in kept["benchmarks"]) == [
        (GRU, "cudnn"), (GRU, "generic"), (LSTM, "cudnn"), (LSTM, "generic")]
    assert processes("-n", "2") == processes() == {recorded + 1}


def test_workers_on_two_gpu_models_record_one_baseline_file_per_model(project: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An H200 and an H100 with --dist each (every case on every model): one file under each model's folder with
    that model's entries; the summary has a table per model, each judged against its own model's file next run."""
    monkeypatch.setenv("FAKE_GPU_NAME", f"NVIDIA H200,{H100}")
    result = run(project, "-n", "2", "--dist", "each", "--rnnperf-update-baseline", "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["pytest-xdist: 2 workers, one GPU each: gw0 NVIDIA H200 (*) on CPUs *, gw1 NVIDIA H100 80GB HBM3 (*) on CPUs *",
                                 "", "GPU model NVIDIA H200 (gw0):", "cuDNN vs generic*", "baseline: none for NVIDIA_H200 yet; record one with*",
                                 "", f"GPU model {H100} (gw1):", "cuDNN vs generic*",
                                 "baseline: none for NVIDIA_H100_80GB_HBM3 yet; record one with*",
                                 "*baseline recorded: *NVIDIA_H200*0001_baseline.json",
                                 "*baseline recorded: *NVIDIA_H100_80GB_HBM3*0001_baseline.json"])
    files = {f.parent.parent.name: load_json(f) for f in _baselines(project)}
    assert sorted(files) == ["NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"]
    report = load_json(project.path / "out" / "rnnperf.json")
    for slug, data in files.items():
        [worker] = [w for w in report["workers"] if w["gpu_slug"] == slug]
        assert data["machine_info"]["rnnperf"]["gpu_slug"] == slug
        assert data["machine_info"]["rnnperf"]["workers"] == [f"{worker['worker']} {worker['device']['name']} "
                                                              f"({worker['device']['uuid'][:12]})"]
        assert sorted((b["group"], b["params"]["side"]) for b in data["benchmarks"]) == [
            (GRU, "cudnn"), (GRU, "generic"), (LSTM, "cudnn"), (LSTM, "generic")]  # its own worker's, once
        assert sorted(worker["cases"]) == [GRU, LSTM]
    md = (project.path / "out" / "summary.md").read_text()
    assert md.startswith("## pytest-rnnperf: all checks passed")
    assert "## GPU model NVIDIA H200 (gw0)" in md and f"## GPU model {H100} (gw1)" in md

    again = run(project, "-n", "2", "--dist", "each", "--benchmark-compare")
    again.assert_outcomes(passed=4)
    again.stdout.fnmatch_lines(["GPU model NVIDIA H200 (gw0):", "*verdicts: 2 unchanged*",
                                "*baseline: *NVIDIA_H200*0001_baseline.json*",
                                f"GPU model {H100} (gw1):", "*verdicts: 2 unchanged*",
                                "*baseline: *NVIDIA_H100_80GB_HBM3*0001_baseline.json*",
                                "--benchmark-compare: off: the pytest-xdist workers have GPUs of different models*"])


def test_benchmark_save_over_two_gpu_models_is_refused_before_the_run(project: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-benchmark stores one run in one folder: with two models it would mix them, so it is a usage error."""
    monkeypatch.setenv("FAKE_GPU_NAME", f"NVIDIA H200,{H100}")
    result = run(project, "-n", "2", "--benchmark-autosave")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--benchmark-save / --benchmark-autosave: the pytest-xdist workers have GPUs of "
                                 "different models (gw0 NVIDIA H200 (*), gw1 NVIDIA H100 80GB HBM3 (*))*"])


def test_more_workers_than_gpus_skip_cudnn_cases_and_say_how_many_to_run(project: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """-n 3 on two GPUs: no worker pins a GPU, every cuDNN case skips with the reason, and recording is refused."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    result = run(project, "-n", "3")
    result.assert_outcomes(skipped=2)
    reason = "cuDNN timing needs a GPU per pytest-xdist worker: 3 workers, 2 GPUs; run with -n 2"
    result.stdout.fnmatch_lines([f"rnnperf: pytest-xdist: {reason}", f"SKIPPED [[]2[]]*{reason}"])
    refused = run(project, "-n", "3", "--rnnperf-update-baseline")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: --rnnperf-update-baseline: {reason}; nothing would be timed to store"])
    assert _baselines(project) == []


def test_n_auto_starts_one_worker_per_gpu_where_the_suite_asks_for_it(project: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A conftest's pytest_xdist_auto_num_workers returning gpu_workers (as suites/conftest.py does): -n auto is -n 2."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    project.makeconftest(FAKE_GPU_CONFTEST + """
from pytest_rnnperf.plugin import gpu_workers


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    return gpu_workers(config)
""")
    result = run(project, "-n", "auto")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rnnperf: pytest-xdist: 2 workers, one GPU each: gw0 *, gw1 *"])


def test_a_backend_subprocess_inherits_its_xdist_workers_gpu(project: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Cases of a backend that runs in its own process (as Keras does) are built there under the pinned GPU."""
    from test_subprocesses_e2e import SUBPROCESS_CASES

    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_WORKER_BACKEND", "1")
    monkeypatch.setenv("FAKE_SEEN", str(project.path / "seen.txt"))
    project.makepyfile(test_cases=SUBPROCESS_CASES)
    run(project, "-n", "2", "--rnnperf-report-dir=out").assert_outcomes(passed=2)
    seen = _seen(project.path / "seen.txt")
    assert {(worker, process, pin) for _, worker, process, pin in seen} == {("gw0", "1", UUID.format(0)),
                                                                            ("gw1", "1", UUID.format(1))}
    assert (project.path / "out" / "gw0" / "subprocess-faraway.log").exists()


def test_a_worker_s_failed_case_is_named_by_the_controller_as_it_fails(project: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure's first line travels on the worker's report: the controller's terminal names each failed case
    with its reason before the summary, as one process does."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    result = run(project, "-n", "2")
    result.assert_outcomes(failed=2)
    lines = result.stdout.lines
    heading = next(i for i, line in enumerate(lines) if line.startswith("=") and "rnnperf summary" in line)
    live = [line for line in lines[:heading]
            if line.startswith("rnnperf: test_pair[torch-")]
    assert len(live) == 2 and all(" failed: cuDNN device time regressed against its history" in line for line in live)


def test_workers_that_hand_over_no_results_leave_no_all_checks_passed_and_no_baseline(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted -n 2 night: the workers' results never reach the controller and a test failed. The summary
    counts the failure the controller heard of and names the silent workers; nothing is recorded from the run."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    project.makeconftest(FAKE_GPU_CONFTEST + '''

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """A worker cut off before it hands over its results, as an interrupted controller's workers are."""
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput.pop("rnnperf", None)
''')
    project.makepyfile(test_zz_fails="def test_fails():\n    assert False\n")
    result = run(project, "-n", "2", "--rnnperf-update-baseline")
    result.assert_outcomes(passed=2, failed=1)
    why = "gw0, gw1 handed over no results (the run was interrupted, or they crashed)"
    assert "rnnperf: all checks passed" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*rnnperf summary*", f"rnnperf: 1 test(s) failed; {why}",
                                 f"baseline not recorded: {why}; a baseline must come from a complete run"])
    assert _baselines(project) == []


def test_a_controller_stopped_with_exit_status_0_while_a_worker_runs_records_nothing_and_says_why(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller stops as a failed report comes in, and pytest finishes the session with exit status 0 (as it
    does where its own Ctrl-C handler raises again): the worker that ran the failed test never hands over, and the
    other's timed cases must not become a baseline of a partial run."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    project.makeconftest(FAKE_GPU_CONFTEST + '''

def pytest_runtest_logreport(report):
    """The controller stops at the first failed report (a worker's comes in through this hook)."""
    if report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.exit("stopped", returncode=0)
''')
    project.makepyfile(test_zz_fails="def test_fails():\n    assert False\n")
    result = run(project, "-n", "2", "--rnnperf-update-baseline")
    assert "rnnperf: all checks passed" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*rnnperf summary*", "rnnperf: 1 test(s) failed; *handed over no results*",
                                 "baseline not recorded: *handed over no results*; a baseline must come from a "
                                 "complete run"])
    assert _baselines(project) == []
