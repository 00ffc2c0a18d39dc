"""Report pieces that need no pytest run: the environment diff against a baseline."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fake_nvml import FakeNVML  # noqa: E402

from pytest_rnnperf.measure.gpu import read_gpu_info  # noqa: E402
from pytest_rnnperf.model.records import FORMAT_VERSION, StoredRun  # noqa: E402
from pytest_rnnperf.report.rows import env_diff_lines  # noqa: E402
from pytest_rnnperf.session.run import Run  # noqa: E402
from pytest_rnnperf.session.session import RnnperfSession  # noqa: E402
from pytest_rnnperf.store.stored import Stored  # noqa: E402


def test_env_diff_ignores_frameworks_not_loaded_yet_and_names_real_changes() -> None:
    """Before torch's first case the torch.* fields are not 'absent'; a cuDNN change of TF is named."""
    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={"tensorflow": "2.21.0"}))
    run.measured.runtime["tf"] = {"tf.cudnn_runtime": "9.20.0"}
    env = run.environment()
    old = dict(env, **{"tf.cudnn_runtime": "9.19.0", "torch.cudnn_version": "9.19.0"})
    run.stored = Stored((StoredRun(path=Path("b.json"), gpu_slug="NVIDIA_H200", environment=old, records={}),))
    assert env_diff_lines(run) == ["tf.cudnn_runtime: 9.19.0 -> 9.20.0"]
    run.measured.runtime["torch"] = {"torch.cudnn_version": "9.19.0"}
    assert env_diff_lines(run) == ["tf.cudnn_runtime: 9.19.0 -> 9.20.0"]
    run.measured.runtime["torch"] = {"torch.cuda_build": "13.0"}  # torch ran and no longer reports its cuDNN
    assert sorted(env_diff_lines(run)) == ["tf.cudnn_runtime: 9.19.0 -> 9.20.0", "torch.cuda_build: absent -> 13.0",
                                           "torch.cudnn_version: 9.19.0 -> absent"]


def test_window_flags_print_as_warnings_and_notes_as_notes() -> None:
    """A throttled window is a warning about the measurement; a compile time is a note about the case."""
    from factories import record

    from pytest_rnnperf.model.flags import FlagKind, WindowFlag
    from pytest_rnnperf.report.text import summary_lines

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    flag = WindowFlag(FlagKind.THROTTLED, "clocks throttled during the 2.00 s window: power 0.50 s")
    run.measured.results.append(record(flags=(flag,), notes=("compiled in 8.16 s",)))
    lines = summary_lines(run)
    case = run.measured.results[0].id
    assert f"warning: {case}: clocks throttled during the 2.00 s window: power 0.50 s" in lines
    assert f"note: {case}: compiled in 8.16 s" in lines
    assert not any(line.startswith("warning:") and "compiled" in line for line in lines)


def test_the_terminal_markdown_and_json_draw_the_rows_built_once() -> None:
    """Each renderer reads the rows, not the results: a cell changed in the rows shows in all three."""
    from dataclasses import replace

    from factories import record

    from pytest_rnnperf.report.markdown import markdown
    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import summary_lines

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    run.measured.results.append(record())
    rows = build_rows(run)
    assert rows.status == "all checks passed" and len(rows.paired) == 1 and not rows.alone
    row = rows.cases[0]
    marked = replace(rows, cases=(replace(row, cells=dict(row.cells, path="MARKED")),))
    assert any("MARKED" in line for line in summary_lines(run, marked))
    assert "MARKED" in markdown(run, marked)
    assert marked.as_dict()["cases"][0]["path"] == "MARKED"
    assert marked.as_dict()["cases"][0]["verdict"] == "-"  # not judged: no baseline


