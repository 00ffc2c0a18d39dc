"""End-to-end tests of the plugin as users run it (pytester, fake GPU, fake torch backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, load_json, needs_a_cpu_machine_with, run, torch_sees_a_gpu


def test_help_lists_the_rnnperf_group_with_ini_twins(pytester: pytest.Pytester) -> None:
    """pytest --help shows one rnnperf group; every option names its ini twin."""
    result = pytester.runpytest("--help")
    out = result.stdout.str()
    assert "pytest-rnnperf: cuDNN vs generic RNN benchmarks" in out
    from pytest_rnnperf.session.settings import settings_table

    for s in settings_table():
        assert s.flag in out, s.flag
        assert f"{s.ini} (ini)" in out or f"  {s.ini} " in out, s.ini


def test_header_without_gpu_says_what_is_missing(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVML device: the header says so and the cuDNN cases skip with a GPU reason."""
    monkeypatch.setenv("FAKE_GPU_NAME", "none")
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible to torch")
    result = run(project)
    result.stdout.fnmatch_lines(["rnnperf: no GPU fingerprint: *(cuDNN cases will be skipped)*",
                                 "*SKIPPED*cuDNN case needs a GPU: no CUDA GPU visible to torch*"])
    result.assert_outcomes(skipped=2)


def test_header_shows_the_fake_gpu(project: pytest.Pytester) -> None:
    """With a GPU the header carries model, driver, CUDA, clocks and processes."""
    result = run(project, "--co")
    result.stdout.fnmatch_lines(["rnnperf: GPU NVIDIA H200 (sm 9.0, *", "rnnperf: driver 580.95.05, CUDA driver 13.0*",
                                 "rnnperf: clocks SM *other compute processes: none*"])


def test_the_cuda_libraries_each_framework_loaded_are_named_before_the_tests(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fingerprint: torch ran a system cuDNN earlier on the library path while the header named the wheel's 9.19."""
    system = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"
    cublas = "/venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.13"
    (tmp_path / "maps").write_text(f"7f00-7f10 r-xp 00000000 08:01 1   {system}\n"
                                   f"7f10-7f20 r-xp 00000000 08:01 2   {cublas}\n")
    monkeypatch.setenv("FAKE_MAPS", str(tmp_path / "maps"))
    monkeypatch.setenv("FAKE_LIB_VERSIONS", json.dumps({system: 91002, cublas: [13, 1, 0]}))
    monkeypatch.setenv("FAKE_WHEELS", json.dumps({"cudnn_wheel": "9.19.0.56 (nvidia-cudnn-cu13)",
                                                  "cublas_wheel": "13.1.0.3 (nvidia-cublas)"}))
    result = run(project)
    result.assert_outcomes(passed=2)
    warning = (f"torch runs cuDNN 9.10.2 at {system}, not the installed wheel's 9.19.0.56 (nvidia-cudnn-cu13) "
               f"(the loader found another copy first: LD_LIBRARY_PATH, ldconfig)")
    result.stdout.fnmatch_lines([
        "rnnperf: cublas_wheel 13.1.0.3 (nvidia-cublas), cudnn_wheel 9.19.0.56 (nvidia-cudnn-cu13)",
        "rnnperf: scale *; the cuDNN, cuBLAS and CUDA runtime each one loaded are named after collection",
        "collected 2 items",
        f"rnnperf: torch loaded cuDNN 9.10.2 at {system}, cuBLAS 13.1.0 at {cublas}, "
        f"CUDA runtime (unavailable: not loaded)",
        f"rnnperf: warning: {warning}",
        "test_cases.py ..*",
        "*rnnperf summary*",
        f"torch: version=fake-1.0, cudnn_version=9.19.0, cudnn_library=9.10.2 at {system}, *",
        f"warning: {warning}",
    ])
    assert result.stdout.str().count(warning) == 2  # the cuBLAS is the wheel's: no warning of its own


@pytest.mark.parametrize("args, message", [
    (["--rnnperf-rounds=many"], "--rnnperf-rounds / rnnperf_rounds: 'many' is not a whole number"),
    (["--rnnperf-rounds=2.5"], "--rnnperf-rounds / rnnperf_rounds: '2.5' is not a whole number"),
    (["--rnnperf-min-effect=inf"], "--rnnperf-min-effect / rnnperf_min_effect: 'inf' is not a finite number"),
    (["--rnnperf-host-bound-effect=nan"], "--rnnperf-host-bound-effect / rnnperf_host_bound_effect: 'nan' is not a "
                                          "finite number"),
    (["--rnnperf-energy-s=-1"], "--rnnperf-energy-s / rnnperf_energy_s: -1.0 must be >= 0"),
    (["--rnnperf-rounds=0"], "--rnnperf-rounds / rnnperf_rounds: 0 must be >= 1"),
    (["--rnnperf-min-effect=0"], "--rnnperf-min-effect / rnnperf_min_effect: 0.0 must be > 0"),
    (["--rnnperf-max-case-s=-1"], "--rnnperf-max-case-s / rnnperf_max_case_s: -1.0 must be > 0"),
    (["--rnnperf-update-baseline", "--rnnperf-baseline-tag=nightly/1"],
     "--rnnperf-baseline-tag / rnnperf_baseline_tag: 'nightly/1': use letters, digits, '.', '_' and '-' only"),
    (["--rnnperf-baselines=tox.ini"], "--rnnperf-baselines / rnnperf_baselines: *tox.ini is a file, not a folder"),
    (["--rnnperf-compile-ahead=no"], "argument --rnnperf-compile-ahead: invalid choice: 'no' (choose from 'auto', 'off')"),
])
def test_malformed_option_is_a_one_line_usage_error(project: pytest.Pytester, args: list[str], message: str) -> None:
    """A bad value stops the run before collection (not after the suite ran), naming the option."""
    result = run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])
    assert "Traceback" not in result.stderr.str()


