"""Parametrize the suite's cases from the matrices at the scale chosen by --rnnperf-scale."""

from __future__ import annotations

import pytest

from pytest_rnnperf.plugin import resolved_scale
from pytest_rnnperf.cases import cross_id
from suites.matrix import cross_cases, known_issue, paired_cases, reference_cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give ``cudnn_case``/``reference_case`` the matrices of the module's framework, ``cross_case`` the cross checks."""
    scale = resolved_scale(metafunc.config)
    if "cross_case" in metafunc.fixturenames:
        metafunc.parametrize("cross_case", cross_cases(scale), ids=cross_id)
    framework = getattr(metafunc.module, "FRAMEWORK", None)
    if framework is None:
        return
    for argname, build in (("cudnn_case", paired_cases), ("reference_case", reference_cases)):
        if argname in metafunc.fixturenames:
            params = []
            for case in build(framework, scale):
                reason = known_issue(case) if argname == "cudnn_case" else None
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(case, id=case.id, marks=marks))
            metafunc.parametrize(argname, params)
