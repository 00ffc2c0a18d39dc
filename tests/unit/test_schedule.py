"""pytest-xdist scheduling by stored cost, longest first, and the summary's line on what each worker spent."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from factories import record as make_record
from pytest_rnnperf.plugin.schedule import (
    CostScheduling, Sharding, WorkerCost, case_id, costs_of, longest_first, record_cost, workers_line,
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


def _run(costs: list[float], known: dict[str, float]) -> dict[str, list[float]]:
    """Run tests of ``costs`` seconds on two simulated workers, ``known`` their stored costs: each worker's tests.

    A worker starts a test only once it holds the next (or is told to stop), as pytest-xdist's workers do.
    """
    nodeids = [f"test_x[case{i}]" for i in range(len(costs))]
    sched = CostScheduling(_config(), None, known.get)
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, nodeids)
    sched.schedule()
    clock = {node: 0.0 for node in nodes}
    ran: dict[str, list[float]] = {node.gateway.id: [] for node in nodes}
    while ready := [n for n in nodes if sched.node2pending[n] and (len(sched.node2pending[n]) > 1 or n.shutting_down)]:
        node = min(ready, key=lambda n: clock[n])  # the worker that frees up first takes its next test
        index = sched.node2pending[node][0]
        clock[node] += costs[index]
        ran[node.gateway.id].append(costs[index])
        sched.mark_test_complete(node, index, costs[index])
    assert sched.tests_finished and all(n.shutting_down for n in nodes)
    return ran


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


def test_a_test_without_a_stored_cost_counts_as_the_median() -> None:
    """Its case was never stored (or the test measures no case): neither first nor last."""
    nodeids = ["t[a]", "t[b]", "t[c]", "t_plain", "t[d]"]
    costs = costs_of(nodeids, {"a": 1.0, "b": 3.0, "d": 2.5}.get)
    assert costs == [1.0, 3.0, 2.5, 2.5, 2.5]
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
    for worker, when, seconds in [("gw1", "setup", 0.5), ("gw1", "call", 30.0), ("gw1", "teardown", 0.2),
                                  ("gw0", "setup", 1.0), ("gw0", "call", 40.0), ("gw10", "setup", 0.1)]:
        sharding.pytest_runtest_logreport(SimpleNamespace(node=FakeNode(worker), when=when, duration=seconds))  # type: ignore[arg-type]
    sharding.pytest_runtest_logreport(SimpleNamespace(when="setup", duration=9.0))  # type: ignore[arg-type]
    assert sharding.line() == "workers: gw0 41 s (1 test), gw1 31 s (1 test), gw10 0 s (1 test)"
    assert workers_line({}) == "" and workers_line({"gw0": WorkerCost(2.4, 2)}) == "workers: gw0 2 s (2 tests)"


@pytest.mark.parametrize("nodeid", ["t[a", "t]", "t"])
def test_a_test_id_without_a_parameter_names_no_case(nodeid: str) -> None:
    """Only a whole ``[...]`` at the end is a parameter id."""
    assert case_id(nodeid) == ""


def test_the_plugin_loads_without_pytest_xdist() -> None:
    """pytest-xdist is optional: the plugin (and pytest_configure outside a controller) must not import it."""
    code = ("import sys; sys.modules['xdist'] = None; import pytest_rnnperf.plugin; "
            "assert 'xdist.scheduler' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