def test_paired_case_passes_and_reaches_benchmark_json(project: pytest.Pytester) -> None:
    """Both sides land in pytest-benchmark's JSON, grouped by case, with the rnnperf record attached."""
    result = run(project, "--benchmark-json=out.json")
    result.assert_outcomes(passed=2)
    data = load_json(project.path / "out.json")
    entries = {(b["group"], b["params"]["side"]): b for b in data["benchmarks"]}
    case_id = "torch-lstm-train-fp32-T4-B2-I3-H5-L1"
    cudnn, generic = entries[(case_id, "cudnn")], entries[(case_id, "generic")]
    assert cudnn["name"] == f"test_pair[cudnn-{case_id}]"
    assert cudnn["stats"]["rounds"] == 8
    record = cudnn["extra_info"]["rnnperf"]
    assert record["paths"][0]["evidence"].startswith("fake cudnn kernels; kernels: cuDNN RNN forward 1, backward 1")
    # 4 ms vs 1 ms of fake device time with 1% jitter: the speedup interval must sit tight around 4x.
    assert 3.9 < record["speedup"]["low"] <= record["speedup"]["estimate"] <= record["speedup"]["high"] < 4.1
    assert generic["stats"]["median"] > 3 * cudnn["stats"]["median"]
    assert data["machine_info"]["rnnperf"]["gpu_slug"] == "NVIDIA_H200"
    result.stdout.fnmatch_lines(["*rnnperf summary*", f"{case_id} *x [[]*", "*baseline: none for NVIDIA_H200 yet*"])


def test_marker_beats_command_line_beats_ini(project: pytest.Pytester) -> None:
    """rounds: marker 5 > --rnnperf-rounds 6 > ini 8."""
    project.makepyfile(test_marker="""
        import pytest
        from pytest_rnnperf.model.cases import Case, Shape

        @pytest.mark.rnnperf(rounds=5)
        def test_marked(rnnperf):
            rnnperf.measure(Case("torch", "rnn_tanh", Shape(3, 2, 3, 4)))

        def test_plain(rnnperf):
            rnnperf.measure(Case("torch", "rnn_relu", Shape(3, 2, 3, 4)))
    """)
    def rounds(*args: str) -> dict[str, int]:
        run(project, "test_marker.py", "--benchmark-json=r.json", *args).assert_outcomes(passed=2)
        return {b["group"].split("-")[1]: b["stats"]["rounds"] for b in load_json(project.path / "r.json")["benchmarks"]
                if b["params"]["side"] == "cudnn"}
    assert rounds("--rnnperf-rounds=6") == {"rnn_tanh": 5, "rnn_relu": 6}
    assert rounds() == {"rnn_tanh": 5, "rnn_relu": 8}


