"""pytest-xdist: hand out the costliest tests first, one at a time, and tell what each worker spent.

xdist's ``--dist load`` sends tests in collection order and in chunks, so one worker can end with the long
cases while the other idles. ``CostScheduling`` orders the tests by what their cases cost in the newest
stored run that holds them (every phase of the record's ``cost_s``; a test with no stored cost counts as
the median) and keeps each worker at the one test it runs plus the next (a worker starts a test only
once it knows the next one): longest first, each free worker taking the next.

A framework's first case in a worker pays its start (imports, CUDA context, compiled functions; a Keras
subprocess starts at collection, behind the first tests): several seconds each that a second worker would pay
again. So a free worker takes the longest test of a framework it already started, else of one no worker
started, else the longest of all (``pick``): every framework starts in as few workers as keeps both busy. A test
parametrized by a Keras backend alone (``[tensorflow]``) starts the backend that runs Keras there (``starts``); a
cross check (``torch-vs-tf-...``) goes with its second framework, the costlier to start (``group_of``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import AbstractSet, Callable, Mapping, Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScheduling
from xdist.workermanage import WorkerController

from pytest_rnnperf.backends import keras_specs, specs
from pytest_rnnperf.measure.placement import worker_number
from pytest_rnnperf.model.cases import param_id
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.report.text import fit, terminal_width

AHEAD = 2  # tests a worker holds: the one it runs and the next, which it must know to start the first


def case_id(nodeid: str) -> str:
    """The case a test measures: its parameter id (``test_x[torch-lstm-...]`` -> ``torch-lstm-...``), else ""."""
    return param_id(nodeid)


def costs_of(nodeids: Sequence[str], stored: Callable[[str], float | None]) -> list[float]:
    """Each test's stored cost in seconds (``stored`` of its case id, else of its node id: a model test's record is
    stored under its node id); a test with none counts as the median."""
    known = [cost if (cid := case_id(n)) and (cost := stored(cid)) is not None else stored(n) for n in nodeids]
    found = [c for c in known if c is not None]
    middle = statistics.median(found) if found else 0.0
    return [middle if c is None else c for c in known]


def longest_first(costs: Sequence[float]) -> list[int]:
    """Indices of ``costs`` from the largest down; equal costs keep their collection order."""
    return sorted(range(len(costs)), key=lambda i: -costs[i])


def frameworks() -> frozenset[str]:
    """The registered backends' names (``torch``, ``keras_jax``...): the groups a worker may keep to."""
    return frozenset(spec.name for spec in specs())


def group_of(nodeid: str, known: AbstractSet[str]) -> str:
    """The framework a test's case starts (its case id up to the first ``-``, where ``known``; of a cross check
    ``a-vs-b-...``, ``b``), else ""."""
    # A bare framework name is no case id: the ready suite's Keras tests are parametrized ``[torch]``, ``[jax]``.
    first, dash, rest = case_id(nodeid).partition("-")
    if not dash or first not in known:
        return ""
    # A cross check starts both frameworks. Its first is torch, in this process; its second (TensorFlow, a Keras or
    # JAX subprocess) costs most to start: grouped by the first, each check started its second in torch's worker too.
    other = rest.partition("-")[2].partition("-")[0] if rest.startswith("vs-") else ""
    return other if other in known else first


def keras_groups() -> dict[str, str]:
    """Each Keras backend's name (``tensorflow``, ``torch``, ``jax``) and the backend that runs Keras on it."""
    return {name: spec.name for name, spec in keras_specs().items()}


def no_framework(nodeid: str) -> str:
    """What ``starts`` knows of a test's stored record without one: no framework."""
    return ""


def starts(nodeid: str, known: AbstractSet[str], keras: Mapping[str, str],
           stored: Callable[[str], str] = no_framework) -> str:
    """The framework a test starts in its worker: its case's (``group_of``), for a test parametrized by a Keras
    backend alone (the ready suite's ``test_...[tensorflow]``) the backend that runs Keras there, else the one its
    stored record names (``stored`` of its node id: a model test), where ``known``; else ""."""
    # Such a test is no matrix case (the budget does not count it), but it starts its framework all the same: left
    # without a group, the costliest of them started TensorFlow in both workers where one would have done, and the
    # torch model tests started torch on the GPU of a worker that had none (5 s each on two H200s).
    found = group_of(nodeid, known) or keras.get(case_id(nodeid), "")
    return found or (framework if (framework := stored(nodeid)) in known else "")


