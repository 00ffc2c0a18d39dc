"""pytest-benchmark glue: each timed side of a case becomes one of its benchmark entries.

pytest-benchmark's fixture can be used once per test and times on the host; our samples are already
device-synchronized per step, so they go straight into its session, where --benchmark-json, -save,
-compare and -histogram pick them up like any other benchmark. Its storage is pointed at this GPU
model's baseline folder, so a stored run is both a pytest-benchmark file and an rnnperf baseline.
"""

from __future__ import annotations

from typing import Any

from .records import CaseRecord, benchmark_extra


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


def add_entries(bs: Any, item: Any, record: CaseRecord) -> None:
    """Append the record's cuDNN and generic samples to pytest-benchmark's session ``bs`` for test ``item``."""
    from pytest_benchmark.stats import Metadata

    callspec = getattr(item, "callspec", None)
    params = {k: _plain(v) for k, v in (callspec.params.items() if callspec is not None else ())}
    for side in ("cudnn", "generic"):
        m = getattr(record, side)
        if m is None:
            continue
        entry = _Entry(item.name, item.nodeid, params, callspec.id if callspec is not None else None, side,
                       record.id, benchmark_extra(record, side))
        options = {"rounds": len(m.samples), "steps_per_block": m.steps_per_block, "timer": m.timer,
                   "interleaved": record.cudnn is not None}
        md = Metadata(entry, iterations=m.steps_per_block, options=options)
        for sample in m.samples:
            md.stats.update(sample)  # already seconds per step
        bs.benchmarks.append(md)


def benchmark_json(config: Any, bs: Any) -> dict[str, Any]:
    """The pytest-benchmark JSON of this run, as ``--benchmark-json`` would write it (data included)."""
    machine_info = bs.get_machine_info()
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    return config.hook.pytest_benchmark_generate_json(config=config, benchmarks=bs.benchmarks, include_data=True,
                                                      machine_info=machine_info, commit_info=commit_info)
