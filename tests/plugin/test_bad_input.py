"""Every input a user can get wrong gets one line, before the run where it can be known, and nothing stored changes.

Each test names the defect it guards (issue "every bad input gets one line").
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import cli, load_json, run, torch_sees_a_gpu, unwrapped, whole_lines

GPU_DIR = "baselines/NVIDIA_H200"
REFERENCE_FILE = """
from pytest_rnnperf.model.cases import Case, Shape

def test_lstm(rnnperf):
    rnnperf.check(rnnperf.reference(Case("torch", "lstm", Shape(4, 2, 3, 5))))

def test_gru(rnnperf):
    rnnperf.check(rnnperf.reference(Case("torch", "gru", Shape(4, 2, 3, 5))))
"""


def _sha(path: Path) -> str:
    """The file's sha256, to prove it was not touched."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(project: pytest.Pytester) -> Path:
    """Record a baseline on the fake H200 and return it."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    (path,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    return path


def _usage_error(result: pytest.RunResult, *fragments: str) -> str:
    """Assert a usage error before any test ran, in one line holding every fragment; returns that line."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, result.stderr.str()
    assert all(f in errors[0] for f in fragments), errors[0]
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out and " passed" not in out
    return errors[0]


def _cli(project: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    """python -m pytest_rnnperf ARGS in the project folder."""
    return cli(project.path, *args)


# -------------------------------------------------------------------------------------- stored files (1, 2, 11)


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe{}", "not UTF-8 text"),
    (b'{"benchmarks": [], "machine_info": "x"}', "no machine_info.rnnperf section"),
    (b'{"benchmarks": [1], "machine_info": {"rnnperf": {"format": 1}}}', "benchmarks[0] is int, not an object"),
])
def test_a_broken_baseline_stops_the_run_in_one_line_and_stays_as_it_was(project: pytest.Pytester, content: bytes,
                                                                         message: str) -> None:
    """Defect 1: not UTF-8 or wrong field types gave INTERNALERROR; now exit 4, one line naming the file."""
    path = project.path / GPU_DIR / "Linux-CPython-3.12-64bit" / "0001_baseline.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    _usage_error(run(project), str(path), message)
    assert path.read_bytes() == content
    compare = _cli(project, "compare", str(path), str(path))
    assert compare.returncode == 2 and compare.stderr.count("\n") == 1 and message in compare.stderr


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["cudnn"].update(samples_s=[]), "cudnn samples_s is empty"),
    (lambda r: r["cudnn"]["samples_s"].__setitem__(0, float("inf")), "holds inf, not a finite number"),
    (lambda r: r["generic"]["samples_s"].__setitem__(0, -1e-3), "times must be > 0 s"),
])
def test_hand_edited_samples_are_refused_when_read_not_when_judged(project: pytest.Pytester, edit, message) -> None:
    """Defect 2: empty, infinite or negative samples failed every test with a ValueError; now one line at the start."""
    path = _record(project)
    data = load_json(path)
    for bench in data["benchmarks"]:
        record = bench["extra_info"]["rnnperf"]
        if "cudnn" in record:
            edit(record)
    path.write_text(json.dumps(data))
    before = _sha(path)
    _usage_error(run(project), str(path), "malformed record: case torch-", message)
    assert _sha(path) == before
    spread = _cli(project, "spread", str(path), str(path))
    assert spread.returncode == 2 and message in spread.stderr and "Traceback" not in spread.stderr


def test_stored_round_speedups_are_derived_so_editing_them_changes_nothing(project: pytest.Pytester) -> None:
    """Defect 2: zero or negative round_speedups crashed the judge; they are now computed from the samples."""
    path = _record(project)
    data = load_json(path)
    for bench in data["benchmarks"]:
        if "round_speedups" in bench["extra_info"]["rnnperf"]:
            bench["extra_info"]["rnnperf"]["round_speedups"] = [0.0, -1.0]
    path.write_text(json.dumps(data))
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*verdicts: 2 unchanged*"])


