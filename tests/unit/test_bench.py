"""pytest-benchmark glue: telling pytest-xdist's automatic switch-off from the user's --benchmark-disable, and
naming what differs between two machines in one line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rnnperf.plugin.benchmark import machine_differences, off_for_xdist


def _session(disabled: bool, options: dict[str, Any], **attrs: Any) -> SimpleNamespace:
    """A pytest-benchmark BenchmarkSession stand-in: its disabled/skip flags and its config's options."""
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    return SimpleNamespace(disabled=disabled, skip=False, config=config, **attrs)


def test_pytest_benchmark_5_3_says_itself_that_xdist_switched_it_off() -> None:
    """5.3+ sets xdist_warning only when it, not the user, disabled the benchmarks."""
    assert off_for_xdist(_session(True, {}, xdist_warning=True))
    assert not off_for_xdist(_session(True, {}, xdist_warning=False))
    assert not off_for_xdist(_session(False, {}, xdist_warning=False))


@pytest.mark.parametrize(("options", "env", "expected"), [
    ({"dist": "load"}, {}, True),                                 # the controller of -n 2
    ({}, {"PYTEST_XDIST_WORKER": "gw1"}, True),                   # a worker
    ({"dist": "load", "benchmark_disable": True}, {}, False),     # the user disabled it under xdist
    ({"dist": "load", "benchmark_disable": True, "benchmark_enable": True}, {}, True),
    ({"benchmark_disable": True}, {}, False),                     # no xdist at all
])
def test_older_pytest_benchmark_is_asked_the_questions_it_asks_itself(
        options: dict[str, Any], env: dict[str, str], expected: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """5.1/5.2 have no xdist_warning (a worker on a lent H100 timed one round because of it): xdist active, user silent."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert off_for_xdist(_session(True, options)) is expected


def test_a_benchmark_json_that_older_pytest_benchmark_already_opened_is_named_not_crashed_on(tmp_path: Path) -> None:
    """pytest-benchmark before 5.3 hands over an open file: one inside the baselines folder is named, others pass."""
    from pytest_rnnperf.plugin.benchmark import option_problems
    from pytest_rnnperf.session.settings import Settings

    root = tmp_path / "baselines"
    (root / "NVIDIA_H100").mkdir(parents=True)
    for target, expected in ((root / "NVIDIA_H100" / "0001_baseline.json", 1), (tmp_path / "run.json", 0)):
        with open(target, "wb") as opened:  # what argparse.FileType("wb") gives it
            options = {"benchmark_json": opened}
            config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default),
                                     invocation_params=SimpleNamespace(dir=tmp_path))
            problems = option_problems(config, Settings.defaults(), root)
        assert len(problems) == expected, problems
        if expected:
            assert "opened and emptied" in problems[0] and "pytest-benchmark 5.3 or later" in problems[0]


def test_machines_that_differ_are_named_field_by_field_with_nested_keys_dotted() -> None:
    """A CPU count, a field only one side has, and a long value cut short; equal fields are not named."""
    stored = {"node": "vm", "cpu": {"count": 16, "flags": ["avx"] * 40}, "python_version": "3.12.3"}
    ours = {"node": "vm", "cpu": {"count": 32, "flags": ["avx"] * 41}, "release": "6.18"}
    assert machine_differences(ours, stored) == [
        "cpu.count: 16 -> 32",
        f"cpu.flags: {str(['avx'] * 40)[:37]}... -> {str(['avx'] * 41)[:37]}...",
        "python_version: 3.12.3 -> absent",
        "release: absent -> 6.18",
    ]
    assert machine_differences(stored, stored) == []
    # Compared as stored in JSON: a live tuple is the list it was saved as.
    assert machine_differences({"cpu": {"hz": (2, 0)}}, {"cpu": {"hz": [2, 0]}}) == []
