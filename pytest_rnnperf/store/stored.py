"""The stored runs one GPU model's cases are judged against: its baseline files, kept runs and noise."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from pytest_rnnperf.judge import noise
from pytest_rnnperf.judge.noise import Noise
from pytest_rnnperf.model.cases import param_id
from pytest_rnnperf.model.cold import MISS
from pytest_rnnperf.model.records import BaselineError, CaseRecord, StoredRun
from pytest_rnnperf.store.accepts import Accepted
from pytest_rnnperf.store.baselines import root_problem
from pytest_rnnperf.store.history import CaseHistory, case_history, violating_nights
from pytest_rnnperf.store.runs import load_model


@dataclass(frozen=True)
class Stored:
    """One GPU model's stored runs, newest first, and its per-case device-time noise (``noise.json``)."""

    runs: tuple[StoredRun, ...] = ()
    noise: Noise | None = None
    notes: tuple[str, ...] = ()  # what loading them found worth a line in the summary
    accepted: Accepted | None = None  # the change the history restarts at: runs before it are not here
    # Case id -> the stored nights running it regressed on (``history.violating_nights``), for confirm_nights.
    suspects: Mapping[str, int] = field(default_factory=dict)

    @property
    def baseline(self) -> StoredRun | None:
        """The newest baseline file, or None."""
        return self.runs[0] if self.runs else None

    @property
    def older(self) -> list[StoredRun]:
        """The earlier ones, newest first."""
        return list(self.runs[1:])

    def stored_run(self, case_id: str) -> StoredRun | None:
        """The newest baseline file that holds ``case_id``, or None."""
        return next((run for run in self.runs if case_id in run.records), None)

    def check_cost(self, test: str) -> float | None:
        """The seconds the claims or parity test ``test`` took in the newest stored run that timed it, or None."""
        return next((run.check_costs[test] for run in self.runs if test in run.check_costs), None)

    def unrecorded_cost(self, case_id: str) -> float | None:
        """The seconds the test of ``case_id`` took in the newest stored run that timed it without storing its record
        (a known issue, xfail: ``Measured.claims_meta``), or None."""
        return next((seconds for run in self.runs for test, seconds in run.check_costs.items()
                     if param_id(test) == case_id), None)

    def stored_record(self, case_id: str) -> CaseRecord | None:
        """The newest stored record of ``case_id``, or None."""
        run = self.stored_run(case_id)
        return None if run is None else run.records[case_id]

    def scratch_cost(self, case_id: str) -> tuple[str, Mapping[str, float]] | None:
        """The stored ``cost_s`` of ``case_id``'s costliest build on a compile-cache miss, with its file's name; None
        where no stored build of it missed.

        The costliest, not the newest: Inductor reports a miss on warm nights too, at a warm night's cost."""
        missed = [(run.path.name, record.cost_s) for run in self.runs
                  if (record := run.records.get(case_id)) is not None and record.cold is not None
                  and record.cold.cache == MISS and record.cost_s.get("build", 0.0) > 0]
        return max(missed, key=lambda found: found[1]["build"], default=None)

    def newest_records(self, case_id: str) -> Iterator[CaseRecord]:
        """The stored records of ``case_id``, newest first."""
        return (record for run in self.runs if (record := run.records.get(case_id)) is not None)

    def least_build(self, case_id: str, newest: int) -> float | None:
        """The least build seconds among the ``newest`` newest stored records of ``case_id`` that have one, or None."""
        builds = [build for record in self.newest_records(case_id) if (build := record.cost_s.get("build", 0.0)) > 0]
        return min(builds[:newest], default=None)

    def median_phase(self, case_id: str, phase: str, newest: int) -> float | None:
        """The median seconds of ``phase`` among the ``newest`` newest stored records of ``case_id`` that kept their
        costs, or None."""
        spent = [record.cost_s.get(phase, 0.0) for record in self.newest_records(case_id) if record.cost_s][:newest]
        return statistics.median(spent) if spent else None

    def outside_each(self, newest: int) -> float | None:
        """The median seconds a case spent outside its phases (``StoredRun.outside``) over the ``newest`` newest
        stored runs that kept it, or None."""
        each = [run.outside[0] / run.outside[1] for run in self.runs if run.outside is not None][:newest]
        return statistics.median(each) if each else None

    def history(self, case_id: str) -> CaseHistory:
        """The stored processes ``case_id`` is judged against: its newest recorded baseline's, then the kept runs'."""
        return case_history(list(self.runs), case_id)


def load_stored(root: Path, given: str, gpu_slug: str, machine_id: str) -> Stored:
    """This GPU model's stored runs under ``root`` (``given`` as the user named it); BaselineError (one line) if
    one is unusable.

    Each case is judged against its newest stored record: a run recorded with -k (one framework, one shard
    of a sharded job) updates its cases and leaves the others to the files before it.
    """
    wrong_root = root_problem(root, given, gpu_slug)
    if wrong_root:  # baselines/<gpu> given as the root: <gpu>/<gpu>/ would be read and recorded into
        raise BaselineError(f"--rnnperf-baselines / rnnperf_baselines: {wrong_root}")
    loaded = load_model(root, gpu_slug, machine_id)
    if not loaded.runs:
        return Stored(accepted=loaded.accepted)
    for run in loaded.runs:
        path = run.path
        if not run.gpu_slug:
            raise BaselineError(f"{path}: machine_info.rnnperf names no GPU (no gpu_slug), so it cannot be told "
                                f"apart from another model's run; move it out of {root}")
        if run.gpu_slug != gpu_slug:
            raise BaselineError(f"{path}: recorded on {run.gpu_slug} but stored in the folder of "
                                f"{gpu_slug}; move it to {root / run.gpu_slug / path.parent.name}/")
    noise_file = root / gpu_slug / noise.FILE_NAME
    found = noise.load(noise_file) if noise_file.exists() else None
    # A kept run whose every case was suspect holds no record and no report: it tells the next night its suspects,
    # nothing more. One that holds reports only still teaches its cases' history their kernel mix.
    judged = tuple(run for run in loaded.runs if run.records or run.reported)
    return Stored(judged, found, tuple(loaded.notes), loaded.accepted, violating_nights(loaded.runs))