def test_a_baseline_of_another_gpu_in_this_gpus_folder_is_refused(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 11: an A100 file moved into the H200 folder was used silently; now one line says where it belongs."""
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA A100-SXM4-80GB")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    (a100,) = (project.path / "baselines/NVIDIA_A100-SXM4-80GB").glob("*/0001_baseline.json")
    moved = project.path / GPU_DIR / a100.parent.name / a100.name
    moved.parent.mkdir(parents=True)
    shutil.move(a100, moved)
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA H200")
    _usage_error(run(project), f"{moved}: recorded on NVIDIA_A100-SXM4-80GB but stored in the folder of NVIDIA_H200")


# ---------------------------------------------------------------------------------- offline commands (3, 9, 10, 15)


@pytest.mark.parametrize("args, message", [
    (["--min-effect", "0"], "argument --min-effect: 0.0 must be > 0"),
    (["--min-effect", "nan"], "argument --min-effect: 'nan' is not a finite number"),
    (["--min-effect", "inf"], "argument --min-effect: 'inf' is not a finite number"),
    (["--host-bound-effect", "-1"], "argument --host-bound-effect: -1.0 must be > 0"),
])
def test_compare_refuses_a_bad_threshold_with_exit_2(project: pytest.Pytester, args: list[str], message: str) -> None:
    """Defects 3 and 9: --min-effect 0 crashed with exit 1 ("regressed"); nan and -1 were accepted."""
    path = _record(project)
    result = _cli(project, "compare", *args, str(path), str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"python -m pytest_rnnperf compare: error: {message} (see python -m "
                                          f"pytest_rnnperf compare --help)"]


def test_spread_refuses_runs_of_different_gpu_models(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 10: spread mixed GPU models silently; now exit 2 unless --allow-other-gpu."""
    h200 = _record(project)
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA A100-SXM4-80GB")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    (a100,) = (project.path / "baselines/NVIDIA_A100-SXM4-80GB").glob("*/0001_baseline.json")
    mixed = _cli(project, "spread", str(h200), str(a100))
    assert mixed.returncode == 2 and "different GPU models (NVIDIA_A100-SXM4-80GB, NVIDIA_H200)" in mixed.stderr
    assert _cli(project, "spread", "--min-step-ms", "0", "--allow-other-gpu", str(h200), str(a100)).returncode in (0, 1)


def test_the_console_script_names_itself(project: pytest.Pytester) -> None:
    """Defect 15: the rnnperf script said 'usage: python -m pytest_rnnperf'."""
    script = Path(sys.executable).with_name("rnnperf")
    if not script.exists():
        pytest.skip(f"the rnnperf console script is not installed next to {sys.executable}")
    result = subprocess.run([str(script), "compare", "--min-effect", "0", "a.json", "b.json"], capture_output=True,
                            text=True, cwd=project.path)
    assert result.returncode == 2 and result.stderr.startswith("rnnperf compare: error: argument --min-effect")


def test_an_internal_error_is_exit_3_not_regressed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """Defect 3: a crash must never read as exit 1 ("a case regressed")."""
    from pytest_rnnperf.cli import compare
    from pytest_rnnperf.cli import main as cli

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(compare, "compare_files", broken)
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 3
    assert "internal error" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- output paths (4, 13)


def test_a_report_dir_that_is_a_file_stops_the_run_before_it_starts(project: pytest.Pytester) -> None:
    """Defect 4: the suite ran, then a traceback from sessionfinish; now exit 4 before collection."""
    (project.path / "taken").write_text("x")
    _usage_error(run(project, "--rnnperf-report-dir=taken"), "--rnnperf-report-dir", "taken is a file, not a folder")


def test_a_markdown_path_that_is_a_folder_stops_the_run(project: pytest.Pytester) -> None:
    """Defect 4: --rnnperf-markdown pointing at a folder, or into a folder that does not exist."""
    (project.path / "md").mkdir()
    _usage_error(run(project, "--rnnperf-markdown=md"), "--rnnperf-markdown", "md is a folder, not a file")
    _usage_error(run(project, "--rnnperf-markdown=nowhere/summary.md"), "folder nowhere does not exist")


def test_recording_into_a_path_that_cannot_hold_a_folder_stops_the_run(project: pytest.Pytester) -> None:
    """Defect 4: --rnnperf-update-baseline into a place that cannot be written is refused before the run."""
    (project.path / "store").write_text("x")
    _usage_error(run(project, "--rnnperf-update-baseline", "--rnnperf-baselines=store/sub"),
                 "--rnnperf-update-baseline: cannot record into", "store is a file, not a folder")


def test_a_mistyped_baselines_folder_is_refused_instead_of_comparing_with_nothing(project: pytest.Pytester) -> None:
    """A folder that does not exist would silently compare with nothing; the default 'baselines' may be absent."""
    _usage_error(run(project, "--rnnperf-baselines=baselnes"), "baselnes does not exist")
    run(project).assert_outcomes(passed=2)


def test_histogram_without_pygal_is_refused_up_front(project: pytest.Pytester) -> None:
    """Defect 13: the run ended with an ImportError traceback after the tests passed."""
    import importlib.util

    if importlib.util.find_spec("pygal") is not None:
        pytest.skip("pygal is installed here")
    _usage_error(run(project, "--benchmark-histogram"), "--benchmark-histogram needs pygal",
                 "pip install 'pytest-benchmark[histogram]'")


def test_compare_fail_without_compare_is_refused_up_front(project: pytest.Pytester) -> None:
    """pytest-benchmark says so only after the whole run."""
    _usage_error(run(project, "--benchmark-compare-fail=median:5%"), "--benchmark-compare-fail needs --benchmark-compare")


def test_an_injected_delay_of_the_wrong_form_is_refused(project: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_CUDNN_DELAY_US='*-H1024' (no =microseconds) skipped every case; now one line up front."""
    monkeypatch.setenv("RNNPERF_INJECT_CUDNN_DELAY_US", "torch-*-H1024")
    _usage_error(run(project), "RNNPERF_INJECT_CUDNN_DELAY_US: 'torch-*-H1024' is not <case-id glob>=<microseconds>")


# -------------------------------------------------------------------------------------------- options (8, 9)


def test_a_baselines_path_in_space_form_is_refused(project: pytest.Pytester,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Defect 8: '--rnnperf-baselines /abs/path' moved pytest's rootdir and dropped the project's ini."""
    store = tmp_path_factory.mktemp("store")
    line = _usage_error(run(project, "--rnnperf-baselines", str(store)), f"write --rnnperf-baselines={store}")
    assert "rootdir" in line
    run(project, f"--rnnperf-baselines={store}").assert_outcomes(passed=2)


@pytest.mark.parametrize("marker, message", [
    ("rounds=0", "rounds=0): 0 must be >= 1"),
    ("rounds=-3", "rounds=-3): -3 must be >= 1"),
    ("rounds='many'", "rounds='many'): 'many' is not a whole number"),
    ("max_case_s=0", "max_case_s=0): 0.0 must be > 0"),
    ("round=5", "rnnperf(round=...): unknown setting; per-test settings: rounds, min_block_ms"),
    ("5", "takes keywords only"),
])
def test_a_bad_marker_is_refused_before_any_test_runs(project: pytest.Pytester, marker: str, message: str) -> None:
    """Defect 9: rnnperf(rounds=0) and the like bypassed the checks and failed each test with a ValueError."""
    project.makepyfile(test_marked=f"""
        import pytest
        from pytest_rnnperf.model.cases import Case, Shape

        @pytest.mark.rnnperf({marker})
        def test_marked(rnnperf):
            rnnperf.measure(Case("torch", "rnn_tanh", Shape(3, 2, 3, 4)))
    """)
    _usage_error(run(project), "test_marked.py::test_marked: @pytest.mark.rnnperf", message)


@pytest.mark.parametrize("marker, message", [
    ("", "takes model=model_args, a function of scale= and the test's parameters; got args () and keywords {}"),
    ("model=5", "keywords {'model': 5}"),
    ("model=raises", ": raises() raised KeyError: 'huge'"),
    ("model=no_inputs", ": its function must return rnnperf.model()'s keyword arguments as a dict with build and "
                        "inputs, got dict"),
    ("model=misspelt", ": input: not rnnperf.model() arguments (build, inputs, mode, "),
])
def test_a_bad_model_declaration_is_refused_before_any_test_runs(project: pytest.Pytester, marker: str,
                                                                 message: str) -> None:
    """rnnperf_ahead(model=...) names a function of scale= and the test's parameters returning rnnperf.model()'s
    arguments: anything else is one line naming the test, before the run (not on the first night that needs it)."""
    project.makepyfile(test_declared=f"""
        import pytest

        def raises(scale):
            return {{"smoke": 1}}["huge"]

        def no_inputs(scale, size):
            return {{"build": object}}

        def misspelt(size):
            return {{"build": object, "inputs": size, "input": size}}

        @pytest.mark.parametrize("size", [3])
        @pytest.mark.rnnperf_ahead({marker})
        def test_declared(rnnperf, size):
            pass
    """)
    _usage_error(run(project), "test_declared.py::test_declared[3]: @pytest.mark.rnnperf_ahead", message)


# ------------------------------------------------------------------------------------- pytest-benchmark (7, 15)


def test_benchmark_compare_uses_the_baseline_rnnperf_uses_whatever_the_python(project: pytest.Pytester) -> None:
    """Defect 7: a baseline in another Python's machine-id folder: pytest-benchmark said "Can't compare"."""
    path = _record(project)
    other = path.parent.with_name("Linux-CPython-3.99-64bit")
    path.parent.rename(other)
    result = run(project, "--benchmark-compare", "--rnnperf-benchmark-tables")
    result.assert_outcomes(passed=2)
    result.stderr.fnmatch_lines(["*Comparing against benchmarks from: *Linux-CPython-3.99-64bit/0001_baseline.json*"])
    assert "Can't compare" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"*baseline: *{other.name}/0001_baseline.json*"])
    for source in ("Linux-CPython-3.99-64bit/0001", "NOW"):  # pytest-benchmark's table: a row per source
        result.stdout.fnmatch_lines([f"*test_pair[[]cudnn-torch-lstm-*[]] ({source}*"])


def test_without_a_gpu_compare_says_there_is_nothing_to_compare(project: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 15: the first line on a CPU was pytest-benchmark's "Can't compare ... '.benchmarks'"."""
    monkeypatch.setenv("FAKE_GPU_NAME", "none")
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible to torch")
    project.makepyfile(test_cases=REFERENCE_FILE)
    result = run(project, "--benchmark-compare")
    result.assert_outcomes(passed=2)
    out = result.stdout.str() + result.stderr.str()
    assert "Can't compare" not in out and ".benchmarks" not in out
    result.stdout.fnmatch_lines(["*--benchmark-compare: nothing to compare: no GPU (baselines are per GPU model)*"])


def test_a_gpu_run_without_a_baseline_creates_no_baselines_folder(project: pytest.Pytester) -> None:
    """Defect 15: pytest-benchmark's storage made baselines/<gpu>/ on every GPU run; only recording does now."""
    result = run(project, "--benchmark-compare")
    result.assert_outcomes(passed=2)
    assert not (project.path / "baselines").exists()
    result.stdout.fnmatch_lines(["*--benchmark-compare: nothing to compare: no baseline for NVIDIA_H200 yet*"])
    assert "Can't compare" not in result.stdout.str() + result.stderr.str()


def test_generic_only_rows_show_no_tflops(project: pytest.Pytester) -> None:
    """Defect 15: a tiny reference run showed 0.00 TFLOP/s; a generic-only row shows '-'."""
    project.makepyfile(test_cases=REFERENCE_FILE)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["generic path vs float64 reference:", "case *TFLOP/s (of peak)*",
                                 "torch-lstm-train-fp32-T4-B2-I3-H5-L1 * - * 3.*/- * - * - * - * - * - * ok *"])


# ------------------------------------------------------------------------------------------------ xdist (5)


