"""The one metric vocabulary: every metric a record stores or a renderer shows has one entry in model/metrics.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_rnnperf
from pytest_rnnperf.judge.verdicts import Policy, judge
from pytest_rnnperf.model.metrics import (BUSY, COMPILE, COMPILE_CACHED, DURATION, FIRST_CALL, FIRST_CALL_CACHED,
                                          HINTS, KERNEL, METRICS, NOT_MEASURED, RECORD_FIELDS, RATIO, SECONDS, SPEEDUP,
                                          WALL, metric, named, numeric_paths, show, side_tag)
from pytest_rnnperf.model.process import summarize
from pytest_rnnperf.report.rows import (CASE_COLUMNS, CASE_METRIC_COLUMNS, COMPARISON_HEADER, VERDICT_HEADER,
                                        VERDICT_METRIC_COLUMNS, comparison_cells, result_cells)
from pytest_rnnperf.store.history import case_history
from pytest_rnnperf.store.runs import load_run

PACKAGE = Path(pytest_rnnperf.__file__).parent
COLD = (FIRST_CALL, COMPILE, FIRST_CALL_CACHED, COMPILE_CACHED)  # seconds a process paid once, not per step
H100 = Path(__file__).parents[2] / "baselines" / "NVIDIA_H100_80GB_HBM3" / "Linux-CPython-3.12-64bit"
# What a renderer draws: every module that turns a metric's value into text.
RENDERERS = sorted([*(PACKAGE / "report").glob("*.py"), *(PACKAGE / "history").glob("*.py"),
                    *(PACKAGE / "cli").glob("*.py"), PACKAGE / "judge" / "compare.py"])
# The columns of a table that name what a row is about or what was decided, not a measured value.
LABEL_COLUMNS = {"case", "path", "basis", "change [95% CI]", "verdict"}


@pytest.fixture(scope="module")
def stored() -> list:
    """Two committed H100 runs: a recorded baseline (with extra processes) and a nightly run kept after it."""
    return [load_run(H100 / "0027_run.json"), load_run(H100 / "0018_baseline.json")]


def test_each_tag_has_one_entry_with_a_unit_and_a_known_hint() -> None:
    names = [m.name for m in METRICS.values()]
    assert len(set(names)) == len(names), "two metrics share a name: a comparison's name would be ambiguous"
    for tag, m in METRICS.items():
        assert m.tag == tag and m.unit and m.hint in HINTS, tag


def test_every_metric_a_stored_record_holds_has_one_entry_in_the_table(stored: list) -> None:
    for run in stored:
        for record in run.records.values():
            paths = numeric_paths(record.to_dict())
            unknown = {p for p in paths if p not in RECORD_FIELDS and p not in NOT_MEASURED}
            assert not unknown, f"{record.id} stores numbers the metric table does not name: {sorted(unknown)}"
            for key in record.metrics():
                assert metric(key).tag == KERNEL
            for process in run.summaries(record.id):
                assert all(metric(key).hint == (RATIO if key == SPEEDUP else SECONDS if metric(key).tag in COLD
                                                else DURATION) for key in process.metrics)
    assert all(tag in METRICS for tag in RECORD_FIELDS.values())


def test_a_stored_field_the_table_does_not_name_is_found() -> None:
    assert numeric_paths({"cudnn": {"p99_s": 1e-3}, "cost_s": {"build": 1.0}}) == {"<side>.p99_s", "cost_s.*"}
    assert "<side>.p99_s" not in RECORD_FIELDS


def test_a_tag_outside_the_table_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="'p99' is not in the metric table"):
        metric("p99")
    assert metric(side_tag("generic", KERNEL + "sgemm")) is METRICS[KERNEL]


def test_every_column_a_table_shows_is_a_label_or_metrics_of_the_table(stored: list) -> None:
    record = next(r for r in stored[0].records.values() if r.cudnn_device is not None)
    assert tuple(result_cells(record)) == CASE_COLUMNS
    for header, metric_columns in ((CASE_COLUMNS, CASE_METRIC_COLUMNS), (VERDICT_HEADER, VERDICT_METRIC_COLUMNS)):
        for column in header:
            assert column in LABEL_COLUMNS or all(t in METRICS for t in metric_columns[column]), column


def test_every_comparison_a_verdict_shows_is_named_in_the_table(stored: list) -> None:
    now, baseline = stored
    shown = 0
    for case_id in [c for c in now.records if c in baseline.records and now.records[c].cudnn is not None][:4]:
        verdict = judge(baseline.records[case_id], now.records[case_id], Policy(),
                        history=case_history([baseline], case_id).processes)
        assert verdict is not None
        for c in (*verdict.comparisons.values(), *verdict.kernels):
            cells = dict(zip(COMPARISON_HEADER, comparison_cells(c)))
            m = named(c.metric)
            assert cells["baseline"] == m.show(c.baseline_median, unit=True, fine=True)
            shown += 1
    assert shown


def test_a_value_is_shown_by_its_hint() -> None:
    assert show(BUSY, 1.5e-3) == "1.500" and show(WALL, 1.5e-3, unit=True, fine=True) == "1.5000 ms"
    assert show(SPEEDUP, 2.5) == "2.50x" and show(SPEEDUP, 2.5, unit=True) == "2.50x" and show(BUSY, None) == "-"
    assert METRICS["wall_speedup"].interval(2.5, 2.4, 2.61) == "2.50x [2.40, 2.61]"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


SCALES = {1e3, 1000, 1e-3, 1e6, 1e-6}
UNIT_AFTER_VALUE = re.compile(r"^(x\b|x$| ?ms\b| ?J\b| ?TFLOP)")
PLOTLY_UNIT = re.compile(r"%\{\w+(:[^}]*)?\}(x\b| ?ms\b)")


def spelled_units(source: str) -> list[str]:
    """Where code spells a metric's scale or unit itself instead of asking the table: a value multiplied into ms,
    a number followed by "x" or "ms" in an f-string, a plotly template's unit."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            if any(isinstance(side, ast.Constant) and side.value in SCALES for side in (node.left, node.right)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.JoinedStr):
            for before, after in zip(node.values, node.values[1:]):
                if isinstance(before, ast.FormattedValue) and isinstance(after, ast.Constant) \
                        and UNIT_AFTER_VALUE.match(str(after.value)):
                    found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and PLOTLY_UNIT.search(node.value):
            found.append(f"line {node.lineno}: {node.value[:80]}")
    return found


@pytest.mark.parametrize("path", RENDERERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_renderer_spells_a_metrics_unit_or_scale_itself(path: Path) -> None:
    assert spelled_units(path.read_text()) == [], f"{path.name} formats a metric without the metric table"


def test_a_renderer_that_spells_its_own_unit_is_caught() -> None:
    assert spelled_units('def f(t):\n    return f"{t * 1e3:.3f}"\n')
    assert spelled_units('def f(s):\n    return f"{s:.2f}x"\n')
    assert spelled_units('T = "%{y:.4f} ms<extra></extra>"\n')
    assert not spelled_units('def f(t):\n    """Times in ms, speedups as 2.50x."""\n    return show("wall", t)\n')
