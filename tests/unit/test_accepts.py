"""Accepted changes: which stored runs a GPU model is judged against after a team accepts a deliberate change."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_rnnperf.model.records import BaselineError, StoredRun
from pytest_rnnperf.store import accepts


def _run(name: str, when: str) -> StoredRun:
    """A stored run with no records, named and dated."""
    return StoredRun(path=Path(name), gpu_slug="H100", environment={}, records={}, datetime=when)


RUNS = [_run("0003_run.json", "2026-11-03T00:00:00+00:00"), _run("0002_run.json", "2026-11-02T00:00:00"),
        _run("0001_baseline.json", "")]


def test_without_an_acceptance_every_run_is_judged_against() -> None:
    """No accepted.json: the runs as they are, none left out."""
    assert accepts.after(RUNS, None) == (tuple(RUNS), 0)


def test_runs_stored_before_the_acceptance_and_undated_runs_are_left_out() -> None:
    """Since 2 November: the runs of 2 and 3 November stay (a naive time reads as UTC); the undated one goes."""
    since = accepts.Accepted(since="2026-11-02T00:00:00+00:00", reason="upgrade", accepted_at="")
    kept, left_out = accepts.after(RUNS, since)
    assert [r.path.name for r in kept] == ["0003_run.json", "0002_run.json"] and left_out == 1


def test_the_newest_acceptance_is_the_latest_since_not_the_last_written(tmp_path: Path) -> None:
    """Two acceptances: judging restarts at the later point in time, whatever order they were stored in."""
    path = tmp_path / accepts.FILE_NAME
    late = accepts.Accepted("2026-11-05T00:00:00+00:00", "driver 580", "t1")
    early = accepts.Accepted("2026-11-01T00:00:00+00:00", "cuDNN 9.19", "t2")
    path.write_text(json.dumps(accepts.with_new(path, late)))
    path.write_text(json.dumps(accepts.with_new(path, early)))
    assert accepts.load(path) == (late, early)
    assert accepts.newest(accepts.load(path)) == late


@pytest.mark.parametrize("text, says", [
    ("{", "not a readable file of accepted changes"),
    ('{"format": 9, "accepted": []}', "not a file of accepted changes of format 1"),
    ('{"format": 1, "accepted": [{"since": "yesterday", "reason": "x"}]}', "accepted[0] needs an ISO 'since' time"),
    ('{"format": 1, "accepted": [{"since": "2026-11-01T00:00:00"}]}', "accepted[0] needs an ISO 'since' time and a 'reason'"),
])
def test_a_bad_accepted_file_is_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    """A file that cannot be used stops loading with one line naming the file and what is wrong."""
    path = tmp_path / accepts.FILE_NAME
    path.write_text(text)
    with pytest.raises(BaselineError, match=re.escape(says)) as raised:
        accepts.load(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