def test_reference_results_of_xdist_workers_reach_the_summary_and_report(project: pytest.Pytester) -> None:
    """Defect 5: under -n 2 the reference results vanished; the workers' records are merged by the controller."""
    project.makepyfile(test_cases=REFERENCE_FILE)
    result = run(project, "-n", "2", "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*rnnperf summary*", "generic path vs float64 reference:"])
    report = load_json(project.path / "out" / "rnnperf.json")
    assert sorted(r["case"]["id"] for r in report["results"]) == ["torch-gru-train-fp32-T4-B2-I3-H5-L1",
                                                                 "torch-lstm-train-fp32-T4-B2-I3-H5-L1"]


def test_a_broken_noise_file_stops_the_run_in_one_line_and_stays_as_it_was(project: pytest.Pytester) -> None:
    """baselines/<gpu>/noise.json that cannot be read would silently judge every case at 3%: refused at the start."""
    _record(project)
    path = project.path / GPU_DIR / "noise.json"
    path.write_text('{"format": 1, "device_spread": {"torch-lstm": "wide"}}')
    _usage_error(run(project), str(path), "device_spread must map case ids to finite numbers >= 0")
    assert path.read_text().endswith('"wide"}}')


# ------------------------------------------------------------------------------ your own model (21, 22, 23, 24, 25)

MODELS = """
import math
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 5)

    def forward(self, x):
        return self.lstm(x)[0]


def x():
    return torch.randn(4, 2, 3)
"""


# Each test below gets a few rnnperf.model() calls wrong (or right) in tests of its own; one test file holds them all,
# run once a process in a pytest subprocess (each start imports torch: seconds), and each test checks its own by name.
INSTANCE_TESTS = """
def test_instance(rnnperf):
    rnnperf.model(Encoder(), inputs=x)

def test_number(rnnperf):
    rnnperf.model(3, inputs=x)
"""
FLOORS = {"str": '"2.0"', "none": "None", "bool": "True", "inf": "math.inf", "nan": "math.nan", "zero": "0"}
FLOOR_TESTS = "".join(f"""
def test_floor_{name}(rnnperf):
    rnnperf.model(Encoder, inputs=x, floor={value})
""" for name, value in FLOORS.items())
NOTHING_FLOAT_TESTS = """
class Silent(Encoder):
    def forward(self, x):
        self.lstm(x)

class Labels(Encoder):
    def forward(self, x):
        return self.lstm(x)[0].argmax(-1), torch.tensor(3)

def test_none(rnnperf):
    rnnperf.check(rnnperf.model(Silent, inputs=x))

def test_labels(rnnperf):
    rnnperf.check(rnnperf.model(Labels, inputs=x, mode="infer"))
"""
PACKED_TESTS = """
class Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 5, bidirectional=True)
        self.head = nn.Linear(10, 2)

    def forward(self, packed):
        y, h = self.gru(packed)
        padded, lengths = pad_packed_sequence(y)
        return self.head(padded), h

def test_packed(rnnperf):
    batch = pack_padded_sequence(torch.randn(6, 3, 3), torch.tensor([4, 6, 2]), enforce_sorted=False)
    record = rnnperf.model(Packed, inputs=lambda: batch)
    rnnperf.check(record)
    assert {(r.quantity, r.ok) for r in record.parity.rows} >= {("output", True), ("d_input", True)}

def test_packed_and_more(rnnperf):
    batch = pack_padded_sequence(torch.randn(6, 3, 3), torch.tensor([6, 4, 2]))
    rnnperf.check(rnnperf.model(lambda: nn.LSTM(3, 5), inputs=(batch,), mode="infer"))
"""
USAGE_TESTS = """
def test_mode(rnnperf):
    rnnperf.model(Encoder, inputs=x, mode="training")

def test_no_rnn(rnnperf):
    rnnperf.model(lambda: nn.Linear(3, 3), inputs=x)
"""
MODEL_TESTS = INSTANCE_TESTS + FLOOR_TESTS + NOTHING_FLOAT_TESTS + PACKED_TESTS + USAGE_TESTS
# What the whole file gives: every test of it fails but the two packed ones.
MODEL_OUTCOMES = {"passed": 2, "failed": 2 + len(FLOORS) + 2 + 2}


ModelRuns = dict[str, pytest.RunResult]  # the one run of MODEL_TESTS, under "all", once made


@pytest.fixture(scope="module")
def model_runs() -> ModelRuns:
    """The run of MODEL_TESTS, once the first test of this module that needs it made it."""
    return {}


def _model_failures(pytester: pytest.Pytester, tests: str, *args: str) -> tuple[pytest.RunResult, dict[str, list[str]]]:
    """Run a test file of rnnperf.model() calls with the real torch; each failed test's report, by test name."""
    if torch_sees_a_gpu() is None:
        pytest.skip("rnnperf.model() needs torch (pip install 'pytest-rnnperf[torch]')")
    pytester.makepyfile(test_own_model=MODELS + tests)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=3", "--rnnperf-energy-s=0", *args)
    return result, _failure_reports(result)


def _shared_model_failures(pytester: pytest.Pytester, runs: ModelRuns) -> tuple[pytest.RunResult, dict[str, list[str]]]:
    """``_model_failures`` of MODEL_TESTS, run once a process (kept in ``runs``) and checked again for each test."""
    if "all" not in runs:
        runs["all"], _ = _model_failures(pytester, MODEL_TESTS, "-rA")
    return runs["all"], _failure_reports(runs["all"])


def _failure_reports(result: pytest.RunResult) -> dict[str, list[str]]:
    """Each failed test's report lines, by test name; no traceback anywhere in the run."""
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    reports: dict[str, list[str]] = {}
    lines = out.split("=== FAILURES ===", 1)[-1].splitlines()[1:] if "=== FAILURES ===" in out else []
    name = ""
    for line in lines:
        header = re.fullmatch(r"_{3,} (\S+) _{3,}", line)
        if header:
            name = header.group(1)
            reports[name] = []
        elif line.startswith("="):
            break
        elif name and line.strip():
            reports[name].append(line)
    return reports


def _one_line(reports: dict[str, list[str]], test: str, *fragments: str) -> str:
    """Assert ``test`` failed with one line holding every fragment, naming the test; returns that line."""
    assert test in reports, f"{test} did not fail: {sorted(reports)}"
    assert len(reports[test]) == 1, "\n".join(reports[test])
    line = reports[test][0]
    assert line.startswith(f"test_own_model.py::{test}: ") and all(f in line for f in fragments), line
    return line


def test_a_model_instance_or_something_not_callable_fails_in_one_line(pytester: pytest.Pytester,
                                                                       model_runs: ModelRuns) -> None:
    """Defect 21: rnnperf.model(Encoder(), ...) or model(3, ...) failed with a raw TypeError from calling it."""
    result, reports = _shared_model_failures(pytester, model_runs)
    result.assert_outcomes(**MODEL_OUTCOMES)
    _one_line(reports, "test_instance", "rnnperf.model(): got an instance of Encoder",
              "rnnperf.model(Encoder, ...) or rnnperf.model(lambda: Encoder(...), ...)")
    _one_line(reports, "test_number", "rnnperf.model(): the first argument must build the model",
              "got int 3")


def test_a_floor_that_is_not_a_finite_positive_number_fails_in_one_line(pytester: pytest.Pytester,
                                                                         model_runs: ModelRuns) -> None:
    """Defect 22: floor="2.0" or None raised a TypeError; floor=True and floor=inf were accepted."""
    result, reports = _shared_model_failures(pytester, model_runs)
    result.assert_outcomes(**MODEL_OUTCOMES)
    for name, value in FLOORS.items():
        shown = {"math.inf": "inf", "math.nan": "nan"}.get(value, value).replace('"', "'")
        _one_line(reports, f"test_floor_{name}", "rnnperf.model(): floor must be a finite speedup > 0 such as 2.0",
                  f"got {shown}")