def test_wrong_path_fails_with_the_evidence(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 'cuDNN' side that did not run cuDNN fails and says what was seen."""
    monkeypatch.setenv("FAKE_WRONG_PATH", "1")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*the implementation that ran is not the one claimed*",
                                 "*cudnn    expected cuDNN; saw: fake: no cuDNN kernel ran*"])


def test_a_cudnn_call_whose_result_is_dropped_for_a_fallback_fails(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its ops show cuDNN, its kernels show the per-timestep loop beside it: the kernel-level proof fails it."""
    monkeypatch.setenv("FAKE_FALLBACK", "1")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*the implementation that ran is not the one claimed*",
                                 "*fake cudnn kernels; kernels: 6 launches per step, no fewer than the generic side's 4: "
                                 "a per-timestep loop ran beside cuDNN*"])
    monkeypatch.delenv("FAKE_FALLBACK")
    clean = run(project, "--benchmark-json=clean.json")
    clean.assert_outcomes(passed=2)
    proofs = [p["evidence"] for b in load_json(project.path / "clean.json")["benchmarks"]
              for p in b["extra_info"]["rnnperf"].get("paths", [])]
    assert any("kernels: cuDNN RNN forward 1, backward 1 per step, no generic cell; 2 vs 4 launches" in e
               for e in proofs), proofs
    assert any("kernels: no cuDNN RNN kernel" in e for e in proofs), proofs


