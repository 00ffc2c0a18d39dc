"""Hooks a ``conftest.py`` (or another plugin) implements to extend pytest-rnnperf, each with an example."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.judge.verdicts import CaseVerdict
    from pytest_rnnperf.report.rows import Rows

hookspec = pytest.hookspec


@hookspec
def pytest_rnnperf_environment(config: pytest.Config) -> dict[str, str] | None:
    """Fields to add to the run's environment: stored with every baseline, diffed when a case regresses.

    Called once, before the header. Keys must not be rnnperf's own fields; values are strings. Example::

        # conftest.py
        import os

        def pytest_rnnperf_environment(config):
            return {"ci.image": os.environ.get("CI_IMAGE", "unknown"), "ci.runner": os.uname().nodename}
    """


@hookspec
def pytest_rnnperf_case_verdict(config: pytest.Config, verdict: CaseVerdict) -> None:
    """Called with each case's verdict against its history, as soon as the case is judged.

    ``verdict.outcome`` is what the summary counts, ``verdict.fails`` whether the test fails on it, and
    ``verdict.as_dict()`` its JSON form. Example::

        # conftest.py
        import json

        def pytest_rnnperf_case_verdict(config, verdict):
            if verdict.fails:
                with open("regressions.jsonl", "a") as fh:
                    fh.write(json.dumps(verdict.as_dict()) + "\\n")
    """


@hookspec
def pytest_rnnperf_report_files(config: pytest.Config, folder: Path, rows: Rows) -> list[str] | None:
    """Write more report files beside rnnperf.json; return the names written (the summary lists them).

    Called once the run's own report files are written, only when ``--rnnperf-report-dir`` is not ``none``.
    ``rows`` holds the report's rows (``rows.as_dict()`` is the table the summary prints). Example::

        # conftest.py
        import csv

        def pytest_rnnperf_report_files(config, folder, rows):
            cases = rows.as_dict()["cases"]
            with open(folder / "cases.csv", "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(cases[0]) if cases else ["case"])
                writer.writeheader()
                writer.writerows(cases)
            return ["cases.csv"]
    """


def reserved(extra: Any, own: dict[str, str]) -> str | None:
    """Why fields a conftest returned from ``pytest_rnnperf_environment`` cannot be taken (None when they can)."""
    if not isinstance(extra, dict):
        return f"returned {type(extra).__name__}, not a dict of str to str"
    bad = [k for k, v in extra.items() if not isinstance(k, str) or not isinstance(v, str) or not k]
    if bad:
        return f"field {bad[0]!r} -> {extra[bad[0]]!r}: keys and values must be non-empty strings"
    # "torch." in ``own`` stands for every field of torch's runtime, which is read only when its first case runs.
    taken = sorted(k for k in extra if k in own or k.startswith("gpu.") or k.split(".", 1)[0] + "." in own)
    if taken:
        return f"field {taken[0]!r} is one of rnnperf's own; name yours with a prefix such as 'ci.'"
    return None