def test_a_forward_that_returns_nothing_float_fails_in_one_line(pytester: pytest.Pytester,
                                                                model_runs: ModelRuns) -> None:
    """Defect 24: a forward returning None or only integer tensors passed with nothing compared."""
    result, reports = _shared_model_failures(pytester, model_runs)
    result.assert_outcomes(**MODEL_OUTCOMES)
    _one_line(reports, "test_none", "Silent.forward returned no tensor: nothing floating-point to compare")
    _one_line(reports, "test_labels", "Labels.forward returned only integer tensors (output[0] int64, output[1] "
              "int64): nothing floating-point to compare")


def test_a_packed_batch_is_checked_like_a_padded_one(pytester: pytest.Pytester, model_runs: ModelRuns) -> None:
    """Defect 23: a PackedSequence input failed with "got ['NoneType', 'NoneType']"; it is now run and compared."""
    result, reports = _shared_model_failures(pytester, model_runs)
    assert not {"test_packed", "test_packed_and_more"} & reports.keys(), reports
    result.assert_outcomes(**MODEL_OUTCOMES)  # the two passed are these
    result.stdout.fnmatch_lines_random(["PASSED test_own_model.py::test_packed",
                                        "PASSED test_own_model.py::test_packed_and_more"])


def test_a_models_usage_error_is_printed_once(pytester: pytest.Pytester, model_runs: ModelRuns) -> None:
    """Defect 25: every one-line usage error came twice, joined by "During handling of the above exception"."""
    result, reports = _shared_model_failures(pytester, model_runs)
    result.assert_outcomes(**MODEL_OUTCOMES)
    assert "During handling" not in result.stdout.str()
    _one_line(reports, "test_mode", "rnnperf.model(): unknown mode 'training'; expected one of train, infer")
    _one_line(reports, "test_no_rnn", "Linear has no nn.LSTM, nn.GRU or nn.RNN")


# --------------------------------------------------------------- nothing stored is replaced (issue 23: D1, D2, D29)


def test_history_refuses_to_write_its_json_over_an_existing_file(project: pytest.Pytester) -> None:
    """D1: history --json onto the baseline (or onto its own input) replaced it; now exit 2, the file unchanged."""
    path = _record(project)
    run(project, "--benchmark-json=tonight.json").assert_outcomes(passed=2)
    tonight = project.path / "tonight.json"
    for target in (path, tonight):
        before = _sha(target)
        result = _cli(project, "history", "baselines", "tonight.json", "--json", str(target))
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.splitlines() == [f"error: --json {target}: the file exists and is never replaced; "
                                              f"give a new name"]
        assert _sha(target) == before


def test_benchmark_json_onto_a_stored_baseline_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """D2: --benchmark-json=<a baseline> made tonight's run the baseline; now exit 4 before any test, file unchanged."""
    path = _record(project)
    before = _sha(path)
    relative = path.relative_to(project.path)
    _usage_error(run(project, f"--benchmark-json={relative}"), f"--benchmark-json={relative}: {path} is a file in "
                 "the baselines folder", "never replaced")
    assert _sha(path) == before


def test_noise_out_names_the_real_problem_with_its_path(project: pytest.Pytester) -> None:
    """D29: --out . said ". exists; move it away"; --out under a file said "File exists"."""
    path = _record(project)
    (project.path / "taken").write_text("x")
    for out, message in ((".", "error: --out .: a folder, not a file (e.g. --out noise.json)"),
                         ("taken/noise.json", "error: --out taken/noise.json: taken is a file, not a folder")):
        result = _cli(project, "noise", str(path), str(path), "--out", out)
        assert result.returncode == 2 and result.stderr.splitlines() == [message], result.stderr


# --------------------------------------------------------------------- recording a baseline (issue 23: D3, D8, D12)


def test_an_interrupted_run_records_no_baseline(project: pytest.Pytester) -> None:
    """D3: Ctrl-C during --rnnperf-update-baseline still recorded the cases timed so far; now nothing is recorded."""
    project.makepyfile(test_zz_interrupt="def test_ctrl_c():\n    raise KeyboardInterrupt\n")
    result = run(project, "--rnnperf-update-baseline")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not list((project.path / "baselines").rglob("*.json"))
    result.stdout.fnmatch_lines(["*baseline not recorded: the run was interrupted (exit status 2)*"])


def test_a_tag_too_long_for_a_file_name_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """D8: a 300-character tag failed after the whole run (file name too long) and exited 0."""
    _usage_error(run(project, "--rnnperf-update-baseline", f"--rnnperf-baseline-tag={'t' * 300}"),
                 "--rnnperf-baseline-tag / rnnperf_baseline_tag: 300 characters", "at most 245")


def test_a_file_in_the_way_of_the_machine_folder_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """D8: a file where the machine's folder should be failed after the whole run ("File exists") and exited 0."""
    path = _record(project)
    shutil.rmtree(path.parent)
    path.parent.write_text("in the way")
    _usage_error(run(project, "--rnnperf-update-baseline"), "--rnnperf-update-baseline: cannot record into "
                 f"{path.parent}: {path.parent} is a file, not a folder")


def test_a_recording_that_fails_at_the_end_exits_non_zero(project: pytest.Pytester) -> None:
    """D8: a recording that could not be written (here: a file appeared in its way during the run) exited 0."""
    project.makepyfile(test_zz_in_the_way="""
        import shutil
        from pathlib import Path

        def test_a_file_appears_where_the_gpu_folder_goes():
            shutil.rmtree("baselines/NVIDIA_H200", ignore_errors=True)  # pytest-benchmark's storage made it
            Path("baselines").mkdir(exist_ok=True)
            Path("baselines/NVIDIA_H200").write_text("in the way")
    """)
    result = run(project, "--rnnperf-update-baseline")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    whole_lines(result).fnmatch_lines([f"*baseline not recorded: cannot write to {project.path / GPU_DIR}/*: "
                                 f"{project.path / GPU_DIR} is a file, not a folder*"])
    assert "File exists" not in result.stdout.str()


def test_the_last_four_digit_number_is_refused_before_the_run_not_written_as_five(project: pytest.Pytester) -> None:
    """D12: after 9999_<tag>.json the recorder wrote 10000_<tag>.json, which is never read; refused up front now."""
    path = _record(project)
    shutil.copy(path, path.with_name("9999_baseline.json"))
    _usage_error(run(project, "--rnnperf-update-baseline"), f"{path.parent}: holds baseline 9999")
    assert sorted(p.name for p in path.parent.iterdir()) == ["0001_baseline.json", "9999_baseline.json"]


# ----------------------------------------------------------------- the baselines layout (issue 23: D5-D7, D27, D29)


@pytest.mark.parametrize("where, message", [
    ("{gpu}/0001_baseline.json", "a baseline one folder too high, where it is never read: move it into {machine}/"),
    ("{machine}/old/0001_baseline.json", "a baseline one folder too deep, where it is never read: move it up into "
                                         "{machine}/"),
    ("{machine}/baseline-0001.json", "named like a baseline, but only NNNN_<tag>.json (four digits) is read: "
                                     "rename it in {machine}/"),
    ("{machine}/00001_baseline.json", "named like a baseline, but only NNNN_<tag>.json (four digits) is read"),
    ("{machine}/10000_baseline.json", "named like a baseline, but only NNNN_<tag>.json (four digits) is read"),
])
def test_a_misplaced_or_misnamed_baseline_stops_the_run(project: pytest.Pytester, where: str, message: str) -> None:
    """D5: a baseline one folder too high, too deep or misnamed was ignored ("baseline: none yet", exit 0)."""
    path = _record(project)
    gpu, machine = project.path / GPU_DIR, path.parent
    moved = Path(where.format(gpu=gpu, machine=machine))
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, moved)
    before = _sha(moved)
    _usage_error(run(project), f"{moved}: " + message.format(machine=machine))
    assert _sha(moved) == before


@pytest.mark.parametrize("target, message", [
    ("missing.json", "a symlink to missing.json, which does not exist"),
    ("0002_baseline.json", "a symlink that loops"),
])
def test_a_broken_symlink_named_like_a_baseline_stops_the_run(project: pytest.Pytester, target: str,
                                                              message: str) -> None:
    """D27: a dangling or looping symlink named like a baseline was skipped silently."""
    path = _record(project)
    link = path.with_name("0002_baseline.json")
    link.symlink_to(target)
    _usage_error(run(project), f"{link}: {message}")


