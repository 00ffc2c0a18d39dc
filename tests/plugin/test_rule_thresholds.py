"""A rule's thresholds are declared once, next to the rule: every place a user sets one is made from that."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_rnnperf.cli.main import parser
from pytest_rnnperf.judge import rules
from pytest_rnnperf.judge.compare import Comparison
from pytest_rnnperf.judge.params import FRACTION, Threshold
from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.session.options_doc import options_markdown
from pytest_rnnperf.session.settings import Settings, setting

JITTER = Threshold("max_jitter", float, 0.07, FRACTION, "largest spread of the step a case may show", low=0)


@dataclass(frozen=True)
class Jitter:
    """A rule that judges nothing: it only brings a threshold of its own."""

    name: str = "jitter"
    params: tuple[Threshold, ...] = (JITTER,)

    def compare(self, ctx: rules.Context) -> Comparison | None:
        """Never applies."""
        return None


@pytest.fixture
def jitter_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule added to ``RULES``, as a new rule is, for this test only."""
    monkeypatch.setattr(rules, "RULES", rules.RULES + (Jitter(),))


def test_a_new_rules_threshold_is_a_policy_value_a_setting_a_compare_flag_and_a_row_of_the_options_page(
        jitter_rule: None) -> None:
    """Declaring the threshold is the only edit: the policy, the settings, compare and the docs all know it."""
    assert Policy().max_jitter == 0.07 and Policy(max_jitter=0.1).max_jitter == 0.1
    with pytest.raises(ValueError, match="max_jitter must be a finite number > 0"):
        Policy(max_jitter=0.0)
    row = setting("max_jitter")
    assert (row.flag, row.ini, row.default, row.parse("9%")) == ("--rnnperf-max-jitter", "rnnperf_max_jitter", 0.07,
                                                                 0.09)
    assert Settings.defaults(max_jitter=0.09).policy().max_jitter == 0.09
    assert ("| `--rnnperf-max-jitter` | `rnnperf_max_jitter` | `7%` | fraction or percent (0.03, 3%) |  | "
            "largest spread of the step a case may show |") in options_markdown()
    args = parser().parse_args(["compare", "old.json", "new.json", "--max-jitter", "9%"])
    assert args.max_jitter == 0.09 and parser().parse_args(["compare", "old.json", "new.json"]).max_jitter == 0.07


def test_a_new_rules_threshold_is_a_pytest_option_and_an_ini_key_checked_as_the_others_are(
        jitter_rule: None, pytester: pytest.Pytester) -> None:
    """In pytest's help with its ini twin; a bad ini value stops the run in one line naming both."""
    out = pytester.runpytest_inprocess("--help").stdout.str()
    assert "--rnnperf-max-jitter" in out and "rnnperf_max_jitter" in out
    pytester.makeini("[pytest]\nrnnperf_max_jitter = 7\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --rnnperf-max-jitter / rnnperf_max_jitter: 7.0 would be 700%" in result.stderr.str()
