"""pytest-xdist scheduling by stored cost, longest first, and the summary's line on what each worker spent."""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from factories import record as make_record
from pytest_rnnperf.plugin import schedule
from pytest_rnnperf.plugin.schedule import (
    CostScheduling, Sharding, WorkerCost, case_id, costs_of, frameworks, group_of, keras_groups, longest_first, pick,
    record_cost, starts, workers_line,
)


class FakeNode:
    """A pytest-xdist worker as the scheduler sees it: the tests sent to it, and whether it was told to stop."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        """xdist sends the tests; nothing to do here."""

    def shutdown(self) -> None:
        """No more tests for this worker."""
        self.shutting_down = True


def _config(dist: str = "load") -> Any:
    """The options the scheduler reads from pytest's config: two popen workers."""
    options = {"tx": ["popen", "popen"], "numprocesses": 2, "maxschedchunk": None, "dist": dist}
    return SimpleNamespace(getoption=options.__getitem__, getvalue=options.__getitem__)


@dataclass
class Simulated:
    """Two simulated workers' run: each one's tests (their costs), the frameworks each started, when each ended."""

    ran: dict[str, list[float]]
    frameworks: dict[str, list[str]]
    ended: dict[str, float]


def _started(nodeid: str, models: dict[str, str] | None = None) -> list[str]:
    """The frameworks a test really starts in its worker, whatever the scheduler is told (tests patch what it sees):
    its case's, both of a cross check (``torch-vs-tf-...``), the one running Keras for a ``[tensorflow]`` test, or a
    model test's own (``models``: node id -> framework)."""
    if models and nodeid in models:
        return [models[nodeid]]
    param = case_id(nodeid)
    first, dash, rest = param.partition("-")
    if not (dash and first in frameworks()):
        return [keras_groups().get(param, "")]
    return [first] + ([rest.split("-")[1]] if rest.startswith("vs-") else [])


def _simulate(nodeids: list[str], costs: list[float], known: dict[str, float],
              start: float | dict[str, float] = 0.0, models: dict[str, str] | None = None,
              told: bool = True) -> Simulated:
    """Run ``nodeids`` taking ``costs`` seconds on two workers, ``known`` their stored costs; a worker's first test
    of a framework (``starts``) takes ``start`` seconds more (or ``start[framework]``). ``models``: the framework
    each model test runs on, which its stored record tells the scheduler where ``told``.

    A worker starts a test only once it holds the next (or is told to stop), as pytest-xdist's workers do.
    """
    told_of: dict[str, str] = (models or {}) if told else {}
    sched = CostScheduling(_config(), None, known.get, lambda nodeid: told_of.get(nodeid, ""))
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, nodeids)
    sched.schedule()
    out = Simulated({n.gateway.id: [] for n in nodes}, {n.gateway.id: [] for n in nodes},
                    {n.gateway.id: 0.0 for n in nodes})
    while ready := [n for n in nodes if sched.node2pending[n] and (len(sched.node2pending[n]) > 1 or n.shutting_down)]:
        node = min(ready, key=lambda n: out.ended[n.gateway.id])  # the worker that frees up first takes its next test
        name, index = node.gateway.id, sched.node2pending[node][0]
        for group in _started(nodeids[index], models):
            if group not in out.frameworks[name]:
                out.frameworks[name].append(group)
                out.ended[name] += start.get(group, 0.0) if isinstance(start, dict) else start
        out.ended[name] += costs[index]
        out.ran[name].append(costs[index])
        sched.mark_test_complete(node, index, costs[index])
    assert sched.tests_finished and all(n.shutting_down for n in nodes)
    return out


def _run(costs: list[float], known: dict[str, float]) -> dict[str, list[float]]:
    """Run tests of ``costs`` seconds (each its own case) on two simulated workers: each worker's tests."""
    return _simulate([f"test_x[case{i}]" for i in range(len(costs))], costs, known).ran


def test_the_longest_stored_cases_go_first_and_the_workers_finish_together() -> None:
    """Two long cases collected side by side (xdist's chunks give both to one worker): each worker takes one first,
    then the short ones as it frees up."""
    costs = [1.0, 1.0, 6.0, 6.0, 1.0, 1.0, 1.0, 1.0]
    ran = _run(costs, {f"case{i}": c for i, c in enumerate(costs)})
    assert ran["gw0"][0] == ran["gw1"][0] == 6.0
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(costs)  # every test once
    assert sum(ran["gw0"]) == sum(ran["gw1"]) == 9.0


