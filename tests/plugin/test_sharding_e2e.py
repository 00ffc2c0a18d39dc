"""End-to-end: under ``-n 2`` each worker takes its share of the CPU threads, and the summary says what each spent."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run, unwrapped
from pytest_rnnperf.measure.threads import THREAD_VARIABLES, allowed_cpus, host_cpus, own_cpus, thread_share

# A test that writes what its worker's environment and torch's pools say (torch only where installed).
THREADS_TEST = """
import importlib.util, json, os, subprocess, sys

def test_threads():
    seen = {name: os.environ.get(name) for name in (NAMES)}
    seen["cpus"] = sorted(os.sched_getaffinity(0))
    child = "import os; print(sorted(os.sched_getaffinity(0)))"  # what a backend subprocess inherits
    seen["child cpus"] = json.loads(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout)
    if importlib.util.find_spec("torch") is not None:
        import torch
        seen["torch"] = torch.get_num_threads()
    with open(os.environ["FAKE_THREADS_SEEN"], "w") as out:
        json.dump(seen, out)
"""


def test_each_worker_takes_its_share_of_the_cpu_threads_and_the_summary_says_what_each_spent(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """-n 2 over a recorded baseline: the frameworks of a worker get cpu_count // 2 threads (the user's own setting
    stays), every test runs once, and one summary line gives each worker's seconds, tests and frameworks."""
    for name in (*THREAD_VARIABLES, "XLA_FLAGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    seen = project.path / "threads.json"
    monkeypatch.setenv("FAKE_THREADS_SEEN", str(seen))
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)  # the stored costs the workers are ordered by
    project.makepyfile(test_threads=THREADS_TEST.replace("NAMES", repr((*THREAD_VARIABLES, "XLA_FLAGS"))))
    result = run(project, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=3)

    share = str(thread_share(host_cpus(), 2))
    threads = json.loads(seen.read_text())
    assert threads.pop("torch", int(share)) == int(share)
    # Pinned to its own share of the CPUs (the other worker's threads cannot delay its launches), and so are the
    # subprocesses it starts.
    ran_on = threads.pop("cpus")
    assert threads.pop("child cpus") == ran_on and len(ran_on) == int(share)
    assert ran_on in [own_cpus(allowed_cpus(), k, int(share)) for k in (0, 1)]
    # XLA_FLAGS unset as before: JAX's compile cache keys must match those of a run in one process.
    assert threads == {**{name: share for name in THREAD_VARIABLES}, "OPENBLAS_NUM_THREADS": "7", "XLA_FLAGS": None}
    [line] = [line for line in unwrapped(result.stdout.str()) if line.startswith("workers: ")]
    spent = re.fullmatch(r"workers: gw0 \d+ s \((\d) tests?(: [a-z_, ]+)?\), gw1 \d+ s \((\d) tests?(: [a-z_, ]+)?\)",
                         line)
    assert spent is not None and int(spent[1]) + int(spent[3]) == 3, line
    [time] = [line for line in unwrapped(result.stdout.str()) if line.startswith("where the time went")]
    # The controller hears when each worker's tests start and end: what came before and after them is said too.
    # ... and which worker handed its results over last, and how long its subprocesses took to exit before that.
    assert re.match(r"where the time went \(2 case\(s\), \d+ s over 2 workers of a \d+ s run, \d+ s before the first "
                    r"test, \d+ s after the last \(\d+ s of it until gw[01] handed over its results, \d+\.\d s of those "
                    r"its subprocesses' exit\)\)", time), time