def test_an_empty_or_gpu_model_baselines_folder_is_refused(project: pytest.Pytester) -> None:
    """D6: --rnnperf-baselines= or =baselines/NVIDIA_H200 compared with nothing and recorded into NVIDIA_H200/NVIDIA_H200/."""
    _usage_error(run(project, "--rnnperf-baselines="), "--rnnperf-baselines / rnnperf_baselines: empty")
    _usage_error(run(project, "--rnnperf-update-baseline", f"--rnnperf-baselines={GPU_DIR}"),
                 f"--rnnperf-baselines / rnnperf_baselines: {project.path / GPU_DIR} is the folder of one GPU model "
                 f"(NVIDIA_H200); give the baselines folder above it: --rnnperf-baselines=baselines")
    assert not (project.path / "baselines").exists()
    path = _record(project)
    _usage_error(run(project, f"--rnnperf-baselines={GPU_DIR}"),
                 f"{project.path / GPU_DIR} is the folder of one GPU model (it holds {path.parent.name}/); give the "
                 f"baselines folder above it: --rnnperf-baselines=baselines")
    assert [p.name for p in (project.path / GPU_DIR).iterdir()] == [path.parent.name]


def test_a_file_where_the_gpu_folder_should_be_stops_the_run(project: pytest.Pytester) -> None:
    """D7: baselines/NVIDIA_H200 as a file read as "no baseline yet"."""
    (project.path / "baselines").mkdir()
    (project.path / GPU_DIR).write_text("x")
    _usage_error(run(project), f"{project.path / GPU_DIR}: a file where the folder of the NVIDIA_H200 baselines "
                 f"should be; move it away")


def test_a_baseline_that_names_no_gpu_says_what_to_do(project: pytest.Pytester) -> None:
    """D29: a stored run without gpu_slug said "move it under .../its GPU/"."""
    path = _record(project)
    data = load_json(path)
    del data["machine_info"]["rnnperf"]["gpu_slug"]
    path.write_text(json.dumps(data))
    line = _usage_error(run(project), f"{path}: machine_info.rnnperf names no GPU (no gpu_slug), so it cannot be "
                        f"told apart from another model's run; move it out of {project.path / 'baselines'}")
    assert "its GPU" not in line


# -------------------------------------------------------------------------------------- records (issue 23: D9, D10)


@pytest.mark.parametrize("edit, message", [
    (lambda b: b["extra_info"]["rnnperf"].pop("generic"), "extra_info.rnnperf has no 'generic'"),
    (lambda b: b["extra_info"]["rnnperf"].pop("case"), "extra_info.rnnperf has no 'case'"),
    (lambda b: b["extra_info"].__setitem__("rnnperf", "edited"), "extra_info.rnnperf is text ('edited'), not an object"),
    (lambda b: b["extra_info"].__setitem__("rnnperf", None), "extra_info.rnnperf is null (None), not an object"),
])
def test_a_record_that_lost_a_field_stops_the_run_not_reads_as_a_new_case(project: pytest.Pytester, edit,
                                                                          message: str) -> None:
    """D9: a record without generic or case, or an extra_info.rnnperf that is no object, was dropped as a "new case"."""
    path = _record(project)
    data = load_json(path)
    index, bench = next((i, b) for i, b in enumerate(data["benchmarks"]) if "generic" in b["extra_info"]["rnnperf"])
    edit(bench)
    path.write_text(json.dumps(data))
    before = _sha(path)
    _usage_error(run(project), f"{path}: malformed record: benchmarks[{index}] ({bench['name']}): {message}")
    assert _sha(path) == before
    compare = _cli(project, "compare", str(path), str(path))
    assert compare.returncode == 2 and message in compare.stderr


def test_a_case_stored_twice_in_one_file_stops_the_run(project: pytest.Pytester) -> None:
    """D10: a case id twice in one baseline file: the last copy won silently."""
    path = _record(project)
    data = load_json(path)
    index, bench = next((i, b) for i, b in enumerate(data["benchmarks"]) if "generic" in b["extra_info"]["rnnperf"])
    data["benchmarks"].append(bench)
    path.write_text(json.dumps(data))
    case = bench["extra_info"]["rnnperf"]["case"]["id"]
    _usage_error(run(project), f"{path}: malformed record: case {case} is stored twice (benchmarks[{index}] and "
                 f"benchmarks[{len(data['benchmarks']) - 1}])")


def test_one_test_checking_two_models_under_one_name_fails_in_one_line(pytester: pytest.Pytester) -> None:
    """D10: rnnperf.model(..., name="a") twice in one test stored two records of one case id."""
    from conftest import torch_sees_a_gpu

    if torch_sees_a_gpu() is None:
        pytest.skip("needs torch")
    pytester.makepyfile(test_two=(
        "import torch\n\n"
        "def test_two(rnnperf):\n"
        "    for hidden in (5, 6):\n"
        "        rnnperf.model(lambda: torch.nn.LSTM(3, hidden), inputs=torch.randn(4, 2, 3), name='a')\n"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=1", "--rnnperf-energy-s=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_two.py::test_two::a: rnnperf.model(): this test already checked a model "
                                 "named 'a'; give each model of a test its own name=*"])
    assert "Traceback" not in result.stdout.str()


def test_a_run_that_measured_one_case_twice_records_no_baseline(project: pytest.Pytester) -> None:
    """D10: two tests measuring one case wrote a baseline holding it twice (the last copy won when read)."""
    project.makepyfile(test_zz_again="""
        from pytest_rnnperf.model.cases import Case, Shape

        def test_lstm_again(rnnperf):
            rnnperf.check(rnnperf.measure(Case("torch", "lstm", Shape(4, 2, 3, 5), floor=2.0)))
    """)
    result = run(project, "--rnnperf-update-baseline")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baseline not recorded: it would not read back: case torch-lstm-train-fp32-T4-B2-I3-H5-L1 "
                                 "is stored twice (benchmarks[[]*[]] and benchmarks[[]*[]]); keep one*"])
    assert not list((project.path / "baselines").rglob("*.json"))


# ------------------------------------------------------------------------------------------ issue 23 (D4-D31)


def _copy(path: Path, target: Path, edit: Any = None) -> Path:
    """A copy of a stored run at ``target``, with ``edit(data)`` applied to its JSON."""
    data = load_json(path)
    if edit is not None:
        edit(data)
    target.write_text(json.dumps(data))
    return target


def _one_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Assert exit 2 with one line on stderr holding every fragment, nothing on stdout; returns that line."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stdout + done.stderr
    assert all(f in done.stderr for f in fragments), done.stderr
    return done.stderr.strip()


@pytest.mark.parametrize("option", ["--rnnperf-device-effect=3", "--rnnperf-host-effect=3", "--rnnperf-min-effect=3",
                                    "--rnnperf-host-bound-effect=3"])
def test_a_percent_typed_as_a_number_stops_the_run_with_a_hint(project: pytest.Pytester, option: str) -> None:
    """D4: --rnnperf-device-effect=3 (meant 3%) judged a 2x slowdown unchanged; now refused, saying how to write it."""
    _usage_error(run(project, option), option.split("=")[0], "3.0 would be 300%", "write 0.03 or 3%")


def _without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """python -m pytest_rnnperf ARGS with ``module`` unimportable (as if it were not installed)."""
    code = (f"import sys; sys.modules[{module!r}] = None; sys.argv[0] = 'rnnperf'; "
            f"from pytest_rnnperf.cli.main import main; sys.exit(main())")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd)


def test_an_empty_report_dir_is_refused_naming_the_way_to_turn_reports_off(project: pytest.Pytester) -> None:
    """D30: --rnnperf-report-dir= (empty) silently wrote no report."""
    _usage_error(run(project, "--rnnperf-report-dir="), "--rnnperf-report-dir", "empty", "'none'")