def test_without_stored_costs_the_tests_go_in_collection_order_one_at_a_time() -> None:
    """Nothing stored: every test counts as the median, collection order stays, and no worker gets a chunk."""
    ran = _run([1.0, 2.0, 3.0, 4.0, 5.0], {})
    assert ran == {"gw0": [1.0, 3.0, 5.0], "gw1": [2.0, 4.0]}  # dealt in turn, each as its worker frees up


def _night(start: float) -> Simulated:
    """A night shaped like the H100's stored 0037 (seconds per test, rounded), each framework's first test in a
    worker ``start`` seconds longer."""
    shape = {"torch": [6.4, 3.0, 2.5, 2.0] + [1.2] * 26, "tf": [21.4, 4.9, 4.1, 2.6] + [2.1] * 26,
             "keras_torch": [7.9, 1.5] + [3.0] * 12, "keras_jax": [2.9, 1.2] + [1.5] * 6,
             "jax": [2.1] + [1.2] * 5, "torch_compile": [6.0, 0.6, 0.6, 0.6]}
    tests = [(f"t[{fw}-{i}]", cost) for fw, costs in shape.items() for i, cost in enumerate(costs)]
    return _simulate([n for n, _ in tests], [c for _, c in tests], {case_id(n): c for n, c in tests}, start)


def test_a_framework_starts_in_one_worker_where_that_keeps_both_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six frameworks, each start 5 s: fewer starts and an earlier end than longest-first alone, which starts
    nearly every framework in both workers; the workers still end within one test and one start."""
    grouped = _night(start=5.0)
    monkeypatch.setattr(schedule, "group_of", lambda nodeid, known: "")  # the scheduler sees no frameworks
    alone = _night(start=5.0)
    starts = {name: sum(len(f) for f in run.frameworks.values()) for name, run in [("grouped", grouped),
                                                                                  ("alone", alone)]}
    assert starts["grouped"] <= 6 + 2 < starts["alone"], (grouped.frameworks, alone.frameworks)
    assert max(grouped.ended.values()) < max(alone.ended.values())
    assert abs(grouped.ended["gw0"] - grouped.ended["gw1"]) <= 6.4 + 5.0


def test_the_longest_test_goes_first_near_the_end_whatever_its_framework() -> None:
    """Left to the last, a long test of another framework would keep one worker busy while the other idles."""
    groups, costs = ["torch", "tf", "tf"], [10.0, 1.0, 1.0]
    assert pick([0, 1, 2], costs, groups, mine={"tf"}, started={"tf", "torch"}, workers=2) == 0
    costs, groups = [10.0] + [9.0] * 5, ["torch"] + ["tf"] * 5  # 10 s against 45 s to come: not yet the end
    assert pick(list(range(6)), costs, groups, mine={"tf"}, started={"tf", "torch"}, workers=2) == 1


def test_a_free_worker_takes_its_framework_then_a_new_one_then_the_longest() -> None:
    """Positions in the pending tests, longest first; a test of no framework goes in its turn."""
    costs = [5.0, 4.0, 3.0, 2.0, 1.0] + [1.0] * 20
    groups = ["torch", "tf", "jax", "", "jax"] + ["tf"] * 20
    pending = list(range(len(costs)))
    assert pick(pending, costs, groups, mine={"jax"}, started={"jax", "torch", "tf"}, workers=2) == 2
    assert pick(pending, costs, groups, mine={"keras_jax"}, started={"torch", "tf", "keras_jax"}, workers=2) == 2 + 1
    assert pick(pending, costs, groups, mine=set(), started={"torch"}, workers=2) == 3  # no framework: as if its own
    assert pick(pending[:3] + pending[4:], costs, groups, mine=set(), started={"torch"}, workers=2) == 1
    assert pick(pending[:3] + pending[4:], costs, groups, mine=set(), started={"torch", "tf", "jax"}, workers=2) == 0
    # A worker that started keras_jax, every other group another worker's: the 5 s torch test is not worth torch's
    # start here, tf's 24 s left are; with starts free, the longest of all.
    assert pick(pending[:3] + pending[4:], costs, groups, mine={"keras_jax"}, started={"torch", "tf", "jax"},
                workers=2) == 1
    assert pick(pending[:3] + pending[4:], costs, groups, mine={"keras_jax"}, started={"torch", "tf", "jax"},
                workers=2, start_s=0.0) == 0
    known = frameworks()
    assert group_of("test_x[keras_jax-lstm-train]", known) == "keras_jax" and group_of("test_plain", known) == ""
    assert group_of("test_x[fp16-T28]", known) == ""  # a parameter that names no framework starts none


def test_a_worker_left_with_a_short_test_of_another_s_framework_stops_instead_of_starting_it() -> None:
    """On two H200s the first worker took one 0.8 s TensorFlow case at the end and paid 8 s to start TensorFlow for
    it. A test of a framework another worker started goes here only where it, or what is left of its framework, is
    worth the start; else this worker stops and the other takes it."""
    assert pick([0, 1], [0.8, 0.5], ["tf", "tf"], mine={"torch"}, started={"torch", "tf"}, workers=2) is None
    assert pick([0, 1], [9.0, 0.5], ["tf", "tf"], mine={"torch"}, started={"torch", "tf"}, workers=2) == 0  # that long
    assert pick([0, 1, 2], [0.8, 0.5, 0.4], ["tf", "tf", ""], mine={"torch"}, started={"torch", "tf"}, workers=2) == 2
    # Simulated: torch and TensorFlow on one worker each, one short TensorFlow case left for last.
    tests = [(f"t[torch-{i}]", 2.0) for i in range(10)] + [(f"t[tf-{i}]", 3.0) for i in range(6)] + [("t[tf-x]", 0.8)]
    nodeids, costs = [n for n, _ in tests], [c for _, c in tests]
    stored = {case_id(n): c for n, c in tests}
    runs = {s: _told_starts_cost(s, lambda: _simulate(nodeids, costs, stored, start=8.0))
            for s in (0.0, schedule.START_S)}
    assert [sum("tf" in f for f in r.frameworks.values()) for r in runs.values()] == [2, 1], runs
    assert max(runs[schedule.START_S].ended.values()) < max(runs[0.0].ended.values()), runs
    for start in (3.0, 8.0):  # the H100-shaped night (``_night``): two starts fewer, an earlier end
        free, told = (_told_starts_cost(s, lambda: _night(start)) for s in (0.0, schedule.START_S))
        assert sum(map(len, told.frameworks.values())) == sum(map(len, free.frameworks.values())) - 2
        assert max(told.ended.values()) < max(free.ended.values())


def _told_starts_cost(start_s: float, simulate: Callable[[], Simulated]) -> Simulated:
    """``simulate()`` with the scheduler told that a framework's start costs ``start_s``."""
    original = schedule.pick
    schedule.pick = functools.partial(original, start_s=start_s)  # type: ignore[assignment]
    try:
        return simulate()
    finally:
        schedule.pick = original


