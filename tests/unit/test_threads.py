"""Each pytest-xdist worker's share of the host's CPU threads, and the fingerprint that must not see it."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_rnnperf.backends.jax import given_xla_flags
from pytest_rnnperf.measure import threads
from pytest_rnnperf.measure.threads import THREAD_VARIABLES, limit_imported, limit_worker, share_env, thread_share

LIMIT = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=8"


@pytest.mark.parametrize(("cpus", "workers", "share"), [(16, 2, 8), (16, 3, 5), (2, 3, 1), (None, 2, 1), (16, 0, 16)])
def test_each_worker_gets_the_hosts_cpus_split_evenly_and_at_least_one(cpus: int | None, workers: int,
                                                                      share: int) -> None:
    """cpu_count // workers, never 0 (more workers than CPUs, or a count os.cpu_count could not read)."""
    assert thread_share(cpus, workers) == share


def test_the_share_limits_every_framework_and_keeps_what_the_user_set() -> None:
    """OpenMP, the BLAS libraries and TensorFlow get the share; the user's MKL setting stays."""
    env = share_env(8, {"MKL_NUM_THREADS": "7", "XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert env == {name: "8" for name in THREAD_VARIABLES if name != "MKL_NUM_THREADS"}


@pytest.mark.parametrize("given", [{}, {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}])
def test_a_worker_leaves_xla_flags_as_they_were_so_its_compiled_programs_serve_one_process_too(
        given: dict[str, str]) -> None:
    """JAX keys its persistent compile cache by XLA_FLAGS: a worker that added its thread limit there missed every
    program one process had compiled, and the reverse."""
    worker = {"PYTEST_XDIST_WORKER_COUNT": "2", **given}
    share = limit_worker(worker, cpus=16)
    assert share is not None and "XLA_FLAGS" not in share.env
    assert worker.get("XLA_FLAGS") == given.get("XLA_FLAGS")


def test_only_a_pytest_xdist_worker_limits_its_threads() -> None:
    """The worker count pytest-xdist sets before any conftest loads decides; one process is left as it is."""
    alone: dict[str, str] = {}
    assert limit_worker(alone, cpus=16) is None and alone == {}
    worker = {"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "3"}
    share = limit_worker(worker, cpus=16)
    assert share is not None and share.threads == 8
    assert worker["OMP_NUM_THREADS"] == "3" and worker["TF_NUM_INTRAOP_THREADS"] == "8"
    assert dict(share.env) == {k: worker[k] for k in share.env}


def test_the_fingerprint_records_the_users_xla_flags_without_a_thread_limit() -> None:
    """A run with -n keys its baselines as one without: a CPU thread limit is not part of jax.xla_flags."""
    assert given_xla_flags(f"--xla_dump_to=/tmp/x {LIMIT}") == "--xla_dump_to=/tmp/x"
    assert given_xla_flags(LIMIT) == ""


def test_torch_imported_before_the_limit_is_limited_all_the_same() -> None:
    """Its intra-op pool is resized; an inter-op pool already started (torch refuses a second size) stays."""
    calls: list[tuple[str, int]] = []

    def refuse(n: int) -> None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started")

    torch = SimpleNamespace(set_num_threads=lambda n: calls.append(("intra", n)), set_num_interop_threads=refuse)
    limit_imported(4, {"torch": torch})
    limit_imported(4, {})  # torch not imported: nothing to do
    assert calls == [("intra", 4)]


@pytest.mark.parametrize("line, cpus", [("3200000 100000\n", 32), ("150000 100000", 2), ("max 100000", None),
                                        ("", None), ("50000 0", None)])
def test_a_containers_cpu_quota_is_read_as_whole_cpus(line: str, cpus: int | None) -> None:
    """cgroup v2 cpu.max: 32 CPUs' worth of quota is 32, 1.5 rounds up to 2, no quota (or nonsense) is none."""
    assert threads.quota_cpus(line) == cpus


def test_the_host_cpus_are_the_affinity_within_the_quota(tmp_path: Path) -> None:
    """A 2-CPU quota caps what the affinity allows; a missing cpu.max leaves the affinity."""
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    allowed = len(os.sched_getaffinity(0))
    assert threads.host_cpus(tmp_path / "cpu.max") == min(allowed, 2)
    assert threads.host_cpus(tmp_path / "absent") == allowed


def test_numpys_blas_loaded_before_the_share_is_limited_all_the_same() -> None:
    """NumPy (and its BLAS pool) is imported with the plugin, before the worker knows its share: limited after."""
    import numpy
    from threadpoolctl import threadpool_info, threadpool_limits

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    if not blas:
        pytest.skip("this NumPy loads no BLAS that threadpoolctl can see")
    before = max(p["num_threads"] for p in blas)
    try:
        threads.limit_imported(1, {"numpy": numpy})
        assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == [1] * len(blas)
    finally:
        threadpool_limits(limits=before)


@pytest.mark.parametrize(("allowed", "worker", "share", "own"), [
    (range(32), 0, 16, list(range(16))), (range(32), 1, 16, list(range(16, 32))),
    ({8, 2, 4, 6}, 1, 2, [6, 8]),  # in order, whatever order the affinity came in
    (range(2), 2, 1, [0]),  # more workers than CPUs: round again
    ((), 0, 4, [])])
def test_each_worker_owns_its_run_of_the_allowed_cpus(allowed: range | set[int] | tuple[()], worker: int, share: int,
                                                      own: list[int]) -> None:
    """Worker k of n takes the k-th run of its share: no two workers of a host share a CPU while there are enough."""
    assert threads.own_cpus(allowed, worker, share) == own


def test_cpus_are_named_as_taskset_names_them() -> None:
    """Runs as ranges, lone CPUs alone, in order."""
    assert threads.cpu_ranges({3, 0, 1, 2, 7, 9, 10}) == "0-3,7,9-10"
    assert threads.cpu_ranges(set()) == ""


def test_every_thread_of_the_process_is_pinned_and_a_thread_that_ended_is_passed_over(tmp_path: Path) -> None:
    """Pools started before the pin (NumPy's BLAS) are moved too; a thread gone by now is no error."""
    for tid in ("101", "102", "103"):
        (tmp_path / tid).mkdir()
    pinned: dict[int, set[int]] = {}

    def setaffinity(tid: int, cpus: set[int]) -> None:
        if tid == 102:
            raise ProcessLookupError(3, "No such process")
        pinned[tid] = set(cpus)

    assert threads.pin_process({4, 5}, tmp_path, setaffinity) == 2
    assert pinned == {101: {4, 5}, 103: {4, 5}}
    assert threads.pin_process(set(), tmp_path, setaffinity) == 0  # nothing to pin to: nothing changes