def test_a_case_below_its_floor_makes_the_status_gate_failures() -> None:
    """The rows' status is what the Markdown title says: a speedup under the floor is a gate failure."""
    from factories import record

    from pytest_rnnperf.report.markdown import markdown
    from pytest_rnnperf.report.rows import build_rows

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    from pytest_rnnperf.model.stats import Interval

    run.measured.results.append(record(speedup=Interval(0.25, 0.24, 0.26, 0.95)))  # cuDNN 4x slower: far under any floor
    assert build_rows(run).status == "gate failures"
    assert markdown(run).startswith("## pytest-rnnperf: gate failures")


def test_a_known_issue_that_failed_as_marked_is_listed_apart_and_leaves_the_status_alone() -> None:
    """A case whose test is an expected failure (xfail) is neither the run's status nor a row of the answer: a quiet
    night with known framework issues reads as one."""
    from factories import record

    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import answer_lines

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    run.measured.results.append(record(speedup=Interval(0.25, 0.24, 0.26, 0.95)))
    case = run.measured.results[0].id
    assert build_rows(run).status == "gate failures" and build_rows(run).answer
    run.measured.expected.append(case)
    rows = build_rows(run)
    assert rows.status == "all checks passed" and not rows.answer
    assert answer_lines(rows)[1] == (f"known issues: 1 case(s) failed as their tests are marked to (xfail), not "
                                     f"counted above: {case}")


def _timed_run() -> RnnperfSession:
    """Three cases of two backends with their phases' seconds: tf twice, then torch once."""
    from factories import record

    from pytest_rnnperf.model.cases import ModelCase

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    for case_id, framework, cost in (("tf-a", "tf", {"build": 10.0, "parity": 4.0}),
                                     ("torch-a", "torch", {"build": 2.0, "parity": 1.0, "wall": 3.0}),
                                     ("tf-b", "tf", {"build": 12.0, "parity": 5.5})):
        run.measured.results.append(record(case=ModelCase(id=case_id, framework=framework), cost_s=cost))
    return run


def test_where_the_time_went_has_one_line_per_backend_and_the_run_s_wall_time() -> None:
    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import summary_lines

    run = _timed_run()
    lines = summary_lines(run, build_rows(run, wall_s=95.4))
    start = lines.index("where the time went (3 case(s), 38 s of a 95 s run): build 24.0 s, parity 10.5 s, wall 3.0 s")
    assert lines[start + 1:start + 3] == ["  tf: 2 case(s) 32 s: build 22 s, parity 10 s",
                                          "  torch: 1 case(s) 6 s: build 2 s, parity 1 s, wall 3 s"]


def test_without_a_wall_time_the_line_names_the_cases_alone_and_without_phases_there_is_none() -> None:
    from pytest_rnnperf.report.text import summary_lines

    lines = summary_lines(_timed_run())
    assert "where the time went (3 case(s), 38 s): build 24.0 s, parity 10.5 s, wall 3.0 s" in lines
    empty = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    assert not any(line.startswith("where the time went") for line in summary_lines(empty))


def test_the_time_line_says_how_much_of_the_run_collection_took() -> None:
    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import summary_lines

    run = _timed_run()
    lines = summary_lines(run, build_rows(run, wall_s=95.4, collection_s=21.2))
    assert ("where the time went (3 case(s), 38 s of a 95 s run, 21 s of it collecting): build 24.0 s, "
            "parity 10.5 s, wall 3.0 s") in lines


def test_the_time_line_says_what_the_run_spent_before_its_first_test_and_after_its_last() -> None:
    """Two lent H200s: 322 s of cases over 2 workers of a 211 s run, 28 s of it outside each worker's tests."""
    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import time_lines

    rows = build_rows(_timed_run(), wall_s=95.4, collection_s=4.6, outside_s=(7.2, 3.4))
    assert rows.time is not None
    assert time_lines(rows.time)[0].startswith("where the time went (3 case(s), 38 s of a 95 s run, 5 s of it "
                                               "collecting, 7 s before the first test, 3 s after the last): ")
    assert (rows.as_dict()["time"]["before_tests_s"], rows.as_dict()["time"]["after_tests_s"]) == (7.2, 3.4)
    # No test ran (or the edges are not known): nothing said of them.
    unknown = build_rows(_timed_run(), wall_s=95.4, outside_s=(None, None)).time
    assert unknown is not None and "before the first test" not in time_lines(unknown)[0]


