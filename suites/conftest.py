"""Parametrize the suite's cases from the matrices at the scale chosen by --rnnperf-scale."""

from __future__ import annotations

import pytest

from pytest_rnnperf.plugin import resolved_scale
from suites.matrix import paired_cases, reference_cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give ``cudnn_case`` the paired matrix and ``reference_case`` the reference matrix of the module's framework."""
    framework = getattr(metafunc.module, "FRAMEWORK", None)
    if framework is None:
        return
    scale = resolved_scale(metafunc.config)
    for argname, build in (("cudnn_case", paired_cases), ("reference_case", reference_cases)):
        if argname in metafunc.fixturenames:
            cases = build(framework, scale)
            metafunc.parametrize(argname, cases, ids=[c.id for c in cases])