@pytest.mark.parametrize("option, message", [
    ("--rnnperf-energy-s=1e9", "1000000000.0 must be <= 60"),
    ("--rnnperf-device-rounds=10000000", "10000000 must be <= 1000"),
    ("--rnnperf-rounds=10000000", "10000000 must be <= 1000"),
    ("--rnnperf-max-case-s=1e9", "1000000000.0 must be <= 3600"),
    ("--rnnperf-min-block-ms=1e9", "1000000000.0 must be <= 10000"),
])
def test_a_setting_that_would_run_for_days_is_refused(project: pytest.Pytester, option: str, message: str) -> None:
    """D14: --rnnperf-energy-s=1e9 and --rnnperf-device-rounds=10000000 hung the run."""
    # A bounded run: a regression fails here instead of hanging the suite.
    result = project.runpytest_subprocess("-p", "no:cacheprovider", option, timeout=120)
    _usage_error(result, option.split("=")[0], message)


def test_a_noise_target_above_100_percent_is_refused_in_percent(project: pytest.Pytester) -> None:
    """--rnnperf-max-noise=200% read as "stop at the minimum rounds" without a word; a target is a fraction of the median."""
    _usage_error(run(project, "--rnnperf-max-noise=200%"), "--rnnperf-max-noise", "200% must be between 0% and 100%")


def test_a_stored_record_with_implausibly_many_samples_is_refused_in_one_line(project: pytest.Pytester) -> None:
    """D11: a record of 2,000,000 samples failed every test with a 29.8 GiB MemoryError from the bootstrap."""
    path = _record(project)
    data = load_json(path)
    for bench in data["benchmarks"]:
        record = bench["extra_info"]["rnnperf"]
        if "cudnn" in record:
            record["cudnn"]["samples_s"] = record["cudnn"]["samples_s"] * 1500
    path.write_text(json.dumps(data))
    _usage_error(run(project), str(path), "cudnn samples_s holds 12000 samples", "at most 10000")


def test_a_noise_file_with_an_absurd_spread_stops_the_run(project: pytest.Pytester) -> None:
    """D28: a noise.json spread of 1e300 silently switched that case's gate off."""
    _record(project)
    path = project.path / GPU_DIR / "noise.json"
    case = "torch-lstm-train-fp32-T4-B2-I3-H5-L1"
    path.write_text(json.dumps({"format": 1, "runs": 2, "device_spread": {case: 1e300}}))
    _usage_error(run(project), str(path), case, "1e+300", "at most 1 (100%)")


@pytest.mark.parametrize("args, option", [
    (["compare", "--device-effect", "3"], "--device-effect"),
    (["compare", "--host-effect", "1"], "--host-effect"),
    (["spread", "--target", "3"], "--target"),
    (["history", "--min-shift", "1"], "--min-shift"),
])
def test_the_commands_refuse_a_percent_typed_as_a_number(project: pytest.Pytester, args: list[str], option: str) -> None:
    """D4: compare --device-effect 3, spread --target 3, history --min-shift 1 silently meant 300% and 100%."""
    path = _record(project)
    line = _one_error(_cli(project, *args, str(path), str(path)), f"argument {option}:",
                      "thresholds are fractions (0.03 = 3%)")
    assert "would be 300%" in line or "would be 100%" in line



def test_compare_takes_a_percent_and_prints_the_thresholds_in_use(project: pytest.Pytester) -> None:
    """D4: compare --device-effect 3% is 0.03; its first line names every threshold."""
    path = _record(project)
    older = _copy(path, project.path / "older.json", lambda d: d.update(datetime="2020-01-01T00:00:00+00:00"))
    done = _cli(project, "compare", "--device-effect", "3%", "--host-bound-effect", "40%", str(older), str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("thresholds: cuDNN device time 3%, wall time 5% (host-bound 40%), host overhead 100% (reported, not "
            "failed)") in unwrapped(done.stdout)[0]



def test_compare_with_nothing_in_common_is_an_error_not_a_pass(project: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """D17: a night that ran none of the baseline's cases: compare said '0 case(s) compared', exit 0."""
    run(project, "--rnnperf-update-baseline", "-k", "gru").assert_outcomes(passed=1, deselected=1)
    (path,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    run(project, "-k", "lstm", "--benchmark-json=night.json").assert_outcomes(passed=1, deselected=1)
    _one_error(_cli(project, "compare", str(path), "night.json"), "nothing in common", "night.json",
               f"none of the 1 case(s) of {path.name}")



def test_noise_over_two_gpu_models_does_not_suggest_a_flag_it_lacks(project: pytest.Pytester) -> None:
    """D18: noise said '--allow-other-gpu to force', which noise does not have."""
    path = _record(project)
    other = _copy(path, project.path / "a100.json",
                  lambda d: d["machine_info"]["rnnperf"].update(gpu_slug="NVIDIA_A100-SXM4-80GB"))
    line = _one_error(_cli(project, "noise", str(path), str(other)), "different GPU models")
    assert "--allow-other-gpu" not in line and "noise of one GPU model" in line



@pytest.mark.parametrize("command", ["spread", "noise"])
def test_the_same_run_given_twice_is_refused(project: pytest.Pytester, command: str) -> None:
    """D19: spread r1.json r1.json (or a copy of it) reported 0.0% spread."""
    path = _record(project)
    _one_error(_cli(project, command, str(path), str(path)), f"{path} is given twice")
    relative = path.relative_to(project.path)
    _one_error(_cli(project, command, str(relative), f"./{relative}"), f"error: {relative} is given twice")
    shutil.copy(path, project.path / "copy.json")
    _one_error(_cli(project, command, str(path), "copy.json"), "copy.json holds the same run as", str(path))


def test_a_threshold_written_as_a_percent_is_taken_and_printed(project: pytest.Pytester) -> None:
    """D4: '3%' means 0.03; the header says which thresholds judge the run."""
    result = run(project, "--rnnperf-device-effect=2.5%")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rnnperf: regression thresholds: cuDNN device time 2.5%, wall time 5% "
                                 "(host-bound 35%), host overhead 100% (reported, not failed)*"])



def test_compare_refuses_files_given_newest_first(project: pytest.Pytester) -> None:
    """D31: compare NEW OLD (swapped) reported 'improved' though both files carry their dates."""
    path = _record(project)
    older = _copy(path, project.path / "older.json", lambda d: d.update(datetime="2020-01-01T00:00:00+00:00"))
    _one_error(_cli(project, "compare", str(path), "older.json"), f"OLD {path} is newer than NEW older.json",
               "2020-01-01", "swap them")
    forced = _cli(project, "compare", "--any-order", str(path), "older.json")
    assert forced.returncode == 0 and "UNCHANGED" in forced.stdout, forced.stdout + forced.stderr
    assert _cli(project, "compare", "older.json", str(path)).returncode == 0



@pytest.mark.parametrize("module, extra", [("matplotlib", ["--plot", "plots"]), ("rich", [])])
def test_history_without_an_optional_library_names_it_in_one_line(project: pytest.Pytester, module: str,
                                                                  extra: list[str]) -> None:
    """D20: history --plot without matplotlib was an 'internal error', exit 3 (D26: the same for rich)."""
    path = _record(project)
    older = _copy(path, project.path / "older.json", lambda d: d.update(datetime="2020-01-01T00:00:00+00:00"))
    _one_error(_without(module, "history", *extra, str(older), str(path), cwd=project.path),
               f"needs {module}", f"pip install '{module}>=")
    assert not (project.path / "plots").exists()



def test_any_command_without_rich_names_it_in_one_line_not_as_an_internal_error(project: pytest.Pytester) -> None:
    """sensitivity --case, run from a checkout without rich, printed a traceback and "internal error", exit 3."""
    _record(project)
    _one_error(_without("rich", "sensitivity", "baselines/NVIDIA_H200", "--case", "torch-lstm-train-fp32-T4-B2-I3-H5-L1",
                        cwd=project.path), "needs rich", "pip install 'rich>=")


def test_without_rich_the_run_stops_before_it_starts(project: pytest.Pytester) -> None:
    """D26: without rich every test passed, then the summary crashed; now one line before the run."""
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + "\nsys.modules['rich'] = None  # as if rich were not installed\n")
    _usage_error(run(project), "pytest-rnnperf needs rich", "pip install 'rich>=")