def test_a_test_parametrized_by_a_keras_backend_starts_the_backend_that_runs_keras_there() -> None:
    """The ready suite's Keras tests (``[tensorflow]``, ``[torch]``, ``[jax]``) start a framework as a case does; they
    stay no matrix case, so the budget's forecast does not count them."""
    known, keras = frameworks(), keras_groups()
    nodeid = "suites/test_keras_cases.py::test_lstm_with_dropout_predicts_on_cudnn[{}]"
    assert [starts(nodeid.format(b), known, keras) for b in ("tensorflow", "torch", "jax")] == ["tf", "keras_torch",
                                                                                                 "keras_jax"]
    assert starts("test_x[torch-lstm-train]", known, keras) == "torch"  # a case: its own framework, as before
    assert starts("test_x[fp16]", known, keras) == "" and starts("test_plain", known, keras) == ""
    # Not a case: timed_cases() leaves it out (a bare ``torch`` or ``jax`` was counted as a case with no cost).
    assert [group_of(nodeid.format(b), known) for b in ("tensorflow", "torch", "jax")] == ["", "", ""]


def test_a_costly_keras_test_no_longer_starts_tensorflow_in_the_second_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a two-H100 night, the costliest tests are Keras-on-TensorFlow ones: grouped as ``tf``, TensorFlow starts
    in one worker and the night ends no later; left ungrouped (before), it started in both."""
    shape = [("k[tensorflow]", 12.0), ("m[tensorflow]", 10.0)] + [(f"t[tf-{i}]", 3.0) for i in range(6)] + \
        [(f"t[torch-{i}]", 3.0) for i in range(20)]
    nodeids, costs = [n for n, _ in shape], [c for _, c in shape]
    known_costs = {(case_id(n) if group_of(n, frameworks()) else n): c for n, c in shape}
    grouped = _simulate(nodeids, costs, known_costs, start=4.0)
    monkeypatch.setattr(schedule, "starts", lambda nodeid, known, keras, stored: group_of(nodeid, known))  # as before
    ungrouped = _simulate(nodeids, costs, known_costs, start=4.0)
    tf_in = {name: sum("tf" in f for f in run.frameworks.values()) for name, run in [("grouped", grouped),
                                                                                     ("ungrouped", ungrouped)]}
    assert tf_in == {"grouped": 1, "ungrouped": 2}, (grouped.frameworks, ungrouped.frameworks)
    assert max(grouped.ended.values()) <= max(ungrouped.ended.values())


def test_a_model_test_goes_where_the_framework_its_stored_record_names_started() -> None:
    """On two H200s the ready suite's torch model tests (no framework in their ids) took 5 s each in the worker that
    ran TensorFlow and JAX, which started torch on its GPU for them. Told their stored record's framework, they go
    to torch's worker, the workers start fewer frameworks, and the night ends earlier."""
    known, keras = frameworks(), keras_groups()
    model = "suites/test_models.py::test_{}_on_cudnn"
    assert starts(model.format("char_lm"), known, keras, lambda nodeid: "torch") == "torch"
    assert starts(model.format("char_lm"), known, keras, lambda nodeid: "mxnet") == ""  # no framework it knows
    assert starts(model.format("char_lm"), known, keras) == ""  # no stored record: goes in its turn, as before
    assert starts("t[tf-lstm-a]", known, keras, lambda nodeid: "torch") == "tf"  # a case's own id comes first
    tests = [(f"t[torch-{i}]", cost) for i, cost in enumerate([3.0, 2.0] + [1.0] * 20)]
    tests += [(f"t[tf-{i}]", cost) for i, cost in enumerate([4.0, 3.0] + [1.0] * 14)]
    tests += [(model.format("char_lm"), 2.0), (model.format("bigru_classifier"), 0.5)]
    nodeids, costs = [n for n, _ in tests], [c for _, c in tests]
    stored = {(case_id(n) or n): c for n, c in tests}
    models = {model.format("char_lm"): "torch", model.format("bigru_classifier"): "torch"}
    runs = {told: _simulate(nodeids, costs, stored, start={"torch": 5.0, "tf": 8.0}, models=models, told=told)
            for told in (True, False)}
    starts_of = {told: sum(len(f) for f in run.frameworks.values()) for told, run in runs.items()}
    assert starts_of == {True: 2, False: 3}, {told: run.frameworks for told, run in runs.items()}
    assert max(runs[True].ended.values()) < max(runs[False].ended.values())


