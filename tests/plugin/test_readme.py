"""The README's example test for a team's own model, run exactly as printed there, with the real torch."""

from __future__ import annotations

import re

import pytest

from conftest import REPO, torch_sees_a_gpu


def _example() -> str:
    """The Python block of the README that starts with '# test_my_model.py'."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"```python\n(# test_my_model\.py\n.*?)```", text, re.S)
    assert match, "README.md has no '# test_my_model.py' example"
    return match.group(1)


def test_the_readmes_own_model_example_runs_as_printed(pytester: pytest.Pytester) -> None:
    """On a GPU both sides run and are checked; without one the generic copy is checked against float64."""
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


@pytest.mark.parametrize("call, message", [
    ("rnnperf.model(lambda: torch.nn.Linear(3, 3), inputs=torch.randn(2, 3))", "Linear has no nn.LSTM, nn.GRU or nn.RNN"),
    ("rnnperf.model(lambda: torch.nn.LSTM(3, 5), inputs=torch.randn(4, 2, 7))", "LSTM failed on its inputs: RuntimeError"),
    ("rnnperf.model(lambda: torch.nn.LSTM(3, 5), inputs=torch.randn(4, 2, 3), mode='training')",
     "rnnperf.model(): unknown mode 'training'; expected one of train, infer"),
    ("rnnperf.model(lambda: object(), inputs=torch.randn(4, 2, 3))", "builtins.object is no model a backend can check"),
])
def test_a_model_the_check_cannot_use_fails_in_one_line(pytester: pytest.Pytester, call: str, message: str) -> None:
    """No RNN inside, inputs of the wrong shape, a misspelt mode, a non-torch object: one line, no traceback."""
    if torch_sees_a_gpu() is None:
        pytest.skip("needs torch")
    pytester.makepyfile(test_bad_model=f"import torch\n\ndef test_model(rnnperf):\n    {call}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--rnnperf-report-dir=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*test_bad_model.py::test_model: *{message}*"])
    assert "Traceback" not in result.stdout.str()