def test_the_plugin_runs_without_pytest_benchmark(project: pytest.Pytester) -> None:
    """D13: pytest -p no:benchmark gave INTERNALERROR (unknown hook 'pytest_benchmark_compare_machine_info')."""
    result = run(project, "-p", "no:benchmark")
    result.assert_outcomes(passed=2)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    _usage_error(run(project, "-p", "no:benchmark", "--rnnperf-update-baseline"),
                 "--rnnperf-update-baseline needs pytest-benchmark", "-p no:benchmark")



@pytest.mark.parametrize("target, message", [
    ("nodir/out.json", "folder nodir does not exist"),
    ("adir", "adir is a folder, not a file"),
])
def test_a_benchmark_json_path_that_cannot_be_written_stops_the_run(project: pytest.Pytester, target: str,
                                                                    message: str) -> None:
    """D15: --benchmark-json=nodir/out.json ran the whole suite, then a traceback, exit 1."""
    (project.path / "adir").mkdir()
    _usage_error(run(project, f"--benchmark-json={target}"), "--benchmark-json", message)



@pytest.mark.parametrize("option", ["--benchmark-disable", "--benchmark-skip"])
def test_recording_a_baseline_with_benchmarks_off_is_refused(project: pytest.Pytester, option: str) -> None:
    """D16: --rnnperf-update-baseline --benchmark-disable ran, recorded nothing and blamed --rnnperf-device-rounds=0."""
    _usage_error(run(project, "--rnnperf-update-baseline", option), "--rnnperf-update-baseline", option,
                 "nothing would be timed to record")



def test_the_case_budget_bounds_the_energy_window_and_the_traced_rounds(project: pytest.Pytester) -> None:
    """D14: --rnnperf-max-case-s bounded only the wall rounds; the energy window and the traced rounds ran past it."""
    result = run(project, "--rnnperf-max-case-s=0.01", "--rnnperf-energy-s=3", "--benchmark-json=out.json")
    result.assert_outcomes(passed=2)
    records = [b["extra_info"]["rnnperf"] for b in load_json(project.path / "out.json")["benchmarks"]
               if b["params"]["side"] == "cudnn"]
    assert len(records) == 2
    for record in records:
        assert record["cost_s"]["energy"] < 1.0, record["cost_s"]  # a 3.3 s window before
        spent = "the case's time budget (0.01 s, --rnnperf-max-case-s) was spent"
        assert any(note.startswith("cudnn energy: ") and spent in note for note in record["notes"]), record["notes"]
        assert f"device time: 3 of 8 traced rounds: {spent}" in record["notes"], record["notes"]


# ------------------------------------------------------------------------- inputs beyond issue 23's list (N1-N30)


def test_benchmark_json_to_a_new_file_in_the_baselines_folder_is_refused(project: pytest.Pytester) -> None:
    """A --benchmark-json named like a baseline in the machine folder became the newest baseline of any run."""
    path = _record(project)
    new = path.with_name("0002_tonight.json").relative_to(project.path)
    _usage_error(run(project, f"--benchmark-json={new}"), f"--benchmark-json={new}: {project.path / new} is inside "
                 "the baselines folder", "write the run elsewhere")
    assert sorted(p.name for p in path.parent.iterdir()) == ["0001_baseline.json"]


@pytest.mark.parametrize("option", ["--benchmark-autosave", "--benchmark-save=mine",
                                    "--benchmark-storage=baselines/elsewhere"])
def test_saving_a_run_into_the_baselines_folder_is_refused(project: pytest.Pytester, option: str) -> None:
    """--benchmark-autosave saved any run (failed, regressed) into baselines/<gpu>/, where it became the baseline."""
    path = _record(project)
    args = [option] if option != "--benchmark-storage=baselines/elsewhere" else [option, "--benchmark-autosave"]
    flag = "--benchmark-save=mine" if option == "--benchmark-save=mine" else "--benchmark-autosave"
    _usage_error(run(project, *args), f"{flag}: pytest-benchmark would save this run into", "inside the baselines "
                 "folder, where it becomes the newest baseline whatever the run's outcome",
                 "--benchmark-storage=file://<folder>")
    assert [p.name for p in (project.path / "baselines").rglob("*.json")] == [path.name]


def test_saving_a_run_outside_the_baselines_folder_works_as_usual(project: pytest.Pytester) -> None:
    """--benchmark-autosave with a storage of its own is pytest-benchmark's business: the run is saved there."""
    _record(project)
    result = run(project, "--benchmark-autosave", "--benchmark-storage=file://./saved")
    result.assert_outcomes(passed=2)
    assert len(list((project.path / "saved").rglob("0001_*.json"))) == 1


def test_a_baselines_folder_behind_a_broken_symlink_stops_the_run(project: pytest.Pytester) -> None:
    """baselines -> a share that is not mounted read as "baseline: none yet": every gate against it was off."""
    (project.path / "baselines").symlink_to("/nowhere/mounted/baselines")
    _usage_error(run(project), f"--rnnperf-baselines / rnnperf_baselines: {project.path / 'baselines'} is a symlink "
                 "to /nowhere/mounted/baselines, which does not exist")


@pytest.mark.parametrize("target, message", [
    ("/nowhere/machine", "a symlink to /nowhere/machine, which does not exist"),
    ("{name}", "a symlink that loops"),
])
def test_a_machine_folder_behind_a_broken_symlink_stops_the_run(project: pytest.Pytester, target: str,
                                                                message: str) -> None:
    """A machine folder linked to a place that is gone (or to itself) was skipped: "baseline: none yet", exit 0."""
    path = _record(project)
    shutil.rmtree(path.parent)
    path.parent.symlink_to(target.format(name=path.parent.name))
    _usage_error(run(project), f"{path.parent}: {message}; in a GPU model's folder it hides what it held")


def test_a_gpu_folder_behind_a_broken_symlink_is_named_as_a_link_not_a_file(project: pytest.Pytester) -> None:
    """baselines/NVIDIA_H200 linked to a missing folder was called "a file where the folder should be"."""
    (project.path / "baselines").mkdir()
    (project.path / GPU_DIR).symlink_to("/nowhere/h200")
    line = _usage_error(run(project), f"{project.path / GPU_DIR}: the folder of the NVIDIA_H200 baselines is a "
                        "symlink to /nowhere/h200, which does not exist")
    assert "a file" not in line