def test_a_cross_check_goes_where_its_costlier_framework_started_and_its_worker_starts_both() -> None:
    """Two H200s ran the cross checks 46 s longer sharded than in one process: grouped as torch, each started
    TensorFlow or a Keras subprocess wherever it went. Grouped by its second framework, on a night shaped like the
    H100's stored 0037, each of those starts in one worker and the night ends earlier."""
    known = frameworks()
    cross = "suites/test_cross.py::test_same_weights_same_results[torch-vs-{}-lstm-train-fp32-T{}-B128-I28-H128-L1]"
    assert group_of(cross.format("keras_torch", 28), known) == "keras_torch"
    assert group_of(cross.format("tf", 28), known) == "tf"
    assert group_of("t[torch-vs-unknown-lstm]", known) == "torch" and group_of("t_plain", known) == ""
    shape = {"torch": [6.4, 3.0, 2.5, 2.0] + [1.2] * 26, "tf": [21.4, 4.9, 4.1, 2.6] + [2.1] * 26,
             "keras_torch": [7.9, 1.5] + [3.0] * 12, "keras_jax": [2.9, 1.2] + [1.5] * 6, "jax": [2.1] + [1.2] * 5}
    tests = [(f"t[{fw}-{i}]", cost) for fw, costs in shape.items() for i, cost in enumerate(costs)]
    tests += [(cross.format(fw, t), 0.3) for fw in ("tf", "keras_torch", "keras_jax", "jax") for t in (28, 50)]
    nodeids, costs = [n for n, _ in tests], [c for _, c in tests]
    stored = {case_id(n): c for n, c in tests if "-vs-" not in n}  # no record is stored for a cross check
    start = {"tf": 9.0, "keras_torch": 10.0, "keras_jax": 8.0, "jax": 3.0, "torch": 2.0}
    by_second = _simulate(nodeids, costs, stored, start=start)
    with pytest.MonkeyPatch.context() as patch:  # grouped by the first framework, as before
        patch.setattr(schedule, "starts", lambda nodeid, known, keras, stored: case_id(nodeid).partition("-")[0])
        by_first = _simulate(nodeids, costs, stored, start=start)
    starts_of = [sum(len(f) for f in run.frameworks.values()) for run in (by_second, by_first)]
    assert starts_of[0] < starts_of[1], (by_second.frameworks, by_first.frameworks)
    assert max(by_second.ended.values()) < max(by_first.ended.values())