# What starting a framework in a worker costs (imports, CUDA context, cuDNN handles): TensorFlow's first test in the
# second of two H200 workers took 8.6 s against 0.8 s in one process (2026-11-28).
START_S = 8.0


def pick(pending: Sequence[int], costs: Sequence[float], groups: Sequence[str], mine: AbstractSet[str],
         started: AbstractSet[str], workers: int, start_s: float = START_S) -> int | None:
    """Position in ``pending`` (longest first) of the test a free worker takes next; None: none is worth its while.

    The longest of a group the worker started (``mine``), else the longest of a group no worker started
    (``started``), else the longest of all; a test of no group ("") starts nothing and goes in its turn. Near
    the end (the longest test is half a worker's share of what is left or more) the longest goes first
    whatever its group: left for last, it would keep one worker busy while the others idle. A worker that started a
    group takes a test of a group another worker started only where it is worth starting that group here
    (``start_s``): the test is that long, or what is left of its group that much twice; else it takes none and stops.
    """
    def worth(index: int) -> bool:
        """Whether this worker may take the test: its own group's, a new one's, or worth the group's start here."""
        group = groups[index]
        if not mine or not group or group in mine or group not in started or costs[index] >= start_s:
            return True
        return sum(costs[i] for i in pending if groups[i] == group) >= 2 * start_s

    if costs[pending[0]] * workers * 2 >= sum(costs[i] for i in pending):
        return next((position for position, index in enumerate(pending) if worth(index)), None)
    fresh = None
    for position, index in enumerate(pending):
        group = groups[index]
        if not group or group in mine:
            return position
        if fresh is None and group not in started:
            fresh = position
    if fresh is not None:
        return fresh
    return next((position for position, index in enumerate(pending) if worth(index)), None)


class CostScheduling(LoadScheduling):
    """``--dist load`` with the costliest tests first, handed out one at a time as workers free up."""

    collection: list[str] | None  # xdist's: the tests every worker collected, once they agree

    def __init__(self, config: pytest.Config, log: Producer | None, stored: Callable[[str], float | None],
                 framework: Callable[[str], str] = no_framework) -> None:
        super().__init__(config, log)
        self._stored = stored
        self._framework = framework  # the framework a test's stored record names (``starts``)
        self._groups: list[str] = []  # the framework each collected test starts (``starts``)
        self._costs: list[float] = []  # each collected test's stored cost (``costs_of``)
        self._started: dict[WorkerController, set[str]] = {}  # the frameworks each worker was sent

    def schedule(self) -> None:
        """Order the collection by cost and deal each worker its first tests; xdist's own for anything else."""
        collections = list(self.node2collection.values())
        if self.collection is not None or not collections or any(c != collections[0] for c in collections):
            super().schedule()  # later calls, and different collections (xdist reports them)
            return
        collection: list[str] = collections[0]
        self.collection = collection
        known, keras = frameworks(), keras_groups()
        self._groups = [starts(nodeid, known, keras, self._framework) for nodeid in collection]
        self._costs = costs_of(collection, self._stored)
        self.pending[:] = longest_first(self._costs)
        for _ in range(AHEAD):
            for node in self.nodes:
                self._send_tests(node, 1)
        if not self.pending:
            for node in self.nodes:
                node.shutdown()

    def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
        """Top the worker up to ``AHEAD`` tests from the front of the pending ones; shut it down when none are left."""
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()
            return
        missing = AHEAD - len(self.node2pending[node])
        if missing > 0:
            self._send_tests(node, missing)

    def _send_tests(self, node: WorkerController, num: int) -> None:
        """Send ``num`` tests, each ``pick``'s choice for this worker (xdist's own order before the collection is
        known, or where the collections differ)."""
        if not self._groups:
            super()._send_tests(node, num)
            return
        mine = self._started.setdefault(node, set())
        for _ in range(num):
            if not self.pending:
                return
            # A group only a stopping worker started is as good as new: someone must start it again.
            started = set().union(*(groups for other, groups in self._started.items() if not other.shutting_down))
            position = pick(self.pending, self._costs, self._groups, mine, started | mine, len(self.nodes))
            if position is None:  # what is left belongs to other workers' frameworks, too little to start them here
                node.shutdown()
                return
            index = self.pending.pop(position)
            mine.add(self._groups[index])
            self.node2pending[node].append(index)
            node.send_runtest_some([index])