def test_under_two_workers_the_time_line_says_the_cases_seconds_add_up_over_them() -> None:
    """Two lent H200s read "588 s of a 487 s run": the workers' seconds overlap in the run's."""
    from dataclasses import replace

    from pytest_rnnperf.report.rows import build_rows
    from pytest_rnnperf.report.text import time_lines

    spent = build_rows(_timed_run(), wall_s=95.4).time
    assert spent is not None
    assert time_lines(replace(spent, workers=2))[0].startswith("where the time went (3 case(s), 38 s over 2 workers of a "
                                                                "95 s run): ")


def test_the_json_table_holds_each_backend_s_phase_totals_and_the_wall_time() -> None:
    from pytest_rnnperf.report.rows import build_rows

    time = build_rows(_timed_run(), wall_s=95.4, collection_s=21.2).as_dict()["time"]
    assert time["wall_s"] == 95.4
    assert time["collection_s"] == 21.2
    assert time["cases"] == {"cases": 3, "total_s": 37.5, "phases_s": {"build": 24.0, "parity": 10.5, "wall": 3.0}}
    assert time["backends"] == {
        "tf": {"cases": 2, "total_s": 31.5, "phases_s": {"build": 22.0, "parity": 9.5}},
        "torch": {"cases": 1, "total_s": 6.0, "phases_s": {"build": 2.0, "parity": 1.0, "wall": 3.0}},
    }


def test_the_markdown_summary_lists_each_backend_s_time_as_an_item() -> None:
    from pytest_rnnperf.report.markdown import markdown
    from pytest_rnnperf.report.rows import build_rows

    run = _timed_run()
    text = markdown(run, build_rows(run, wall_s=95.4))
    assert "where the time went (3 case(s), 38 s of a 95 s run)" in text
    assert "\n- tf: 2 case(s) 32 s: build 22 s, parity 10 s\n" in text


def test_environment_changes_name_the_driver_cuda_cudnn_and_framework_before_the_rest() -> None:
    """A framework upgrade that brought its own CUDA and cuDNN: the likely causes lead, flags and the rest follow."""
    from pytest_rnnperf.report.rows import environment_changes

    old = {"torch": "2.11.0", "numpy": "2.3.0", "torch.cudnn_allow_tf32": "True", "torch.version": "2.11.0",
           "torch.cudnn_version": "9.19.0", "torch.cuda_build": "12.8", "gpu.driver_version": "580.95.05"}
    new = {"torch": "2.12.0", "numpy": "2.4.0", "torch.cudnn_allow_tf32": "False", "torch.version": "2.12.0",
           "torch.cudnn_version": "9.20.0", "torch.cuda_build": "13.0", "gpu.driver_version": "590.10"}
    fields = [line.split(":")[0] for line in environment_changes(old, new)]
    assert fields == ["gpu.driver_version", "torch.cuda_build", "torch.cudnn_version", "torch", "torch.version",
                      "torch.cudnn_allow_tf32", "numpy"]  # the rest in the fingerprint's order


def test_a_case_failed_by_a_kernel_alone_leads_the_answer_with_that_kernel() -> None:
    """The step's time held but a kernel appeared: the answer names the kernel and its share of the step, not the
    time that did not move."""
    from pytest_rnnperf.judge.compare import Comparison, Verdict
    from pytest_rnnperf.judge.verdicts import CaseVerdict
    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.report.rows import VerdictRow, answer_rows

    time = Comparison("cudnn device time", 1e-3, 0.98e-3, Interval(0.98, 0.97, 1.08, 0.95), None, 0.167,
                      Verdict.UNCHANGED)
    spin = Comparison("kernel/spin_kernel", 0.0, 0.014e-3, Interval(1.054, 1.054, 1.054, 0.95), None, 0.03,
                      Verdict.REGRESSED)
    verdict = CaseVerdict("torch-lstm-train-fp32-T60-B4700-I32-H256-L1", {"cudnn_time": time}, kernels=(spin,))
    (row,) = answer_rows((), (VerdictRow(verdict, (), ("appeared: spin_kernel",)),))
    assert row.cells == (verdict.case_id, "kernel spin_kernel", "+5.4% [+5.4%, +5.4%]", "3.0%", "regressed")


