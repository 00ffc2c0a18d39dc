"""What a test uses: the ``rnnperf`` fixture, for the ready suite's cases and for a team's own model.

    def test_my_encoder(rnnperf):
        rnnperf.check(rnnperf.model(Encoder, inputs=lambda: torch.randn(64, 100, 32), floor=2.0))

Every call measures through the run's session and returns the record; ``check`` fails the test with a
table when a path proof, the parity, the floor or the baseline comparison does not hold. A record the test never
checked is checked when the test function returns (``check_forgotten``), so a forgotten ``check`` cannot pass a
regression; a test that expects a failure says so with ``pytest.raises(pytest.fail.Exception)`` around ``check``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, NoReturn

import pytest

from pytest_rnnperf.backends import ModelError, ModelOptions, model_backend_for
from pytest_rnnperf.judge.claims import ClaimRow, failure_message
from pytest_rnnperf.measure.subprocesses import SubprocessFailed
from pytest_rnnperf.model.cases import Case, ModelCase
from pytest_rnnperf.model.records import CaseRecord, CrossRecord
from pytest_rnnperf.plugin.benchmark import add_entries, entry_source, off_for_xdist
from pytest_rnnperf.plugin.ids import model_case_id
from pytest_rnnperf.session.measuring import Skipped
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings


def known_issue(item: pytest.Item) -> bool:
    """The item is marked to fail (``xfail(strict=True)``, or xfail under ``xfail_strict``): a known issue, whose
    failing is an answer of the environment."""
    marker = item.get_closest_marker("xfail")
    return marker is not None and bool(marker.kwargs.get("strict", item.config.getini("xfail_strict")))


def _fail(message: str) -> NoReturn:
    """Fail the test with ``message`` alone: no traceback, and no chained exception that repeats it."""
    raise pytest.fail.Exception(message, pytrace=False) from None


def _not_a_builder(build: Any) -> str | None:
    """Why ``build`` cannot be called to build a model (a model itself, or nothing callable); None when it can."""
    if not callable(build):
        return (f"the first argument must build the model (a class, or a function returning the model), "
                f"got {type(build).__name__} {build!r:.60}")
    if isinstance(build, type):
        return None
    try:  # a model is callable too, but calling it runs its forward without inputs
        model_backend_for(build)
    except ModelError:
        return None
    name = type(build).__name__
    if type(build).__module__.split(".")[0] == "keras":  # one build per copy: the model's function, not the model
        return f"got a built Keras {name}; pass the function that builds it: rnnperf.model(build_model, ...)"
    return (f"got an instance of {name}; pass what builds it: rnnperf.model({name}, ...) or "
            f"rnnperf.model(lambda: {name}(...), ...)")


def _takes_arguments(value: Any) -> str | None:
    """Why ``value`` cannot be called bare, as the plugin calls it (it asks for arguments); None where it can."""
    if not callable(value):
        return None
    try:
        params = inspect.signature(value).parameters.values()
    except (TypeError, ValueError):  # a builtin without a readable signature: left to the call itself
        return None
    asked = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not asked:
        return None
    name = getattr(value, "__name__", type(value).__name__)
    return f"a callable must take no arguments; {name} asks for {', '.join(asked)}"


class RnnperfFixture:
    """Measure and check cases of the ready suite or a team's own model, bound to one test."""

    def __init__(self, session: RnnperfSession, item: pytest.Item, settings: Settings, bench: Any) -> None:
        """Bind to the requesting test: its settings (marker > command line > ini) and its id."""
        self._session = session
        self._item = item
        self._settings = settings
        self._bench = bench  # pytest-benchmark's BenchmarkSession, or None without it
        self._models: set[str] = set()  # case ids of the models this test checked (one record per case id)
        # What the test has run: "parity" (reference or cross checks only) or "timed" (a cuDNN case or a model).
        # Only a test that checked parity alone is remembered for a stored run to stand for it later.
        self._ran: set[str] = set()
        self._unchecked: list[CaseRecord | CrossRecord] = []  # what the test measured and has not passed to check()
        self.case_ids: list[str] = []  # every case the test measured, to tell a known issue's (xfail) apart

    @property
    def _disabled(self) -> bool:
        """--benchmark-disable (or pytest-xdist workers sharing a GPU): one round, nothing recorded; the checks still run."""
        if self._bench is None or not self._bench.disabled:
            return False

        # pytest-benchmark turns itself off in every pytest-xdist worker; one with a GPU of its own still times.
        return not (off_for_xdist(self._bench) and self._session.parallel_reason() is None)

    def _skipped_by_benchmark(self) -> None:
        """--benchmark-skip skips every measured test."""
        if self._bench is not None and self._bench.skip:
            pytest.skip("benchmarks are skipped (--benchmark-skip)")

    def _recorded(self, record: CaseRecord) -> CaseRecord:
        """Hand the record's samples to pytest-benchmark (for its JSON, storage and compare); it awaits its check."""
        self._measured(record)
        if self._bench is not None and not self._disabled:
            if off_for_xdist(self._bench):  # a pytest-xdist worker: the controller adds them to its pytest-benchmark
                self._session.measured.bench_sources.append((entry_source(self._item), record))
            else:
                add_entries(self._bench, entry_source(self._item), record, self._session.measured.processes.get(record.id, ()))
        return record

    def measure(self, case: Case) -> CaseRecord:
        """cuDNN against generic on the GPU: path proofs, parity, interleaved timing. Skips without a GPU.

        A known issue (a test marked ``xfail(strict=True)``) is skipped on a GPU where a stored run saw it fail as
        marked in tonight's environment within --rnnperf-recheck-days (the rule of a case's full check).
        """
        self._not_a_case("measure", case)
        if known_issue(self._item):
            self._session.load((case.framework,))  # its fields compared whatever the scope: it may run first
            reason = self._session.claims_reason(self._item.name, kind="known issue",
                                                 frameworks=self._scoped(case, (case.framework,)), case_id=case.id)
            if reason is not None:
                pytest.skip(reason)
        self._times()
        return self._run(case, ("cudnn", "generic"))

    def reference(self, case: Case) -> CaseRecord:
        """Generic side alone against the float64 reference, on the GPU if there is one, else on the CPU.

        On a GPU the test is skipped where a stored run checked it in tonight's environment within
        --rnnperf-recheck-days (the rule of a case's full check).
        """
        self._not_a_case("reference", case)
        self._parity_only(case, (case.framework,))
        return self._run(case, ("generic",))

    def _times(self) -> None:
        """The test times something: no stored run may stand for it, even where its parity checks held before."""
        self._ran.add("timed")
        self._forget()

    def _forget(self) -> None:
        """Take this test off the list of those a stored run may stand for."""
        claim_tests = self._session.measured.claim_tests
        claim_tests[:] = [t for t in claim_tests if t != self._item.name]

    def _parity_only(self, case: Case, frameworks: tuple[str, ...]) -> None:
        """Skip a test that checks parity alone where a stored run's answer for it holds tonight (``claims_reason``).

        A test parametrized by ``case`` (the ready suite's) checks that case alone: only a change that can touch
        ``frameworks`` runs it again. Any other test may check more than it shows here: any change does.
        """
        if not self._ran:
            reason = self._session.claims_reason(self._item.name, kind="parity",
                                                 frameworks=self._scoped(case, frameworks))
            if reason is not None:
                pytest.skip(reason)
        self._ran.add("parity")

    def _scoped(self, case: Case, frameworks: tuple[str, ...]) -> tuple[str, ...]:
        """``frameworks`` where the test is parametrized by ``case`` (it checks that case alone), else none: any
        change counts for a test that may check more than it shows."""
        params = getattr(getattr(self._item, "callspec", None), "params", {})
        return frameworks if any(value is case for value in params.values()) else ()

    def _not_a_case(self, call: str, case: Any) -> None:
        """Fail in one line when ``case`` is no Case (a case id, a tuple of settings): the call would raise deep inside."""
        if not isinstance(case, Case):
            _fail(f"{self._item.nodeid}: rnnperf.{call}(): got {type(case).__name__} {case!r:.60}; pass a Case, e.g. "
                  f"Case(\"torch\", \"lstm\", Shape(...)) (from pytest_rnnperf.model.cases import Case, Shape)")

    def _run(self, case: Case, impls: tuple[str, ...]) -> CaseRecord:
        """Measure a matrix case (checked by the caller to be one) or skip with the one-line reason."""
        self._skipped_by_benchmark()
        try:
            record = self._session.measurer().measure(case, impls, self._settings, self._disabled)
        except Skipped as exc:
            pytest.skip(str(exc))
        except SubprocessFailed as exc:  # a backend subprocess died: say which and quote its log, no traceback
            _fail(f"{case.id}: {exc}")
        return self._recorded(record)

    def model(self, build: Callable[[], Any], inputs: Any, *, mode: str = "train", precision: str | None = None,
              floor: float = 1.0, name: str = "", backend: str | None = None, targets: Any = None, loss: Any = None,
              optimizer: Any = None, step: Callable[..., Any] | None = None, allow_generic: bool = False,
              parity_inputs: Any = None) -> CaseRecord:
        """Check a team's own model: ``build()`` returns it (a torch ``nn.Module`` or a Keras 3 model with LSTM/GRU layers).

        ``inputs`` is what the model is called on (a tensor or array, a tuple/list/dict of them, a PackedSequence for
        torch) or a callable returning it. The plugin copies the model for each side with identical weights (a Keras
        model: one ``build()`` per copy, ``use_cudnn`` set on every LSTM/GRU layer), proves the path of each copy,
        checks outputs and gradients against each other and against a float64 copy, times both sides, and stores and
        compares a baseline under this test's id (plus ``name`` when one test checks several models). Without a GPU it
        checks the generic path against float64 and says the cuDNN side was not run. A model its backend has no cuDNN
        path for (both copies generic: nothing timed is judged) is checked fully once per environment, as a case's full
        check: on a GPU night in the environment of its last passing check, within --rnnperf-recheck-days (or, after a
        change, on a night short of its budget that checked another case fully), its stored record is returned instead
        of measuring it again. ``mode`` is "train" (a training
        step) or "infer" (predict); ``precision`` defaults to the rnnperf(precision=...) marker / option (fp32).

        Keras only: ``backend`` ("tensorflow", "torch", "jax") runs the check on that Keras backend, in a subprocess
        when this process runs another (``build`` and ``inputs`` must then be module-level); ``targets``, ``loss`` and
        ``optimizer`` make the train step fit-like (default: the compiled loss and optimizer, else fixed upstream
        gradients and no update); ``step(model, x, y)`` replaces the timed step; ``allow_generic=True`` accepts
        layers that ask for cuDNN (``use_cudnn=True``) where they cannot have it; ``parity_inputs`` (a list of more
        batches shaped like ``inputs``, or a callable returning one) makes parity run on each batch too and keep every
        quantity's worst error.
        """
        self._skipped_by_benchmark()
        self._times()
        case_id = model_case_id(self._item, name)
        if case_id in self._models:  # a stored run holds one record per case id
            named = f"named {name!r}" if name else "without a name"
            pytest.fail(f"{case_id}: rnnperf.model(): this test already checked a model {named}; give each model of "
                        f"a test its own name=", pytrace=False)
        self._models.add(case_id)
        try:  # a mode, precision or floor the check cannot use is the test's mistake: one line, no traceback
            case = ModelCase(id=case_id, framework="unknown", mode=mode, precision=precision or self._settings.precision,
                             floor=floor)
        except ValueError as exc:
            _fail(f"{case_id}: rnnperf.model(): {exc}")
        problem = _not_a_builder(build)
        if problem:
            _fail(f"{case_id}: rnnperf.model(): {problem}")
        for what, given in (("build", build), ("inputs", inputs), ("targets", targets),
                            ("parity_inputs", parity_inputs)):  # each is called bare
            if (problem := _takes_arguments(given)) is not None:
                _fail(f"{case_id}: rnnperf.model(): {what}: {problem}")
        if backend is not None and not isinstance(backend, str):
            _fail(f"{case_id}: rnnperf.model(): backend= takes a Keras backend name such as 'torch', got {backend!r}")
        options = ModelOptions(targets=targets, loss=loss, optimizer=optimizer, step=step,
                               allow_generic=bool(allow_generic), parity_inputs=parity_inputs)
        # A generic-only model's stored check holds (nothing of it is judged against its history): its stored record
        # stands for tonight's, not measured again, and the summary counts it.
        if self._session.model_reason(case_id) is not None and (stored := self._session.stored.stored_record(case_id)):
            return stored
        try:
            record = self._session.measurer().measure_model(case, build, inputs, self._settings, self._disabled, options=options,
                                                 backend=backend)
        except Skipped as exc:
            pytest.skip(str(exc))
        except (ModelError, SubprocessFailed) as exc:
            _fail(f"{case_id}: {exc}")
        return self._recorded(record)

    def cross(self, case: Case, other: str = "tf") -> CrossRecord:
        """The case's canonical weights in its framework and in ``other``: cuDNN sides where a GPU is seen.

        Skipped on a GPU where a stored run checked it in tonight's environment, as ``reference`` is.
        """
        self._not_a_case("cross", case)
        self._parity_only(case, (case.framework, other))
        try:
            record = self._session.measurer().measure_cross(case, other)
        except Skipped as exc:
            pytest.skip(str(exc))
        except SubprocessFailed as exc:
            _fail(f"{case.id} against {other}: {exc}")
        self._measured(record)
        return record

    def check(self, record: CaseRecord | CrossRecord) -> None:
        """Fail with a table when a path proof, the parity, the floor or the baseline comparison does not hold."""
        if not isinstance(record, (CaseRecord, CrossRecord)):  # e.g. None from a helper that forgot to return
            _fail(f"{self._item.nodeid}: rnnperf.check(): got {type(record).__name__} {record!r:.60}; pass what "
                  f"rnnperf.model(), measure(), reference() or cross() returned")
        self._unchecked = [r for r in self._unchecked if r is not record]
        self._fail_on(self._session.problems(record))
        if self._ran == {"parity"}:  # held tonight: a stored run may stand for it while the environment holds
            self._session.measured.passed_tonight(self._item.name, "parity")

    def _measured(self, record: CaseRecord | CrossRecord) -> None:
        """Remember a record until ``check`` sees it, and its case for the known-issue count (xfail)."""
        self._unchecked.append(record)
        self.case_ids.append(record.id)

    def check_forgotten(self) -> None:
        """Fail the test as ``check`` would for every record it measured and never checked (called as it returns)."""
        unchecked, self._unchecked = self._unchecked, []
        self._fail_on([problem for record in unchecked for problem in self._session.problems(record)])

    def _fail_on(self, problems: list[str]) -> None:
        """Fail the test with the table of ``problems``, if any."""
        if problems:
            self._forget()  # an earlier check of this test may have held: the test as a whole did not
            pytest.fail("\n".join(problems), pytrace=False)


class ClaimsFixture:
    """Rows of the claims table measured by one test; the session reports them, ``check`` fails broken promises."""

    def __init__(self, session: RnnperfSession, test: str = "") -> None:
        """Bind to the run's session (the report holds every test's rows) and the test's name."""
        self._session = session
        self._test = test
        self.rows: list[ClaimRow] = []

    def add(self, *rows: ClaimRow) -> None:
        """Put rows into the session's claims table."""
        self.rows += rows
        self._session.measured.claims += rows

    def check(self) -> None:
        """Fail the test with every row of it that broke a promise of the product."""
        broken = [failure_message(r) for r in self.rows if r.failure]
        if broken:
            pytest.fail("\n".join(broken), pytrace=False)
        if self._test and self.rows:  # measured and kept its promises: a stored run may stand for it later
            self._session.measured.passed_tonight(self._test, "claims")