@dataclass(frozen=True)
class WorkerCost:
    """What one pytest-xdist worker spent: seconds in its tests' setup, call and teardown, how many tests, and the
    frameworks it started (``starts``), in the order it started them."""

    seconds: float = 0.0
    tests: int = 0
    frameworks: tuple[str, ...] = ()


SHOWN_FRAMEWORKS = 6  # a worker's frameworks named on its line; a run of other tests has many "groups"


def _worker_text(cost: WorkerCost) -> str:
    """e.g. ``41 s (15 tests: torch, tf)``; past ``SHOWN_FRAMEWORKS``, how many more."""
    tests = f"{cost.tests} test{'' if cost.tests == 1 else 's'}"
    named = ", ".join(cost.frameworks[:SHOWN_FRAMEWORKS])
    more = len(cost.frameworks) - SHOWN_FRAMEWORKS
    named += f" and {more} more" if more > 0 else ""
    return f"{cost.seconds:.0f} s ({tests}{': ' + named if named else ''})"


def workers_line(costs: Mapping[str, WorkerCost]) -> str:
    """e.g. ``workers: gw0 41 s (15 tests: torch, tf), gw1 40 s (15 tests: jax)`` (empty without workers)."""
    if not costs:
        return ""
    shown = (f"{w} {_worker_text(costs[w])}" for w in sorted(costs, key=lambda w: (worker_number(w), w)))
    return "workers: " + ", ".join(shown)


def timed_cases(nodeids: Sequence[str], known: AbstractSet[str], stored: Callable[[str], float | None]) -> list[str]:
    """The cases a controller's workers will time, as their node ids name them: each matrix case's id once (its
    cuDNN test and its reference test share it), and each test stored under its node id (a team's model test)."""
    found = (case_id(n) if group_of(n, known) else n for n in nodeids if group_of(n, known) or stored(n) is not None)
    return list(dict.fromkeys(found))


class Sharding:
    """The pytest-xdist controller's part: the cost-ordered scheduler, the budget's line before the run (a worker's
    own lines never reach the terminal), and what each worker's tests took."""

    def __init__(self, stored: Callable[[str], float | None],
                 ahead: Callable[[list[str]], str | None] = lambda cases: None,
                 framework: Callable[[str], str] = no_framework) -> None:
        self.stored = stored
        self.ahead = ahead  # the budget's line for these cases (``Budget.ahead``), or None
        self.framework = framework  # the framework a test's stored record names (``starts``)
        self.costs: dict[str, WorkerCost] = {}
        self.known = frameworks()
        self.keras = keras_groups()
        self.foreseen = False

    def pytest_xdist_node_collection_finished(self, node: WorkerController, ids: Sequence[str]) -> None:
        """The first worker to finish collecting: the budget's line, before any test runs."""
        if self.foreseen:
            return
        self.foreseen = True
        line = self.ahead(timed_cases(ids, self.known, self.stored))
        reporter = node.config.pluginmanager.get_plugin("terminalreporter")
        if line and reporter is not None:
            for part in fit([line], terminal_width(node.config.get_terminal_writer().fullwidth)):
                reporter.write_line(part)

    @pytest.hookimpl(tryfirst=True)  # before xdist's own (trylast), and only for its default mode
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> CostScheduling | None:
        """``--dist load`` (what ``-n`` gives): the costliest tests first; any other mode stays xdist's."""
        return CostScheduling(config, log, self.stored, self.framework) if config.getvalue("dist") == "load" else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a worker's report (xdist names the worker in ``report.node``); a test counts once, at its setup."""
        node = getattr(report, "node", None)
        if node is None:
            return
        worker = str(node.gateway.id)
        old = self.costs.get(worker, WorkerCost())
        group = starts(report.nodeid, self.known, self.keras, self.framework)
        frameworks = old.frameworks + ((group,) if group and group not in old.frameworks else ())
        self.costs[worker] = WorkerCost(old.seconds + report.duration, old.tests + (report.when == "setup"), frameworks)

    def line(self) -> str:
        """The summary's line on what each worker spent."""
        return workers_line(self.costs)


def record_cost(record: CaseRecord | None) -> float | None:
    """A stored record's seconds over every phase; None without one (or one stored before phases were timed)."""
    return sum(record.cost_s.values()) if record is not None and record.cost_s else None


def record_framework(record: CaseRecord | None) -> str:
    """The framework a stored record's case or model ran on; "" without one."""
    return record.case.framework if record is not None else ""