def test_the_answer_table_names_a_kernel_by_its_bare_function_name_so_a_long_name_does_not_wrap_it() -> None:
    """Namespaces, template and argument lists go, a name cut at 100 characters loses its open list, a name still
    long is cut with an ellipsis; other metrics stay as they are."""
    from pytest_rnnperf.report.rows import metric_cell

    assert metric_cell("kernel/at::cuda::<unnamed>::spin_kernel") == "kernel spin_kernel"
    assert metric_cell("kernel/RNN_blockPersist_fp_LSTM<float, float, float, 128>") == "kernel RNN_blockPersist_fp_LSTM"
    assert metric_cell("kernel/void at::native::vectorized_elementwise_kernel<(int)4, at::native::sigmoid_"
                       "backward_kernel_cuda(at::Te...") == "kernel vectorized_elementwise_kernel"
    long = metric_cell("kernel/sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x64x8_stage3_warpsize1x2x1_ffma...")
    assert long.startswith("kernel sm80_xmma_gemm_") and long.endswith("…") and len(long) == len("kernel ") + 40
    assert metric_cell("cudnn device time") == "cudnn device time"


def test_a_quiet_case_shows_no_kernel_line_and_an_improved_one_only_its_faster_kernels() -> None:
    """A GEMM that grew without reaching the step (ambiguous) is the history's bimodal noise: a night where nothing
    regressed prints no line about it; a case that regressed shows every kernel that moved."""
    from pytest_rnnperf.judge.compare import Comparison, Verdict
    from pytest_rnnperf.judge.verdicts import CaseVerdict
    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.report.rows import shown_kernels

    def comparison(metric: str, ratio: float, verdict: Verdict) -> Comparison:
        """One comparison of ``ratio`` (its interval a point) with ``verdict``."""
        return Comparison(metric, 1e-3, ratio * 1e-3, Interval(ratio, ratio, ratio, 0.95), None, 0.03, verdict)

    grew = comparison("kernel/cutlass_80_simt_sgemm_64x64_8x5_nn_align1", 1.16, Verdict.AMBIGUOUS)
    faster = comparison("kernel/RNN_blockPersist_fp_LSTM", 0.8, Verdict.IMPROVED)

    def shown(time: Verdict) -> tuple[str, ...]:
        """The kernel lines of a case whose step's verdict is ``time``."""
        step = comparison("cudnn device time", {Verdict.IMPROVED: 0.9, Verdict.REGRESSED: 1.1}.get(time, 1.0), time)
        return shown_kernels(CaseVerdict("torch-lstm-train-fp32-T100-B64-I64-H512-L2", {"cudnn_time": step},
                                         kernels=(grew, faster)), None)  # type: ignore[arg-type]  # run: not read

    assert shown(Verdict.UNCHANGED) == shown(Verdict.AMBIGUOUS) == ()
    assert shown(Verdict.IMPROVED) == (faster.explain(),)
    assert shown(Verdict.REGRESSED) == (grew.explain(), faster.explain())


def test_a_card_no_stored_run_ran_on_is_named_as_new_in_the_environment_changes() -> None:
    """The sharded null on two H100s failed one case on a card the history had never seen; the line says so, and
    says nothing more for a card a stored run did run on."""
    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    env = run.environment()
    older = [StoredRun(path=Path(f"{k}.json"), gpu_slug="NVIDIA_H200",
                       environment=dict(env, **{"gpu.uuid": f"GPU-{k}"}), records={}) for k in "ab"]
    run.stored = Stored(tuple(older))
    assert env_diff_lines(run) == [f"gpu.uuid: GPU-a -> {env['gpu.uuid']} (a card none of the 2 stored runs ran on)"]
    run.stored = Stored((older[0], StoredRun(path=Path("c.json"), gpu_slug="NVIDIA_H200", environment=env, records={})))
    assert env_diff_lines(run) == [f"gpu.uuid: GPU-a -> {env['gpu.uuid']}"]


