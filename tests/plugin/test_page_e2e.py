"""End-to-end: every run writes its page, rnnperf-report/index.html, beside summary.md (tests/browser opens it)."""

from __future__ import annotations

import re

import pytest

from conftest import run


def test_a_run_writes_its_page_beside_the_summary_with_every_case_and_its_verdict(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("plotly", reason="the page's charts need plotly: pip install -e '.[html]'")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")  # the cuDNN kernel 50% slower than the baseline's
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*reports written to rnnperf-report/: rnnperf.json, summary.md, index.html, "
                                 "speedups.png*"])
    page = (project.path / "rnnperf-report" / "index.html").read_text()
    assert "<title>pytest-rnnperf report</title>" in page and "regressions found" in page
    rows = re.findall(r'<tr data-backend="torch" data-cell="(\w+)" data-mode="train" data-precision="fp32" '
                      r'data-verdict="([^"]+)"', page)
    assert sorted(rows) == [("gru", "regressed"), ("lstm", "regressed")]
    assert "RNN_blockPersist_fp_LSTM 0.500 -&gt; 0.750 ms/step (+50%)" in page  # the kernel that moved
    assert "baseline record: 0001_baseline.json" in page and "fake cudnn kernels" in page


def test_without_plotly_the_run_still_writes_the_page_and_says_what_to_install(project: pytest.Pytester) -> None:
    project.makeconftest(project.path.joinpath("conftest.py").read_text()
                         + "\nimport sys\nsys.modules['plotly'] = None\n")
    result = run(project)
    result.assert_outcomes(passed=2)
    # fnmatch reads [html] as a set of letters: ? stands for each bracket
    result.stdout.fnmatch_lines(["*index.html has no charts: charts need plotly: pip install 'pytest-rnnperf?html?'*",
                                 "*reports written to rnnperf-report/: rnnperf.json, summary.md, index.html*"])
    assert (project.path / "rnnperf-report" / "index.html").stat().st_size < 200_000


def test_without_a_gpu_the_page_says_the_cudnn_cases_did_not_run_instead_of_all_checks_passed(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("plotly", reason="the page's charts need plotly: pip install -e '.[html]'")
    monkeypatch.setenv("FAKE_GPU_NAME", "none")
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible to torch")
    run(project).assert_outcomes(skipped=2)
    page = (project.path / "rnnperf-report" / "index.html").read_text()
    assert '<div class="status warn" id="s0-status">2 cuDNN cases not run: no GPU</div>' in page
    assert "all checks passed" not in page
