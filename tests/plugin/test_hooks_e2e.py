"""End-to-end: the hooks a conftest.py implements (plugin/hooks.py), used as their docstrings show."""

from __future__ import annotations

import json

import pytest

from conftest import FAKE_GPU_CONFTEST, load_json, run

HOOKS = '''
import csv, json

def pytest_rnnperf_environment(config):
    return {"ci.image": "nightly-7"}

def pytest_rnnperf_case_verdict(config, verdict):
    with open("verdicts.jsonl", "a") as fh:
        fh.write(json.dumps({"case": verdict.case_id, "fails": verdict.fails}) + "\\n")

def pytest_rnnperf_report_files(config, folder, rows):
    cases = rows.as_dict()["cases"]
    with open(folder / "cases.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(cases[0]))
        writer.writeheader()
        writer.writerows(cases)
    return ["cases.csv"]
'''


def test_a_conftest_adds_environment_fields_sees_each_verdict_and_writes_a_report_file(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The field is stored with the baseline and named when it changes; each verdict and the CSV reach the conftest."""
    project.makeconftest(FAKE_GPU_CONFTEST + HOOKS)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    stored = load_json(next((project.path / "baselines/NVIDIA_H200").glob("*/0001_*.json")))
    assert stored["machine_info"]["rnnperf"]["environment"]["ci.image"] == "nightly-7"
    assert not (project.path / "verdicts.jsonl").exists()  # recording: nothing to judge against yet

    project.makeconftest(FAKE_GPU_CONFTEST + HOOKS.replace("nightly-7", "nightly-8"))
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.25")
    result = run(project, "--rnnperf-report-dir=out")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*environment changes since the baseline: ci.image: nightly-7 -> nightly-8*",
                                 "*reports written by conftest hooks to out/: cases.csv*"])
    seen = [json.loads(line) for line in (project.path / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["case"] for v in seen) == ["torch-gru-train-fp32-T4-B2-I3-H5-L1",
                                               "torch-lstm-train-fp32-T4-B2-I3-H5-L1"]
    assert all(v["fails"] for v in seen)
    table = (project.path / "out" / "cases.csv").read_text().splitlines()
    assert table[0].startswith("case,") and len(table) == 3 and all("regressed" in row for row in table[1:])


@pytest.mark.parametrize("returned, message", [
    ('{"gpu.name": "mine"}', "field 'gpu.name' is one of rnnperf's own"),
    ('{"torch.cudnn_version": "9"}', "field 'torch.cudnn_version' is one of rnnperf's own"),
    ('{"ci.image": 7}', "field 'ci.image' -> 7: keys and values must be non-empty strings"),
    ('["ci.image"]', "returned list, not a dict of str to str"),
])
def test_an_environment_field_a_conftest_cannot_add_stops_the_run_in_one_line(
        project: pytest.Pytester, returned: str, message: str) -> None:
    """rnnperf's own fields cannot be overwritten by a conftest, and values are strings."""
    project.makeconftest(FAKE_GPU_CONFTEST + f"\ndef pytest_rnnperf_environment(config):\n    return {returned}\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*pytest_rnnperf_environment (conftest.py): {message}*"])