def test_a_case_is_compared_with_the_card_its_own_worker_ran_it_on_not_the_first_card_of_a_sharded_file() -> None:
    """A whole night recorded under -n 2 on two H200s named the first worker's card for every case: a null on the
    second card said every case there had moved to a card none of the stored runs ran on. The file names each case's
    card now; an older sharded file names its workers' cards only, and a case on one of them moved nowhere it says."""
    from dataclasses import replace

    from pytest_rnnperf.store.runs import cards_of_meta

    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    env = run.environment()
    here, first, gone = env["gpu.uuid"], "GPU-0521f675-dff0-9a67-5303-6b5c367949d6", "GPU-77777777-0000"
    meta = {"workers": [f"gw0 NVIDIA H200 ({first[:12]})", f"gw1 NVIDIA H200 ({here[:12]})"]}
    stored_env = dict(env, **{"gpu.uuid": first})
    older = StoredRun(path=Path("0012_baseline.json"), gpu_slug="NVIDIA_H200", environment=stored_env,
                      records={"case": object()},  # type: ignore[dict-item]  # only its key is read
                      all_cards=cards_of_meta(stored_env, meta, {}))
    run.stored = Stored((older,))
    assert older.card_of("case") is None and older.ran_on(here) and not older.ran_on(gone)
    assert env_diff_lines(run, "case") == []  # the case may have run here: no change is claimed
    assert env_diff_lines(run) == [f"gpu.uuid: {first} -> {here}"]  # the run's own line: the first card's
    run.stored = Stored((replace(older, all_cards=(first, gone)),))  # on a card the file never ran on
    assert env_diff_lines(run, "case") == [f"gpu.uuid: {first[:12]} or {gone[:12]} -> {here} (a card none of the 1 "
                                           f"stored runs ran on)"]
    on_first = replace(older, cards={"case": first})
    run.stored = Stored((on_first,))
    assert env_diff_lines(run, "case") == [f"gpu.uuid: {first} -> {here}"]  # moved, to a card the file knows
    run.stored = Stored((replace(older, cards={"case": here}),))
    assert env_diff_lines(run, "case") == []
    run.stored = Stored((replace(on_first, environment=dict(env, **{"gpu.uuid": gone}), all_cards=(gone,)),))
    assert env_diff_lines(run, "case") == [f"gpu.uuid: {first} -> {here} (a card none of the 1 stored runs ran on)"]


def test_the_time_after_the_last_test_names_the_last_worker_to_hand_over_and_its_subprocesses_exit() -> None:
    """Two lent H200s spent 8 s after the last test against 1 s in one process: the line says what held them."""
    from pytest_rnnperf.report.rows import Ending, build_rows
    from pytest_rnnperf.report.text import time_lines

    sharded = build_rows(_timed_run(), wall_s=211.0, outside_s=(9.0, 8.2), ending=Ending(6.54, "gw1", 7.4)).time
    assert sharded is not None
    assert time_lines(sharded)[0].startswith("where the time went (3 case(s), 38 s of a 211 s run, 9 s before the "
                                             "first test, 8 s after the last (7 s of it until gw1 handed over its "
                                             "results, 6.5 s of those its subprocesses' exit)): ")
    assert sharded.as_dict()["ending"] == {"close_s": 6.54, "worker": "gw1", "handover_s": 7.4}
    # One process: its own subprocesses' exit, said only where it is long enough to matter.
    one = build_rows(_timed_run(), wall_s=95.4, outside_s=(7.2, 3.4), ending=Ending(2.04)).time
    quick = build_rows(_timed_run(), wall_s=95.4, outside_s=(7.2, 3.4), ending=Ending(0.2)).time
    assert one is not None and quick is not None
    assert "3 s after the last (2.0 s of it the subprocesses' exit)): " in time_lines(one)[0]
    assert "3 s after the last): " in time_lines(quick)[0] and quick.as_dict()["ending"]["close_s"] == 0.2


