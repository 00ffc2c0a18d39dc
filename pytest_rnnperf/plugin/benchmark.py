"""pytest-benchmark glue: each timed side of a case becomes one of its benchmark entries.

pytest-benchmark's fixture can be used once per test and times on the host; our samples are already
device-synchronized per step, so they go straight into its session, where --benchmark-json, -save,
-compare and -histogram pick them up like any other benchmark. Its storage is pointed at this GPU
model's baseline folder, so a stored run is both a pytest-benchmark file and an rnnperf baseline.

Under pytest-xdist pytest-benchmark switches itself off in every process. A worker that has a GPU of its own
still times, and hands each record with its entry's names (``entry_source``) to the controller, which adds
the entries to its own session: its --benchmark-json, -save and -compare then work on the merged run.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import CaseRecord, benchmark_extra


class _Entry:
    """The attributes pytest-benchmark's ``Metadata`` reads off a fixture, for one side of a case."""

    def __init__(self, name: str, nodeid: str, params: dict[str, Any], callspec_id: str | None, side: str,
                 group: str, extra_info: dict[str, Any]) -> None:
        """Name the entry after the test with the side inserted first in the parameter id."""
        self.param = f"{side}-{callspec_id}" if callspec_id else side
        self.params = dict(params, side=side)
        self.name = f"{name.split('[')[0]}[{self.param}]"
        self.fullname = nodeid.split("[")[0] + f"[{self.param}]"
        self.group = group
        self.extra_info = extra_info
        self.cprofile_stats = None
        self.has_error = False


def _plain(value: Any) -> Any:
    """A parameter value as JSON-plain data (a Case becomes its id), so stored files parse with plain json."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return getattr(value, "id", repr(value))


def entry_source(item: Any) -> dict[str, Any]:
    """What names a test's entries (its name, node id and parameters), as plain JSON a pytest-xdist worker can hand over."""
    callspec = getattr(item, "callspec", None)
    return {"name": item.name, "nodeid": item.nodeid,
            "params": {k: _plain(v) for k, v in (callspec.params.items() if callspec is not None else ())},
            "callspec_id": callspec.id if callspec is not None else None}


def add_entries(bs: Any, source: dict[str, Any], record: CaseRecord, processes: Sequence[ProcessSummary] = ()) -> list[Any]:
    """Append the record's cuDNN and generic samples to pytest-benchmark's session ``bs`` for the test ``source`` names.

    ``processes``: the summaries of the extra processes the case was recorded in, stored beside its record.
    """
    from pytest_benchmark.stats import Metadata

    added = []
    for side in ("cudnn", "generic"):
        m = getattr(record, side)
        if m is None:
            continue
        entry = _Entry(source["name"], source["nodeid"], source["params"], source["callspec_id"], side, record.id,
                       benchmark_extra(record, side, processes))
        options = {"rounds": len(m.samples), "steps_per_block": m.steps_per_block, "timer": m.timer,
                   "interleaved": record.cudnn is not None}
        md = Metadata(entry, iterations=m.steps_per_block, options=options)
        for sample in m.samples:
            md.stats.update(sample)  # already seconds per step
        bs.benchmarks.append(md)
        added.append(md)
    return added


def off_for_xdist(bs: Any) -> bool:
    """pytest-benchmark switched itself off because pytest-xdist is active (not by --benchmark-disable)."""
    if not bs.disabled:
        return False
    # 5.3 and later say so themselves (xdist_warning: set only when the user had not disabled it).
    if hasattr(bs, "xdist_warning"):
        return bool(bs.xdist_warning)
    # Older releases (5.1, 5.2) only warn: ask the same questions they ask.
    config = bs.config
    by_user = config.getoption("benchmark_disable") and not config.getoption("benchmark_enable")
    xdist = config.getoption("dist", "no") != "no" or os.environ.get("PYTEST_XDIST_WORKER")
    return bool(xdist and not by_user and not bs.skip)


def benchmark_json(config: Any, bs: Any, benchmarks: list[Any] | None = None,
                   meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pytest-benchmark JSON of this run, as ``--benchmark-json`` would write it (data included).

    ``benchmarks`` (some of the session's entries) and ``meta`` (``machine_info["rnnperf"]``) make one GPU
    model's file out of a pytest-xdist run over several models.
    """
    machine_info = bs.get_machine_info()
    if meta is not None:
        machine_info["rnnperf"] = meta
    if benchmarks is None:
        benchmarks = bs.benchmarks
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    return config.hook.pytest_benchmark_generate_json(config=config, benchmarks=benchmarks, include_data=True,
                                                      machine_info=machine_info, commit_info=commit_info)