def test_a_test_without_a_stored_cost_counts_as_the_median() -> None:
    """Its case was never stored (or the test measures no case): neither first nor last."""
    nodeids = ["t[a]", "t[b]", "t[c]", "t_plain", "t[d]"]
    costs = costs_of(nodeids, {"a": 1.0, "b": 3.0, "d": 2.5}.get)
    assert costs == [1.0, 3.0, 2.5, 2.5, 2.5]
    # a model test's record is stored under its node id: the Keras tagger (21 s on an H100) is not a median test
    tagger = "suites/test_keras_models.py::test_masked_bigru_tagger_trains[tensorflow]"
    assert costs_of([tagger, "t[a]", "t[b]"], {tagger: 21.4, "a": 1.0, "b": 3.0}.get) == [21.4, 1.0, 3.0]
    assert longest_first(costs) == [1, 2, 3, 4, 0]
    assert [case_id(n) for n in nodeids] == ["a", "b", "c", "", "d"]


def test_a_cases_cost_is_its_newest_stored_records_phases_together() -> None:
    """build + parity + wall + ...; a record stored before phases were timed knows no cost."""
    assert record_cost(make_record(cost_s={"build": 2.0, "parity": 1.5, "wall": 0.5})) == 4.0
    assert record_cost(make_record()) is None and record_cost(None) is None


def test_only_the_default_load_mode_is_scheduled_by_cost() -> None:
    """-n gives --dist load; loadscope, loadfile, worksteal, each stay pytest-xdist's own."""
    sharding = Sharding(lambda case: None)
    assert isinstance(sharding.pytest_xdist_make_scheduler(_config("load"), None), CostScheduling)  # type: ignore[arg-type]
    assert sharding.pytest_xdist_make_scheduler(_config("loadfile"), None) is None  # type: ignore[arg-type]


def test_the_summary_says_what_each_worker_spent_in_its_tests() -> None:
    """Setup, call and teardown of every test a worker ran, in worker order; a test counts once."""
    sharding = Sharding(lambda case: None)
    for worker, when, seconds, nodeid in [
            ("gw1", "setup", 0.5, "t[tf-a]"), ("gw1", "call", 30.0, "t[tf-a]"), ("gw1", "teardown", 0.2, "t[tf-a]"),
            ("gw0", "setup", 1.0, "t[jax-b]"), ("gw0", "call", 40.0, "t[jax-b]"), ("gw0", "setup", 1.0, "t[torch-c]"),
            ("gw10", "setup", 0.1, "t_plain")]:
        sharding.pytest_runtest_logreport(SimpleNamespace(node=FakeNode(worker), when=when, duration=seconds,  # type: ignore[arg-type]
                                                          nodeid=nodeid))
    sharding.pytest_runtest_logreport(SimpleNamespace(when="setup", duration=9.0, nodeid="t[tf-a]"))  # type: ignore[arg-type]
    assert sharding.line() == "workers: gw0 42 s (2 tests: jax, torch), gw1 31 s (1 test: tf), gw10 0 s (1 test)"
    assert workers_line({}) == "" and workers_line({"gw0": WorkerCost(2.4, 2)}) == "workers: gw0 2 s (2 tests)"
    many = WorkerCost(9.0, 9, tuple(f"fw{i}" for i in range(9)))
    assert workers_line({"gw0": many}) == "workers: gw0 9 s (9 tests: fw0, fw1, fw2, fw3, fw4, fw5 and 3 more)"


@pytest.mark.parametrize("nodeid", ["t[a", "t]", "t"])
def test_a_test_id_without_a_parameter_names_no_case(nodeid: str) -> None:
    """Only a whole ``[...]`` at the end is a parameter id."""
    assert case_id(nodeid) == ""


def test_the_plugin_loads_without_pytest_xdist() -> None:
    """pytest-xdist is optional: the plugin (and pytest_configure outside a controller) must not import it."""
    code = ("import sys; sys.modules['xdist'] = None; import pytest_rnnperf.plugin; "
            "assert 'xdist.scheduler' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_controller_foresees_each_matrix_case_once_and_a_team_test_only_where_it_is_stored() -> None:
    """A cuDNN test and its reference test time one case; a team's model test is a case where stored by node id."""
    ids = ["suites/test_cudnn.py::test_cudnn_vs_generic[torch-lstm-a]",
           "suites/test_cudnn.py::test_generic_vs_reference[torch-lstm-a]",
           "tests/test_mine.py::test_encoder", "tests/test_mine.py::test_helper"]
    stored = {"tests/test_mine.py::test_encoder": 4.0}.get
    assert schedule.timed_cases(ids, frozenset({"torch"}), stored) == ["torch-lstm-a", "tests/test_mine.py::test_encoder"]