def test_parity_failure_is_a_table(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output off by 1e-2 in FP32 fails with obtained error and tolerance per comparison."""
    monkeypatch.setenv("FAKE_PARITY_ERROR", "1e-2")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*parity out of tolerance (fp32: IEEE float32*",
                                 "*cudnn vs generic*output*5e-05*", "*cudnn vs reference*output*5e-05*"])


def test_nan_is_named(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN in the outputs fails with a clear note instead of a silent comparison."""
    monkeypatch.setenv("FAKE_PARITY_ERROR", "nan")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*output*inf*NaN in first side*"])


def test_speedup_below_floor_fails(project: pytest.Pytester) -> None:
    """Floor 10x against a 4x pair: the failure shows obtained, interval, floor and both medians."""
    project.makepyfile(test_cases=__import__("conftest").TEST_FILE.replace("FLOOR", "10.0"))
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cuDNN speedup below its floor:*", "*obtained*95% CI*floor*", "*10.00x*"])


def test_framework_missing_skips_with_reason(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Framework not installed: every case skips with the install hint."""
    monkeypatch.setenv("FAKE_UNAVAILABLE", "torch is not installed (pip install 'pytest-rnnperf[torch]')")
    result = run(project)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*skipped 2 case(s): torch is not installed*", "*SKIPPED [[]2[]]*torch is not installed*"])


def test_out_of_memory_skips_and_the_rest_goes_on(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case that does not fit skips with the reason; the next case still runs."""
    monkeypatch.setenv("FAKE_OOM", "torch-gru-*")
    result = run(project)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*torch-gru-train-fp32-T4-B2-I3-H5-L1 does not fit in GPU memory*"])


def test_benchmark_disable_runs_the_checks_only(project: pytest.Pytester) -> None:
    """--benchmark-disable: one round, nothing recorded, gates still applied."""
    result = run(project, "--benchmark-disable", "--benchmark-json=d.json")
    result.assert_outcomes(passed=2)
    out = project.path / "d.json"
    assert not out.exists() or out.read_text() == ""  # some pytest-benchmark versions create it up front


def test_xdist_workers_sharing_one_gpu_skip_cudnn_timing_and_record_nothing(project: pytest.Pytester) -> None:
    """pytest -n 2 on one GPU: the cuDNN cases skip with the reason, and recording is refused before the run
    (tests/plugin/test_xdist_e2e.py runs a worker per GPU)."""
    result = run(project, "-n", "2")
    result.assert_outcomes(skipped=2)
    reason = "cuDNN timing needs a GPU per pytest-xdist worker: 2 workers, 1 GPU; run with -n 1"
    result.stdout.fnmatch_lines([f"SKIPPED*{reason}"])
    refused = run(project, "-n", "2", "--rnnperf-update-baseline")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: --rnnperf-update-baseline: {reason}; nothing would be timed to store"])
    assert list(project.path.glob("baselines/**/*.json")) == []
    run(project, "-n", "0").assert_outcomes(passed=2)  # -n 0: no workers, timing as usual


def test_reports_are_written(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON report, Markdown (also to $GITHUB_STEP_SUMMARY) and a PNG plot."""
    summary = project.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run(project, "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=2)
    report = load_json(project.path / "out" / "rnnperf.json")
    assert [r["case"]["id"] for r in report["results"]] == ["torch-lstm-train-fp32-T4-B2-I3-H5-L1",
                                                            "torch-gru-train-fp32-T4-B2-I3-H5-L1"]
    assert report["gpu_slug"] == "NVIDIA_H200"
    md = summary.read_text()
    assert md.startswith("## pytest-rnnperf: all checks passed")
    assert "| torch-gru-train-fp32-T4-B2-I3-H5-L1 |" in md
    pytest.importorskip("matplotlib")
    assert (project.path / "out" / "speedups.png").read_bytes()[:4] == b"\x89PNG"


def test_ready_suite_runs_what_it_can_on_this_machine(pytester: pytest.Pytester) -> None:
    """The real suite on a machine without a GPU: reference cases pass, cuDNN cases skip with the reason."""
    gpu = torch_sees_a_gpu()
    if gpu is None:
        pytest.skip("the ready suite's torch cases need torch")
    if gpu:
        pytest.skip("this test is about a machine without a GPU")
    result = pytester.runpytest_subprocess(str(REPO / "suites" / "test_cudnn.py"), "-k", "torch and not keras and not compile", "--rootdir",
                                           str(REPO), "-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=3", "--benchmark-disable")
    result.assert_outcomes(passed=10, skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED [[]2[]]*cuDNN case needs a GPU: no CUDA GPU visible to torch*"])


def test_ready_suite_runs_keras_and_jax_generic_paths_in_worker_processes_here(pytester: pytest.Pytester) -> None:
    """Keras on torch and on JAX, and native JAX, each in its subprocess: generic paths pass, cuDNN cases skip with why."""
    needs_a_cpu_machine_with(("keras", "torch", "jax"), "the Keras and JAX backends")
    result = pytester.runpytest_subprocess(str(REPO / "suites" / "test_cudnn.py"), "-k", "keras or jax", "--rootdir",
                                           str(REPO), "-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=3", "--benchmark-disable")
    result.assert_outcomes(passed=23, skipped=4)
    result.stdout.fnmatch_lines(["*SKIPPED [[]2[]]*cuDNN case needs a GPU: no CUDA GPU visible to torch*",
                                 "*SKIPPED [[]2[]]*cuDNN case needs a GPU: no CUDA GPU visible to jax*"])


FIXTURES_TEST = """
def test_fingerprint(rnnperf_gpu_fingerprint):
    assert rnnperf_gpu_fingerprint["available"] and rnnperf_gpu_fingerprint["gpu_slug"] == "NVIDIA_H200"
    assert rnnperf_gpu_fingerprint["device"]["driver_version"] == "580.95.05"
    assert len(rnnperf_gpu_fingerprint["key"]) == 12

def test_window(rnnperf_telemetry_window):
    with rnnperf_telemetry_window() as window:
        pass
    summary = window.summary.as_dict()
    assert summary["duration_s"] >= 0 and "energy_j" in summary
"""


def test_gpu_fixtures_for_users_own_tests(project: pytest.Pytester) -> None:
    """rnnperf_gpu_fingerprint gives the fields and a stable key; rnnperf_telemetry_window a never-failing window."""
    project.makepyfile(test_fixtures=FIXTURES_TEST)
    result = run(project, "test_fixtures.py")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*Deprecat*")


def test_the_fixtures_old_names_still_work_and_warn_with_the_new_name(project: pytest.Pytester) -> None:
    """gpu_fingerprint and telemetry_window, the names before the rnnperf_ prefix, give the same for one release."""
    project.makepyfile(test_fixtures=FIXTURES_TEST.replace("rnnperf_", ""))
    result = run(project, "test_fixtures.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*PytestDeprecationWarning: fixture {old} is now rnnperf_{old}*"
                                 for old in ("gpu_fingerprint", "telemetry_window")])


@pytest.mark.parametrize("gpu, outcome", [("none", "skipped"), ("NVIDIA H200", "passed")])
def test_a_gpu_marked_test_is_skipped_where_nvml_sees_no_gpu_and_runs_where_it_does(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gpu: str, outcome: str) -> None:
    """The ``gpu`` marker skips, naming why no GPU is visible; with one, the test runs as written."""
    monkeypatch.setenv("FAKE_GPU_NAME", gpu)
    project.makepyfile(test_marked="""
        import pytest

        @pytest.mark.gpu
        def test_needs_the_card():
            pass
    """)
    result = run(project, "test_marked.py")
    result.assert_outcomes(**{outcome: 1})
    if outcome == "skipped":
        result.stdout.fnmatch_lines(["*SKIPPED*test_marked.py:*: no GPU visible: *"])


def test_the_ready_suite_without_the_plugin_loaded_says_which_option_loads_it(pytester: pytest.Pytester,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugin autoload off: one line naming -p pytest_rnnperf.plugin, not a KeyError from suites/conftest.py."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess(str(REPO / "suites"), "--collect-only", "--rootdir", str(REPO),
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.errlines + result.outlines if line.strip()]
    assert lines == ["ERROR: the ready suite needs the pytest-rnnperf plugin, which is not loaded "
                     "(PYTEST_DISABLE_PLUGIN_AUTOLOAD is set): add -p pytest_rnnperf.plugin to the command line or "
                     "to addopts"]
