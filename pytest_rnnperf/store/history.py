"""A case's history: every stored process of it since its newest recorded baseline, oldest first.

The stored runs of a GPU model (``baselines/<gpu>/<machine id>/NNNN_<tag>.json``) are recorded baselines and
nightly runs kept for the history (``--rnnperf-keep-run``). A case's history starts at the newest baseline
that holds it (recording a baseline is how a team accepts a change: what came before no longer predicts the
case) and takes every kept run after it. Each file gives one process per case, and a baseline recorded with
``--rnnperf-record-processes=N`` gives N. Pure: no pytest, no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import BASELINE, StoredRun


@dataclass(frozen=True)
class CaseHistory:
    """The processes a case is judged against, oldest first, and the stored files they came from."""

    case_id: str
    processes: tuple[ProcessSummary, ...]
    files: tuple[str, ...]  # the files' names, oldest first: the recorded baseline, then the kept runs

    @property
    def since(self) -> str:
        """The recorded baseline the history starts at."""
        return self.files[0] if self.files else ""


def case_history(runs: Sequence[StoredRun], case_id: str) -> CaseHistory:
    """The history of ``case_id`` in ``runs`` (newest first, as ``store.baselines.find_all`` lists them)."""
    taken: list[StoredRun] = []
    for run in runs:
        if case_id not in run.records:
            continue
        taken.append(run)
        if run.kind == BASELINE:
            break
    taken.reverse()
    return CaseHistory(case_id, tuple(s for run in taken for s in run.summaries(case_id)),
                       tuple(run.path.name for run in taken))


def case_ids(runs: Sequence[StoredRun]) -> list[str]:
    """Every case id the runs hold, in the order they first appear."""
    return list(dict.fromkeys(case_id for run in runs for case_id in run.records))


def violating_nights(runs: Sequence[StoredRun]) -> dict[str, int]:
    """Case id -> the nights running its regression showed on, as the newest stored run that names the case says.

    ``runs`` newest first: a kept run lists its suspect cases (and leaves their records out); a run that holds a
    case's record ends its streak. A case no run names as suspect is left out (0 nights).
    """
    out: dict[str, int] = {}
    for run in runs:
        for case_id in (*run.suspects, *run.records):
            out.setdefault(case_id, run.suspects.get(case_id, 0))
    return {case_id: n for case_id, n in out.items() if n}
