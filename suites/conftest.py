"""Parametrize the suite's cases from the matrices at the scale chosen by --rnnperf-scale, for every backend."""

from __future__ import annotations

import pytest

from pytest_rnnperf.backends import cross_pairs, specs
from pytest_rnnperf.model.cases import cross_id
from pytest_rnnperf.plugin import gpu_workers, require_plugin, resolved_scale
from .matrix import cross_cases, known_issue, paired_cases, reference_cases


def pytest_configure(config: pytest.Config) -> None:
    """Refuse in one line a run where pytest did not load the plugin (autoload off), before anything is collected."""
    require_plugin(config, "the ready suite")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``cudnn_case``/``reference_case``: every registered backend's matrix; ``cross_case``: the cross checks."""
    scale = resolved_scale(metafunc.config)
    if "cross_case" in metafunc.fixturenames:
        params = [pytest.param(case, other, id=cross_id(case, other))
                  for first, other in cross_pairs() for case in cross_cases(first, scale, other)]
        metafunc.parametrize(("cross_case", "cross_other"), params)
    for argname, build in (("cudnn_case", paired_cases), ("reference_case", reference_cases)):
        if argname in metafunc.fixturenames:
            params = []
            for backend in specs():
                for case in build(backend.name, scale):
                    reason = known_issue(case) if argname == "cudnn_case" else None
                    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                    params.append(pytest.param(case, id=case.id, marks=marks))
            metafunc.parametrize(argname, params)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the claims and the cross-framework checks after the timed cases, in their own order otherwise."""
    # Their training leaves a framework's allocator in another state, and a timed case after it can run a kernel
    # slower than its history (the H100 evidence README, 2026-11-26, sixth).
    items.sort(key=lambda item: item.path.name == "test_cross.py" or item.path.parent.name == "claims")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` starts one pytest-xdist worker per GPU (each times on its own); without a GPU, one per CPU."""
    return gpu_workers(config)


@pytest.fixture(scope="session")
def scale(request: pytest.FixtureRequest) -> str:
    """The case-matrix scale of this run (smoke without a GPU unless --rnnperf-scale says otherwise)."""
    return resolved_scale(request.config)