@pytest.mark.parametrize("option", ["--rnnperf-update-baseline", "--rnnperf-keep-run"])
def test_storing_a_run_without_a_gpu_is_refused_before_the_run(project: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    """--rnnperf-update-baseline on a machine without a GPU ran every test, recorded nothing and exited 0."""
    monkeypatch.setenv("FAKE_GPU_NAME", "none")
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible to torch")
    _usage_error(run(project, option), f"{option}: no GPU here (NVML library not found); runs are stored per GPU "
                 "model, on a machine with one")


def test_keeping_a_pytest_xdist_run_over_two_gpu_models_is_refused_before_the_run(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """-n 2 --rnnperf-keep-run on an H200 and an H100 would run the suite, then keep nothing: a history is one model's."""
    _record(project)
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA H200,NVIDIA H100 80GB HBM3")
    _usage_error(run(project, "-n", "2", "--rnnperf-keep-run"), "--rnnperf-keep-run: its workers' GPUs are of 2 models "
                 "(NVIDIA_H200, NVIDIA_H100_80GB_HBM3), and a history holds one model's runs: keep a run per model "
                 "(CUDA_VISIBLE_DEVICES)")


def test_a_recording_of_no_timed_case_exits_non_zero(project: pytest.Pytester) -> None:
    """--rnnperf-update-baseline where every cuDNN case was skipped: "baseline not recorded", and yet exit 0."""
    project.makepyfile(test_cases=REFERENCE_FILE)  # generic-only cases: nothing of the cuDNN side is timed
    result = run(project, "--rnnperf-update-baseline")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baseline not recorded: no cuDNN case was timed in this run (each was skipped or "
                                 "deselected)*"])


def test_a_kept_run_that_cannot_be_written_exits_non_zero(project: pytest.Pytester) -> None:
    """--rnnperf-keep-run whose file could not be written at the end (a file in its way) said so and exited 0."""
    _record(project)
    project.makepyfile(test_zz_in_the_way="""
        import shutil
        from pathlib import Path

        def test_a_file_appears_where_the_machine_folder_goes():
            machine = next(Path("baselines/NVIDIA_H200").iterdir())
            shutil.rmtree(machine)
            machine.write_text("in the way")
    """)
    result = run(project, "--rnnperf-keep-run")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    whole_lines(result).fnmatch_lines(["*run not kept: cannot write to *: * is a file, not a folder*"])


def test_a_mistyped_ini_key_stops_the_run_naming_the_setting_it_meant(project: pytest.Pytester) -> None:
    """rnnperf_device_efect = 0.01 in the ini file was only a pytest warning: the gate kept its 3% default."""
    project.makeini("[pytest]\nrnnperf_rounds = 8\nrnnperf_energy_s = 0\nrnnperf_device_efect = 0.01\n")
    _usage_error(run(project), f"{project.path / 'tox.ini'}: rnnperf_device_efect is no pytest-rnnperf setting "
                 "(did you mean rnnperf_device_effect?); the setting meant would keep its default")


def test_a_recorded_baseline_cannot_take_the_kept_runs_name(project: pytest.Pytester) -> None:
    """--rnnperf-baseline-tag=run recorded a baseline as NNNN_run.json, the name of a nightly run kept for the history."""
    _usage_error(run(project, "--rnnperf-update-baseline", "--rnnperf-baseline-tag=run"),
                 "--rnnperf-baseline-tag / rnnperf_baseline_tag: 'run' names the runs --rnnperf-keep-run keeps "
                 "(NNNN_run.json); give a baseline another tag")
    assert not (project.path / "baselines").exists()


@pytest.mark.parametrize("name", ["RNNPERF_INJECT_CUDNN_DELAY_US", "RNNPERF_INJECT_HOST_DELAY_US"])
def test_an_injected_delay_beyond_a_second_per_step_is_refused(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """RNNPERF_INJECT_CUDNN_DELAY_US='*=1e99' was taken: on a GPU each step would spin for ever."""
    monkeypatch.setenv(name, "torch-*=1e99")
    _usage_error(run(project), f"{name}: 'torch-*=1e99': 1e+99 microseconds per step is more than 1000000 (1 s)")


def test_checking_or_measuring_the_wrong_thing_fails_in_one_line(project: pytest.Pytester) -> None:
    """rnnperf.check(None) failed with an AttributeError deep in the report code; measure('a case id') likewise."""
    project.makepyfile(test_wrong="""
        def test_check_none(rnnperf):
            rnnperf.check(None)

        def test_measure_an_id(rnnperf):
            rnnperf.measure("torch-lstm-train-fp32-T4-B2-I3-H5-L1")
    """)
    result = run(project, "test_wrong.py")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "test_wrong.py::test_check_none: rnnperf.check(): got NoneType None; pass what rnnperf.model(), measure(), "
        "reference() or cross() returned",
        "test_wrong.py::test_measure_an_id: rnnperf.measure(): got str 'torch-lstm-train-fp32-T4-B2-I3-H5-L1'; pass a "
        "Case, e.g. Case(\"torch\", \"lstm\", Shape(...)) (from pytest_rnnperf.model.cases import Case, Shape)"])
    assert "Error" not in result.stdout.str().split("short test summary")[0]


def test_history_refuses_a_plot_folder_that_is_a_file_or_empty_before_reading(project: pytest.Pytester) -> None:
    """history --plot r1.json said "cannot write plots to r1.json: File exists"; --plot '' wrote into the cwd."""
    path = _record(project)
    older = _copy(path, project.path / "older.json", lambda d: d.update(datetime="2020-01-01T00:00:00+00:00"))
    before = _sha(older)
    _one_error(_cli(project, "history", str(older), str(path), "--plot", "older.json"),
               "error: --plot older.json: older.json is a file, not a folder")
    assert _sha(older) == before
    _one_error(_cli(project, "history", str(older), str(path), "--plot", ""), "argument --plot: empty; give a path")
    assert not list(project.path.glob("*.png"))


def test_sensitivity_names_the_gpu_folders_when_given_the_baselines_folder(project: pytest.Pytester) -> None:
    """sensitivity baselines said "no stored run (expected baselines/<machine id>/...)", though runs were below."""
    _record(project)
    _one_error(_cli(project, "sensitivity", "baselines"), "error: baselines: the baselines folder, which holds one "
               "folder per GPU model; give one of them: baselines/NVIDIA_H200")


def test_sensitivity_over_a_misplaced_baseline_is_one_line_not_an_internal_error(project: pytest.Pytester) -> None:
    """A baseline one folder too high made sensitivity exit 3 with a traceback ("internal error")."""
    path = _record(project)
    shutil.copy(path, project.path / GPU_DIR / path.name)
    _one_error(_cli(project, "sensitivity", GPU_DIR), f"{GPU_DIR}/{path.name}: a baseline one folder too high")


def test_a_markdown_summary_is_never_appended_to_a_stored_run(project: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--rnnperf-markdown=<a baseline> appended the summary to it: the next run refused it as "not valid JSON"."""
    path = _record(project)
    before = _sha(path)
    relative = path.relative_to(project.path)
    _usage_error(run(project, f"--rnnperf-markdown={relative}"), f"--rnnperf-markdown / rnnperf_markdown: {relative} "
                 f"is inside the baselines folder {project.path / 'baselines'}, which holds stored runs only")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    _usage_error(run(project), f"GITHUB_STEP_SUMMARY: {path} is inside the baselines folder")
    assert _sha(path) == before


def test_a_report_folder_inside_the_baselines_folder_is_refused(project: pytest.Pytester) -> None:
    """--rnnperf-report-dir=baselines/NVIDIA_H200 wrote rnnperf.json among the stored runs (history then skipped it)."""
    _record(project)
    _usage_error(run(project, f"--rnnperf-report-dir={GPU_DIR}"), f"--rnnperf-report-dir / rnnperf_report_dir: "
                 f"{GPU_DIR} is inside the baselines folder", "give a folder outside it")
    assert not (project.path / GPU_DIR / "rnnperf.json").exists()


def test_a_step_summary_path_that_cannot_be_written_stops_the_run(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """GITHUB_STEP_SUMMARY=/nonexistent/summary was found only after the run ("Markdown summary not written")."""
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "nowhere" / "summary"))
    _usage_error(run(project), f"GITHUB_STEP_SUMMARY: folder {project.path / 'nowhere'} does not exist")


def test_compare_refuses_a_run_against_itself(project: pytest.Pytester) -> None:
    """compare B B (or B and a copy of B) said "2 unchanged", exit 0: a CI step comparing the wrong files always passed."""
    path = _record(project)
    _one_error(_cli(project, "compare", str(path), str(path)), f"{path} is given twice")
    shutil.copy(path, project.path / "copy.json")
    _one_error(_cli(project, "compare", str(path), "copy.json"), f"copy.json holds the same run as {path} (a copy?)")


@pytest.mark.parametrize("args, message", [
    (["--benchmark-disable"], "--rnnperf-keep-run with --benchmark-disable: nothing would be timed to keep"),
    (["--benchmark-skip"], "--rnnperf-keep-run with --benchmark-skip: nothing would be timed to keep"),
    (["-p", "no:benchmark"], "--rnnperf-keep-run needs pytest-benchmark, which -p no:benchmark turned off"),
])
def test_keeping_a_run_with_benchmarks_off_is_refused(project: pytest.Pytester, args: list[str], message: str) -> None:
    """--rnnperf-keep-run --benchmark-disable ran the suite, then "run not kept: no cuDNN case was timed", exit 0."""
    _record(project)
    _usage_error(run(project, "--rnnperf-keep-run", *args), message)
