"""Parametrize the suite's cases from the matrices at the scale chosen by --rnnperf-scale."""

from __future__ import annotations

import pytest

from pytest_rnnperf.plugin import resolved_scale
from suites.matrix import known_issue, paired_cases, reference_cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give ``cudnn_case`` the paired matrix and ``reference_case`` the reference matrix of the module's framework."""
    framework = getattr(metafunc.module, "FRAMEWORK", None)
    if framework is None:
        return
    scale = resolved_scale(metafunc.config)
    for argname, build in (("cudnn_case", paired_cases), ("reference_case", reference_cases)):
        if argname in metafunc.fixturenames:
            params = []
            for case in build(framework, scale):
                reason = known_issue(case) if argname == "cudnn_case" else None
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(case, id=case.id, marks=marks))
            metafunc.parametrize(argname, params)
