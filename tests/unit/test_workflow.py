"""The nightly GPU workflow (.github/workflows/nightly-gpu.yml) and the GitLab example of docs/nightly-ci.md, checked
without a GPU.

Both are validated against the schemas that check-jsonschema ships (SchemaStore's github-workflow schema, GitLab's
CI schema), in a subprocess whose sockets are disabled: the check needs no network.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "nightly-gpu.yml"

# check-jsonschema's command line, with every way out to the network closed first.
_OFFLINE_CHECK = """
import runpy, socket, sys
def _no_network(*args, **kwargs):
    raise OSError("network disabled for this check")
socket.socket.connect = _no_network
socket.create_connection = _no_network
socket.getaddrinfo = _no_network
sys.argv = ["check-jsonschema", *sys.argv[1:]]
runpy.run_module("check_jsonschema", run_name="__main__", alter_sys=True)
"""


def check_jsonschema(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run check-jsonschema offline; its exit status is 0 when every file validates."""
    return subprocess.run([sys.executable, "-c", _OFFLINE_CHECK, *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def load(path: Path) -> dict[str, Any]:
    """A workflow as GitHub reads it: PyYAML reads the key `on` as YAML 1.1's boolean true, GitHub as "on"."""
    workflow = yaml.safe_load(path.read_text())
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def steps(job: str) -> list[dict[str, Any]]:
    return load(WORKFLOW)["jobs"][job]["steps"]


def step(job: str, name: str) -> dict[str, Any]:
    """The step of ``job`` whose name starts with ``name``."""
    found = [s for s in steps(job) if s.get("name", "").startswith(name)]
    assert len(found) == 1, f"{job} has {len(found)} steps named {name!r}..."
    return found[0]


def uses(job: str, action: str) -> list[dict[str, Any]]:
    """The steps of ``job`` that use ``action`` (any version)."""
    return [s for s in steps(job) if s.get("uses", "").split("@")[0] == action]


def test_the_workflow_validates_against_the_github_workflow_schema() -> None:
    result = check_jsonschema("--builtin-schema", "vendor.github-workflows", WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def _unknown_trigger(workflow: dict[str, Any]) -> None:
    workflow["on"]["nightly"] = {}


def _step_with_uses_and_run(workflow: dict[str, Any]) -> None:
    workflow["jobs"]["suite"]["steps"][0]["run"] = "echo also a command"


@pytest.mark.parametrize("breaks, where", [(_unknown_trigger, "$.on"), (_step_with_uses_and_run, "$.jobs.suite")],
                         ids=["an unknown trigger", "a step with both uses and run"])
def test_a_broken_copy_of_the_workflow_does_not_validate(tmp_path: Path, breaks: Any, where: str) -> None:
    """So the schema check can fail: the same workflow, one mistake in it, is rejected at that place."""
    workflow = load(WORKFLOW)
    intact, broken = tmp_path / "intact.yml", tmp_path / "broken.yml"
    intact.write_text(yaml.safe_dump(workflow, sort_keys=False))
    breaks(workflow)
    broken.write_text(yaml.safe_dump(workflow, sort_keys=False))
    assert check_jsonschema("--builtin-schema", "vendor.github-workflows", intact).returncode == 0
    result = check_jsonschema("--builtin-schema", "vendor.github-workflows", broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"broken.yml::{where}" in result.stdout


def test_the_schema_check_really_has_no_network(tmp_path: Path) -> None:
    """A schema it would have to download fails to load: the validations above used only what is installed."""
    instance = tmp_path / "workflow.yml"
    instance.write_text("on: workflow_dispatch\njobs: {}\n")
    result = check_jsonschema("--no-cache", "--schemafile", "https://json.schemastore.org/github-workflow.json",
                              instance)
    assert result.returncode != 0
    assert "network disabled for this check" in result.stdout + result.stderr


def test_it_runs_nightly_on_a_schedule_and_by_hand_with_a_record_baseline_switch() -> None:
    on = load(WORKFLOW)["on"]
    assert set(on) == {"schedule", "workflow_dispatch"}
    assert on["schedule"][0]["cron"]
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["record-baseline"]["type"] == "boolean" and inputs["record-baseline"]["default"] is False
    assert inputs["pytest-k"]["type"] == "string"


def test_it_runs_on_a_self_hosted_gpu_runner_one_run_at_a_time_within_a_time_limit() -> None:
    job = load(WORKFLOW)["jobs"]["suite"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert job["concurrency"] == {"group": "rnnperf-gpu", "cancel-in-progress": False}
    assert 15 < job["timeout-minutes"] <= 120


def _command(job: str, name: str) -> str:
    """The shell command of a step, its continued lines joined and its spaces squeezed."""
    return " ".join(step(job, name)["run"].replace("\\\n", " ").split())


def test_its_test_step_runs_the_packaged_suite_keeps_the_night_and_fails_the_job_on_failure() -> None:
    test = step("suite", "Compare with this GPU model's history")
    command = _command("suite", "Compare with this GPU model's history")
    assert ('python -m pytest --pyargs pytest_rnnperf.suites --rootdir "$GITHUB_WORKSPACE" --benchmark-compare '
            "--rnnperf-keep-run --rnnperf-budget=5") in command
    assert '--rnnperf-compile-cache="$HOME/.cache/pytest-rnnperf"' in command
    assert "--benchmark-json=rnnperf-run.json --rnnperf-report-dir=rnnperf-report" in command
    assert 'if [ "$gpus" -gt 1 ]; then args+=(-n auto); fi' in command
    # Nothing swallows pytest's exit status.
    assert "continue-on-error" not in test and "|| true" not in command and "set +e" not in command
    assert test["if"] == "${{ !inputs.record-baseline }}"


def test_it_installs_the_pinned_release_and_no_checkout() -> None:
    """Copied into another repository, the workflow installs pytest-rnnperf from the index, never the checkout."""
    workflow = load(WORKFLOW)
    install = _command("suite", "Install into a fresh virtual environment")
    assert re.fullmatch(r"\d+\.\d+\.\d+", workflow["env"]["RNNPERF_VERSION"])
    assert '"pytest-rnnperf[torch,tf,jax,claims,device,html]==$RNNPERF_VERSION"' in install
    text = WORKFLOW.read_text()
    assert "pip install -e" not in text and "pip install ." not in text and '".[' not in text
    assert "suites/" not in text.replace("pytest_rnnperf.suites", "")  # no path into this repository's tree


def test_the_history_of_kept_nights_is_carried_on_its_own_branch_by_a_job_without_the_gpu() -> None:
    """Each night starts from the kept runs of the nights before, and a job on a hosted runner adds tonight's."""
    workflow = load(WORKFLOW)
    branch = workflow["env"]["RNNPERF_HISTORY_BRANCH"]
    assert branch and branch != "main"
    names = [s.get("name", "") for s in steps("suite")]
    assert names.index("Bring in the history of earlier nights") < names.index("Compare with this GPU model's history")
    assert 'git checkout FETCH_HEAD -- baselines/' in _command("suite", "Bring in the history of earlier nights")
    assert "baselines/*_run.json" in _command("suite", "Pack tonight's kept run")
    history = workflow["jobs"]["history"]
    assert history["needs"] == "suite" and history["runs-on"] == "ubuntu-latest"
    assert history["permissions"] == {"contents": "write"}
    push = history["steps"][-1]["run"]
    assert 'git push origin "HEAD:refs/heads/$RNNPERF_HISTORY_BRANCH"' in push
    # The only push in the workflow goes to the history branch.
    assert WORKFLOW.read_text().count("git push") == 1


def test_the_workflow_and_the_readme_state_the_same_minutes_for_a_quiet_night() -> None:
    """One measured figure for a quiet night, the same wherever a user reads it."""
    minutes = r"about (\d+) minutes on a quiet night"
    figures = {name: re.findall(minutes, " ".join(re.sub(r"(?m)^\s*#", "", path.read_text()).split()))
               for name, path in (("workflow", WORKFLOW), ("README", REPO / "README.md"),
                                  ("nightly-ci", REPO / "docs" / "nightly-ci.md"))}
    assert all(figures.values()), figures
    assert len({f for found in figures.values() for f in found}) == 1, figures


def test_artifact_uploads_run_even_when_the_suite_fails_named_by_runner_and_run() -> None:
    report = step("suite", "Upload the report")
    assert report["uses"].startswith("actions/upload-artifact@")
    assert report["if"] == "always()"
    assert report["with"]["path"].split() == ["rnnperf-report/", "rnnperf-run.json", ".benchmarks/", "rnnperf-site/"]
    assert report["with"]["include-hidden-files"] is True  # upload-artifact leaves out .benchmarks/ otherwise
    assert "${{ runner.name }}" in report["with"]["name"] and "${{ github.run_id }}" in report["with"]["name"]


def test_the_history_site_is_built_every_night_and_published_to_pages_only_where_the_repository_enables_it() -> None:
    """The site of the stored runs and tonight's; a failed night publishes too, from a job that alone may write Pages."""
    workflow = load(WORKFLOW)
    install = step("suite", "Install into a fresh virtual environment")["run"]
    assert "html]==$RNNPERF_VERSION" in install  # plotly draws the pages
    site = step("suite", "Build the history site")
    assert site["if"] == "always()" and site["id"] == "site"
    assert 'python -m pytest_rnnperf history "${runs[@]}" --html rnnperf-site' in site["run"]
    assert 'runs=(baselines/)' in site["run"] and "runs+=(rnnperf-run.json)" in site["run"]
    assert 'echo "built=true" >> "$GITHUB_OUTPUT"' in site["run"]
    assert workflow["jobs"]["suite"]["outputs"]["site"] == "${{ steps.site.outputs.built }}"
    (hand,) = uses("suite", "actions/upload-pages-artifact")
    assert "vars.RNNPERF_PAGES == 'true'" in hand["if"] and hand["with"]["path"] == "rnnperf-site/"
    pages = workflow["jobs"]["pages"]
    assert pages["needs"] == "suite" and pages["runs-on"] == "ubuntu-latest"
    assert pages["if"].startswith("${{ always() && vars.RNNPERF_PAGES == 'true'")
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in pages["steps"]] == ["actions/deploy-pages"]


def test_the_record_baseline_path_opens_a_pull_request_and_never_pushes_to_the_default_branch() -> None:
    workflow = load(WORKFLOW)
    record = step("suite", "Record a new baseline")
    assert record["if"] == "${{ inputs.record-baseline }}"
    assert "--rnnperf-update-baseline --rnnperf-no-fail-regression" in record["run"]
    assert "--benchmark-compare" not in record["run"]
    # The GPU runner only reads; the job that opens the pull request alone may write, and only after a clean run.
    assert workflow["permissions"] == {"contents": "read"}
    assert "permissions" not in workflow["jobs"]["suite"]
    pr_job = workflow["jobs"]["baseline-pr"]
    assert pr_job["needs"] == "suite"
    assert pr_job["if"].startswith("${{ inputs.record-baseline && ")
    assert pr_job["permissions"] == {"contents": "write", "pull-requests": "write"}
    (create,) = uses("baseline-pr", "peter-evans/create-pull-request")
    assert create["with"]["add-paths"] == "baselines/"
    assert create["with"]["branch"] == "${{ needs.suite.outputs.branch }}"
    assert "branch=rnnperf/baseline-$runner-$(date -u +%Y-%m-%d)" in step("suite", "Pack the new baseline files")["run"]
    assert "base" not in create["with"]


def _gitlab_example() -> str:
    """The YAML block of docs/nightly-ci.md that starts with '# .gitlab-ci.yml'."""
    match = re.search(r"```yaml\n(# \.gitlab-ci\.yml\n.*?)```", (REPO / "docs" / "nightly-ci.md").read_text(), re.S)
    assert match, "docs/nightly-ci.md has no '# .gitlab-ci.yml' example"
    return match.group(1)


def test_the_readme_points_at_the_workflow_and_its_gitlab_example_validates(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert "(.github/workflows/nightly-gpu.yml)" in readme
    example = tmp_path / ".gitlab-ci.yml"
    example.write_text(_gitlab_example())
    result = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", example)
    assert result.returncode == 0, result.stdout + result.stderr
    job = yaml.safe_load(example.read_text())["rnnperf"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    assert job["artifacts"]["when"] == "always"
    command = next(line for line in job["script"] if "python -m pytest" in line)
    assert command.startswith("python -m pytest --pyargs pytest_rnnperf.suites ")
    assert "--benchmark-compare --rnnperf-keep-run" in command and "--benchmark-json=rnnperf-run.json" in command
    assert job["variables"]["RNNPERF_SPEC"].endswith("==0.1.0") and "pip install -e" not in example.read_text()
    assert job["cache"]["paths"] == ["rnnperf-history/"] and job["cache"]["when"] == "always"
    assert "rnnperf-site/" in job["artifacts"]["paths"] and "--html rnnperf-site" in job["after_script"][-1]
    pages = yaml.safe_load(example.read_text())["pages"]  # GitLab publishes the job named pages, folder public/
    assert pages["needs"] == ["rnnperf"] and pages["artifacts"]["paths"] == ["public"]
    assert pages["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule" && $RNNPERF_PAGES == "true"', "when": "always"}]
    assert "mv rnnperf-site public" in pages["script"][0]


def test_the_compile_cache_is_restored_per_gpu_model_and_saved_once_per_installed_stack() -> None:
    """A runner that starts empty each night compiles only on the first night of its GPU model: the cache is keyed
    by GPU model and installed packages, restored from the newest of that model, before the suite runs."""
    names = [s.get("name", "") for s in steps("suite")]
    restore = step("suite", "Restore the compile cache")
    assert restore["uses"].split("@")[0] == "actions/cache"
    assert restore["with"]["path"] == "~/.cache/pytest-rnnperf"
    assert restore["with"]["key"] == "${{ steps.compile-cache.outputs.key }}"
    assert restore["with"]["restore-keys"] == "${{ steps.compile-cache.outputs.prefix }}"
    naming = _command("suite", "Name the compile cache")
    assert "nvidia-smi --query-gpu=name" in naming and "pip freeze | sha256sum" in naming
    assert names.index("Name the compile cache") < names.index("Restore the compile cache") \
        < names.index("Compare with this GPU model's history")
    assert '--rnnperf-compile-cache="$HOME/.cache/pytest-rnnperf"' in _command("suite", "Compare with this GPU")
