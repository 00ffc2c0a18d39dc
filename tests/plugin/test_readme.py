"""The example tests for a team's own model, in the README and on the own-model page, run exactly as printed there,
with the real frameworks."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, torch_sees_a_gpu, whole_lines

OWN_MODEL_PAGE = "docs/own-model.md"


def _example(name: str = "test_my_model.py", page: str = "README.md") -> str:
    """The Python block of ``page`` that starts with '# <name>'."""
    text = (REPO / page).read_text()
    match = re.search(r"```python\n(# " + re.escape(name) + r"\n.*?)```", text, re.S)
    assert match, f"{page} has no '# {name}' example"
    return match.group(1)


def test_the_readmes_own_model_example_runs_as_printed(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU both sides run and are checked; without one the generic copy is checked against float64."""
    monkeypatch.setenv("COLUMNS", "200")  # the summary's widest: every column of the table on one line
    gpu = torch_sees_a_gpu()
    if gpu is None:
        pytest.skip("the example needs torch (pip install 'pytest-rnnperf[torch]')")
    pytester.makepyfile(test_my_model=_example())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=5", "--rnnperf-energy-s=0")
    result.assert_outcomes(passed=1)
    case = "test_my_model.py::test_encoder_trains_on_cudnn"
    if gpu:
        result.stdout.fnmatch_lines(["cuDNN vs generic*", f"{case} * ok * ok"])
    else:
        result.stdout.fnmatch_lines(["generic path vs float64 reference:", f"{case} * - * ok * ok",
                                     f"note: {case}: cuDNN side not run: cuDNN case needs a GPU: *"])


def test_the_own_model_pages_torch_example_runs_as_printed(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Two named models in one test and a tf32 predict: each is its own case, checked (the generic copy against
    float64 without a GPU)."""
    monkeypatch.setenv("COLUMNS", "200")  # each case's row on one line
    gpu = torch_sees_a_gpu()
    if gpu is None:
        pytest.skip("the example needs torch (pip install 'pytest-rnnperf[torch]')")
    pytester.makepyfile(test_my_tagger=_example("test_my_tagger.py", OWN_MODEL_PAGE))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=5", "--rnnperf-energy-s=0")
    result.assert_outcomes(passed=2)
    test = "test_my_tagger.py::test_tagger_trains_on_cudnn_at_two_sizes"
    cases = [f"{test}::h64", f"{test}::h128", "test_my_tagger.py::test_tagger_predicts_on_cudnn_in_tf32"]
    result.stdout.fnmatch_lines_random([f"{case} *" for case in cases])


def test_the_own_model_pages_keras_example_runs_as_printed_on_every_keras_backend(pytester: pytest.Pytester,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow in this process, torch and JAX in subprocesses: without a GPU each generic copy is checked against
    float64 and the cuDNN side is skipped with the reason; on a GPU both sides run."""
    monkeypatch.setenv("COLUMNS", "200")  # the summary's widest: every column of the table on one line
    missing = [m for m in ("keras", "tensorflow", "torch", "jax") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the Keras example runs on TensorFlow, torch and JAX: {', '.join(missing)} not installed")
    gpu = torch_sees_a_gpu()
    pytester.makepyfile(test_my_keras_model=_example("test_my_keras_model.py", OWN_MODEL_PAGE))
    # Without a GPU one timed round (--benchmark-disable): what is checked there is the proof, parity and notes; on a
    # GPU the example runs as printed, its speedup floor judged on its rounds.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                           "--rnnperf-rounds=5", "--rnnperf-energy-s=0",
                                           *(() if gpu else ("--benchmark-disable",)))
    result.assert_outcomes(passed=3)
    case = "test_my_keras_model.py::test_classifier_trains_on_cudnn"
    if gpu:
        result.stdout.fnmatch_lines(["cuDNN vs generic*"])
        return
    lines = ["generic path vs float64 reference:"]
    lines += [f"{case}[[]{backend}[]] * - * ok * ok" for backend in ("tensorflow", "torch", "jax")]
    result.stdout.fnmatch_lines(lines)
    # The summary wraps a note longer than the terminal onto indented lines: read each note whole.
    notes = whole_lines(result)
    for backend in ("tensorflow", "torch", "jax"):
        notes.fnmatch_lines([
            f"note: {case}[[]{backend}[]]: Keras on {backend}: 3 LSTM/GRU layer(s) found; on cuDNN in the cuDNN copy: "
            f"bidirectional/backward_lstm LSTM(128), bidirectional/forward_lstm LSTM(128), lstm* LSTM(128)",
            f"note: {case}[[]{backend}[]]: train step: forward, gradients of the compiled loss, then Adam updates the "
            f"weights",
            f"note: {case}[[]{backend}[]]: cuDNN side not run: cuDNN case needs a GPU: *"])


# Each a model the check cannot use, one per test of one file: a single pytest subprocess (one torch import) runs them.
BAD_MODELS = [
    ("rnnperf.model(lambda: torch.nn.Linear(3, 3), inputs=torch.randn(2, 3))", "Linear has no nn.LSTM, nn.GRU or nn.RNN"),
    ("rnnperf.model(lambda: torch.nn.LSTM(3, 5), inputs=torch.randn(4, 2, 7))", "LSTM failed on its inputs: RuntimeError"),
    ("rnnperf.model(lambda: torch.nn.LSTM(3, 5), inputs=torch.randn(4, 2, 3), mode='training')",
     "rnnperf.model(): unknown mode 'training'; expected one of train, infer"),
    ("rnnperf.model(lambda: object(), inputs=torch.randn(4, 2, 3))", "builtins.object is no model a backend can check"),
]


@pytest.fixture(scope="module")
def bad_models_run(tmp_path_factory: pytest.TempPathFactory) -> pytest.RunResult:
    """pytest in a subprocess over test_bad_model.py, whose test_model_<i> calls BAD_MODELS[i]."""
    if torch_sees_a_gpu() is None:
        pytest.skip("needs torch")
    folder = tmp_path_factory.mktemp("bad_models")
    tests = "".join(f"\n\ndef test_model_{i}(rnnperf):\n    {call}\n" for i, (call, _) in enumerate(BAD_MODELS))
    (folder / "test_bad_model.py").write_text(f"import torch\n{tests}")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "HOME": str(folder), "PY_COLORS": "0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rnnperf-report-dir=none"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)  # as pytester would
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), 0.0)


@pytest.mark.parametrize("index", range(len(BAD_MODELS)), ids=[message for _, message in BAD_MODELS])
def test_a_model_the_check_cannot_use_fails_in_one_line(bad_models_run: pytest.RunResult, index: int) -> None:
    """No RNN inside, inputs of the wrong shape, a misspelt mode, a non-torch object: one line, no traceback."""
    bad_models_run.assert_outcomes(failed=len(BAD_MODELS))
    bad_models_run.stdout.fnmatch_lines([f"*test_bad_model.py::test_model_{index}: *{BAD_MODELS[index][1]}*"])
    assert "Traceback" not in bad_models_run.stdout.str()