def test_under_two_workers_the_summary_still_says_what_the_budget_cut_and_which_cases_were_checked_fully(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker's budget cuts and full checks reach the controller's summary, one line each, as in one process."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    one = unwrapped(run(project, "--rnnperf-budget=0.00001").stdout.str())
    both = unwrapped(run(project, "-p", "xdist", "-n", "2", "--rnnperf-budget=0.00001").stdout.str())
    for output in (one, both):
        [budget] = [line for line in output if line.startswith("budget ")]
        assert re.match(r"budget 1e-05 min: 2 case\(s\) cut to their minimum rounds", budget), budget
        [checks] = [line for line in output if line.startswith("checks: ")]
        assert "2 compared cuDNN with generic only" in checks, checks


def test_under_two_workers_the_budget_that_cannot_hold_or_foresee_says_so_before_the_first_test(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's lines never reach the terminal: the controller foresees the budget from what the workers collected.
    Two lent H200s ran a first night under -n 2 187 s over its budget without a word before it."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    unpriced = run(project, "-p", "xdist", "-n", "2", "--rnnperf-budget=5")
    unpriced.assert_outcomes(passed=2)
    unpriced.stdout.fnmatch_lines(["rnnperf: --rnnperf-budget=5 cannot be foreseen: 2 of 2 collected case(s) have no "
                                   "stored cost*", "*2 workers [[]2 items[]]*"])
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    short = run(project, "-p", "xdist", "-n", "2", "--rnnperf-budget=0.00001")
    short.stdout.fnmatch_lines(["rnnperf: --rnnperf-budget=1e-05 cannot hold: the collected cases' fixed costs come to "
                                "* s, shared by 2 pytest-xdist workers in 0001_baseline.json*", "*2 workers [[]2 items[]]*"])
    assert "rnnperf: --rnnperf-budget" not in run(project, "-p", "xdist", "-n", "2", "--rnnperf-budget=5").stdout.str()


# A test file of one case of FRAMEWORK.
ONE_CASE_TEST = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape

CASE = Case("FRAMEWORK", "lstm", Shape(4, 2, 3, 5), floor=2.0)

@pytest.mark.parametrize("case", [CASE], ids=[CASE.id])
def test_pair(case, rnnperf):
    rnnperf.check(rnnperf.measure(case))
"""


def test_a_worker_reads_a_framework_at_its_first_test_that_needs_it_not_before_its_first_test(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under -n 2 no one reads a worker's header lines: it no longer holds its first test until every collected
    framework is read, and a framework none of its tests needs is never read there (two lent H100s: 26 s before the
    first test under -n 2, 19 s in one process). In one process every framework is read before the first test, for
    the lines that name the libraries each loaded."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    loaded = project.path / "loaded.txt"
    monkeypatch.setenv("FAKE_LOADED", str(loaded))
    project.makepyfile(test_tf=ONE_CASE_TEST.replace("FRAMEWORK", "tf"))
    run(project, "-p", "xdist", "-n", "2").assert_outcomes(passed=3)
    reads = [tuple(line.split()) for line in loaded.read_text().splitlines()]
    workers = {framework: {w for f, w in reads if f == framework} for framework in ("torch", "tf")}
    assert len(workers["tf"]) == 1 and workers["torch"] <= {"gw0", "gw1"}, reads  # tf: only where its test ran
    assert len(reads) == len(set(reads)), reads  # each framework read once in a worker
    loaded.unlink()
    run(project).assert_outcomes(passed=3)
    assert sorted(loaded.read_text().split()) == ["main", "main", "tf", "torch"]


def test_every_worker_starts_a_collected_frameworks_subprocess_at_collection_as_one_process_does(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under -n 2 each worker launches the subprocess of the one test that needs its own environment once it has
    collected it, so the import runs behind its first tests whichever worker gets the test: started only when the
    test came, a Keras subprocess held that test 13 s on two H200s. One process still starts it at once."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_WORKER_BACKEND", "1")
    loaded, seen = project.path / "loaded.txt", project.path / "seen.txt"
    monkeypatch.setenv("FAKE_LOADED", str(loaded))
    monkeypatch.setenv("FAKE_SEEN", str(seen))
    project.makepyfile(test_faraway=ONE_CASE_TEST.replace("FRAMEWORK", "faraway"))
    run(project, "-p", "xdist", "-n", "2", "--rnnperf-report-dir=out").assert_outcomes(passed=3)
    ran = {line.split()[1] for line in seen.read_text().splitlines() if line.startswith("faraway-")}
    assert len(ran) == 1, seen.read_text()
    # Each worker's subprocess logs go to its own folder, written from the launch on.
    assert sorted(p.parent.name for p in (project.path / "out").glob("gw*/subprocess-*.log")) == ["gw0", "gw1"]
    loaded.unlink()
    run(project).assert_outcomes(passed=3)
    assert "faraway main" in loaded.read_text().splitlines()


# Conftest hooks that write the controller's scheduler as the run left it: each collected test's stored cost and group.
SCHEDULER_SEEN = """

import json, os

SEEN = {}

@pytest.hookimpl(hookwrapper=True)
def pytest_xdist_make_scheduler(config, log):
    outcome = yield
    SEEN["scheduler"] = outcome.get_result()

def pytest_sessionfinish(session):
    scheduler = SEEN.get("scheduler")
    if scheduler is not None:
        with open(os.environ["FAKE_SCHEDULER_SEEN"], "w") as out:
            json.dump({"costs": scheduler._costs, "groups": scheduler._groups}, out)
"""


def test_the_controller_orders_the_tests_by_the_costs_and_frameworks_of_the_history_it_loaded(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The history loads after the scheduler is made: it must read the costs when the workers have collected, not
    the empty store before (on two H200s every test counted as the median and the night ran in collection order,
    each worker starting every framework)."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    seen = project.path / "scheduler.json"
    monkeypatch.setenv("FAKE_SCHEDULER_SEEN", str(seen))
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + SCHEDULER_SEEN)
    run(project, "-p", "xdist", "-n", "2").assert_outcomes(passed=2)
    scheduler = json.loads(seen.read_text())
    assert len(scheduler["costs"]) == 2 and all(cost > 0 for cost in scheduler["costs"]), scheduler  # stored ones
    assert scheduler["groups"] == ["torch", "torch"], scheduler


CROSS_CHECKS = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape, cross_id

CASES = [Case("torch", "lstm", Shape(4, 2, 3, 5)), Case("torch", "rnn_tanh", Shape(4, 2, 3, 5))]

@pytest.mark.parametrize("case", CASES, ids=lambda case: cross_id(case, "tf"))
def test_cross(case, rnnperf):
    rnnperf.check(rnnperf.cross(case, "tf"))
"""


def test_a_worker_whose_framework_ran_out_stops_instead_of_starting_the_other_workers_framework(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two torch cases and two torch-vs-TF checks, none long enough to be worth a framework's start: the worker that
    started TensorFlow runs both checks, the other stops after its torch case, and every test still runs once."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    project.makepyfile(test_cross=CROSS_CHECKS)
    result = run(project, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=4)
    line = next(line for line in unwrapped(result.stdout.str()) if line.startswith("workers: "))
    assert re.fullmatch(r"workers: gw\d \d+ s \(1 test: torch\), gw\d \d+ s \(3 tests: torch, tf\)", line) or \
        re.fullmatch(r"workers: gw\d \d+ s \(3 tests: torch, tf\), gw\d \d+ s \(1 test: torch\)", line), line