def test_fields_an_older_stored_format_did_not_record_are_named_last_together_not_as_changes_of_the_stack() -> None:
    """Two lent H200s failed torch cases against a run of format 2: of the seven "changes" each failure named, four
    were torch fields that recorder did not write yet (torch.cudnn_library: absent -> ...). The card and a
    framework installed since stay changes; the rest is one line, last. A stored run of this format lists them as
    before."""
    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    env = dict(run.environment(), **{"torch.version": "2.11.0", "torch.cudnn_library": "9.19.0 at /x",
                                     "torch.cublas_library": "13.1.0 at /y", "torch.precision_api": "fp32_precision",
                                     "torch.cudart_library": "13.0 at /z", "jax": "0.11.2"})
    run.measured.runtime["torch"] = {k: v for k, v in env.items() if k.startswith("torch.")}
    run.run.software["jax"] = "0.11.2"  # type: ignore[index]
    now = run.environment()
    old = {k: v for k, v in now.items() if k not in ("torch.cudnn_library", "torch.cublas_library",
                                                      "torch.precision_api", "torch.cudart_library", "jax")}
    old["gpu.uuid"] = "GPU-old"

    def lines(fmt: int) -> list[str]:
        """The environment changes against a stored run of format ``fmt``."""
        run.stored = Stored((StoredRun(path=Path("0003_baseline.json"), gpu_slug="NVIDIA_H200", environment=old,
                                       records={}, format=fmt),))
        return env_diff_lines(run)

    older = lines(2)
    assert [line.split(":")[0] for line in older[:-1]] == ["jax", "gpu.uuid"]
    assert older[-1] == ("not recorded by 0003_baseline.json, an older format: torch.cublas_library, "
                         "torch.cudart_library, torch.cudnn_library and 1 more")
    assert len(lines(FORMAT_VERSION)) == 6 and not any(line.startswith("not recorded") for line in lines(FORMAT_VERSION))


def test_a_case_let_pass_at_a_stored_speed_gets_a_line_under_the_verdicts_and_a_quiet_one_none() -> None:
    """Its busy time beyond the threshold at a speed its history ran: the line says by how much, where, and that it
    did not fail; a case whose time simply held prints nothing."""
    from types import SimpleNamespace

    from pytest_rnnperf.judge.compare import Comparison, Verdict
    from pytest_rnnperf.judge.verdicts import CaseVerdict
    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.report.rows import VERDICT_HEADER, VerdictRow
    from pytest_rnnperf.report.text import verdict_lines

    def row(case_id: str, why: str) -> VerdictRow:
        """A case whose device time moved +8.4% (threshold 4.38%), unchanged for ``why``."""
        time = Comparison("cudnn device time", 17.2e-3, 18.65e-3, Interval(1.084, 1.083, 1.085, 0.95), None, 0.0438,
                          Verdict.UNCHANGED, processes=47, noise=0.011, why=why)
        return VerdictRow(CaseVerdict(case_id, {"cudnn_time": time}), ("",) * len(VERDICT_HEADER), ())

    why = "at a speed 16 of the 47 stored processes ran, +8.8% on their median"
    rows = SimpleNamespace(verdicts=(row("torch-lstm-train-fp32-T60-B4700-I32-H256-L1", why), row("quiet", "")),
                           unjudged="", answer=())
    lines = verdict_lines(rows)  # type: ignore[arg-type]  # the rows' fields it reads
    assert [line for line in lines if "stored processes ran" in line] == [
        f"torch-lstm-train-fp32-T60-B4700-I32-H256-L1: cudnn device time +8.4%, {why} (not failed)"]
    assert not any(line.startswith("quiet:") for line in lines)
