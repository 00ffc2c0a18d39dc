#!/usr/bin/env bash
# The whole GPU check, run on a GPU runner from the repository root (the same every session):
#   scripts/gpu-check.sh tests            tests/ incl. GPU tests (timing correctness, NVML)
#   scripts/gpu-check.sh suite [ARGS...]  pytest ARGS (default: suites/), logs under $OUT (default ./rnnperf-out)
#   scripts/gpu-check.sh packaged [ARGS...]  the wheel built from this tree, installed into a fresh virtualenv, its
#                                         suite run from a scratch folder with a copy of baselines/ (ARGS for pytest)
#   scripts/gpu-check.sh shard [ARGS...]  pytest ARGS (default: the night at its minimum rounds, the same work either
#                                         way) sharded over every GPU with -n, then
#                                         in one process on the host's first GPU; each run's time, and their ratio
#   scripts/gpu-check.sh first [ARGS...]  a first night: the compile cache emptied, then `suite` ARGS (default: the
#                                         workflow's night); then each matrix case it judged neither unchanged nor
#                                         improved, rerun alone on the same card (the cache warm by then): the card,
#                                         or the night around it?
#   scripts/gpu-check.sh cenv [ARGS...]   a night whose driver changed, emulated on a scratch copy of baselines/ where
#                                         every stored run names another driver; pytest ARGS (default: the workflow's
#                                         night); baselines/ itself is never touched
#   scripts/gpu-check.sh fill [ARGS...]   fill the compile cache: pytest ARGS (default: the cases that compile, the
#                                         claims left out; one worker per GPU), before a shard or cenv call
#   scripts/gpu-check.sh probe [ARGS...]  scripts/noise_probe.py ARGS (default: the cases that drifted most
#                                         between H200 null runs, and two that did not, as controls)
# It never changes clocks, power limits or any other card setting; it reads nvidia-smi (the cards and their topology).
# GPU_CHECK_DEADLINE_S=N (the call's limit in seconds): each pytest run is interrupted (SIGINT) 15 s before that
# many seconds since the script started, so that a night cut short still writes its summary, reports and log.
# TensorFlow staging (../shared/gpu/README.md): one call carries at most 64 MiB, the tree included (62 MB with
# baselines/ and their evidence on 2026-11-25, 30 MB without the evidence). For the GPU calls, take the evidence out
# of git's index (git rm -r -q --cached baselines/*/evidence; echo '/baselines/*/evidence/' >> .git/info/exclude;
# undo both with git reset -q -- baselines and deleting that line) and split the staged build into 34 MiB parts
# (10 calls of a few seconds each); the work calls then carry .gpu/whl, .gpu/bin and .whl (23 MB):
#   (cd .gpu/tf && rm -rf ./* && split -b 34m -d -a 2 ~/.cache/rnnperf-gpu/tf-*.tar.xz part. && for f in part.*; do mkdir "${f#part.}" && mv "$f" "${f#part.}/"; done)
# The stored runs outgrow a call too (59 MB of H100 runs on 2026-11-27): take all of baselines/ out of git's index
# (git rm -r -q --cached baselines; echo /baselines/ >> .git/info/exclude), carry them packed
# (tar -cf - baselines/*/Linux-* | xz > .gpu/hist/runs.tar.xz: 5 MB) and start each call with tar -xJf .gpu/hist/runs.tar.xz.
# A file recorded or kept by a call is gone in the next call's tree: copy it to /tmp and back, and to $OUT.
# Recording over a stale history needs --rnnperf-no-fail-regression (a failed run is never recorded).
# The device tool brings back only a few files from $OUT: a call that runs several nights should end with
#   tar -C $OUT -cf /tmp/all.tar . && rm -rf $OUT/* && mv /tmp/all.tar $OUT/
# A run kept on the machine (--rnnperf-keep-run) is not in the next call's tree: `suite` keeps a copy in /tmp for the
# calls after it on the same machine and puts one in $OUT.
# Induced slowdowns for the evidence runs: RNNPERF_INJECT_CUDNN_DELAY_US=$(python3 scripts/injection_spec.py
# <stored run or GPU folder> 0.05) spins 5% of each case's cuDNN device time; RNNPERF_INJECT_HOST_DELAY_US='torch-*=500' waits on the host.
# Tensor-op math dropped: RNNPERF_INJECT_NO_TENSOR_OP='torch-lstm-*fp16*' runs the torch cuDNN side of the matching
# fp16/bf16/tf32 cases in IEEE fp32 (labelled as before), so the precision gate must fail them by their kernel names.
# RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL='torch-*-bi' runs the matching bidirectional torch cases' cuDNN side one
# direction after the other (same weights, same outputs): busy time up, kernels' work the same; it must fail.
# RNNPERF_INJECT_LONGER_STEP='*torch-*=3' runs each timed step of the matching torch and Keras-on-torch cases' cuDNN
# side over 3% more timesteps: the same cuDNN kernels busier, no kernel of its own (what it did to the step: the H100
# evidence README, 2026-11-27, nineteenth).
# RNNPERF_INJECT_COLD_DELAY_MS='torch-lstm-*=1500' sleeps 1.5 s inside the cuDNN side's first call after build of the
# matching cases (never in a timed step): their first call regresses and fails them, their steady verdict holds.
# Timings on an H100 (evidence README, 2026-11-25): the whole nightly in one call, with the compile cache warm and the
# claims and parity checks stored by a kept run of the night before,
#   suite suites/ --rnnperf-keep-run --rnnperf-budget=3                    (4:32-4:58 in pytest, 4:52-5:28 in all)
# With an empty compile cache, fill it first: scripts/gpu-check.sh fill (about 5 min on one H100, 2.5 on two).
# RNNPERF_WRAP prefixes the suite's command, e.g. RNNPERF_WRAP="py-spy record --subprocesses -f raw -o $OUT/s.txt --"
# for a sampling profile of where a run's time goes.
# Device time needs cupti-python: carry .whl (see ../shared/gpu/README.md, "Device time through CUPTI"); without
# it the suites run and say device time is off. The image lacks ruptures too: its wheel in .whl turns the drift check on.
set -uo pipefail
OUT=${OUT:-./rnnperf-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
what=${1:-tests}; shift || true
if [ -n "${GPU_CHECK_DEADLINE_S:-}" ] && ! [[ $GPU_CHECK_DEADLINE_S =~ ^[0-9]+$ ]]; then
  echo "gpu-check: GPU_CHECK_DEADLINE_S must be whole seconds (the call's limit), not '$GPU_CHECK_DEADLINE_S'"; exit 2
fi
if [ "$what" != packaged ]; then  # packaged installs the built wheel instead, as a team outside this repository does
  python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || python3 -m pip install -q --no-deps --no-build-isolation -e .
fi
if ls .whl/cupti_python-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/cupti .whl/*.whl && export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/cupti
fi
# Keras 3 for the torch and JAX backends needs no TensorFlow: its wheel and small dependencies from .gpu/whl, each
# only where the image lacks it (the image's own ml_dtypes must keep serving its JAX).
if ! python3 -c "import keras" 2>/dev/null && ls .gpu/whl/keras-*.whl >/dev/null 2>&1; then
  wheels=(.gpu/whl/keras-*.whl)
  for pair in namex:namex optree:optree h5py:h5py ml_dtypes:ml_dtypes absl:absl_py; do
    python3 -c "import ${pair%%:*}" 2>/dev/null || wheels+=(.gpu/whl/${pair#*:}-*.whl)
  done
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/keras "${wheels[@]}" \
    && export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/keras
fi
nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,persistence_mode --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
# Which CPUs and NUMA node each GPU is local to, beside the CPUs each xdist worker is pinned to (contiguous runs): on
# two H200s, cases moved from gw1 to gw0 took +20% host time per step (baselines/NVIDIA_H200/evidence, thirtieth).
nvidia-smi topo -m 2>&1 | tee -a "$OUT/nvidia-smi.txt"
{ python3 - <<'PY'
import time
t0 = time.perf_counter()
import pytest_rnnperf.plugin  # noqa: F401  (plugin import)
from pytest_rnnperf.measure.gpu import read_gpu_info, nvml_index
from pytest_rnnperf.measure.environment import software_info
from pytest_rnnperf.report.text import header_lines
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
t1 = time.perf_counter()
run = RnnperfSession(Run(gpu=read_gpu_info(nvml_index()), software=software_info()))
lines = header_lines(run, "nightly")
t2 = time.perf_counter()
print(f"[header-cost] plugin import {t1 - t0:.3f} s, NVML fingerprint + header {t2 - t1:.3f} s, total {t2 - t0:.3f} s")
PY
} 2>&1 | tee -a "$OUT/header-cost.txt"
# Run "$@", interrupted as Ctrl-C would (pytest then writes its summary) where GPU_CHECK_DEADLINE_S would pass.
deadline() {
  [ -n "${GPU_CHECK_DEADLINE_S:-}" ] || { "$@"; return; }
  local left=$(( GPU_CHECK_DEADLINE_S - SECONDS - 15 ))
  [ "$left" -gt 0 ] || { echo "gpu-check: GPU_CHECK_DEADLINE_S=$GPU_CHECK_DEADLINE_S leaves no time for this run"; return 124; }
  timeout -s INT -k 20 "$left" "$@"
}
# Runs kept by earlier calls on this machine (in $KEPT) are not in this call's tree: put them back into baselines/.
KEPT=${RNNPERF_KEPT:-/tmp/rnnperf-kept}
restore_kept() {
  [ -d "$KEPT/baselines" ] || return 0
  (cd "$KEPT" && find baselines -name '*_run.json' -exec cp -n --parents {} "$OLDPWD"/ \; 2>/dev/null)
}
case "$what" in
  tests) python3 -m pytest -v -rsP -p no:cacheprovider "${@:-tests/}" 2>&1 | tee -a "$OUT/tests.log" ;;
  suite) # A run kept by an earlier call on this machine is not in this call's tree: put it back first. A run this
         # call keeps goes to $KEPT for the next call and to $OUT, to be committed with its evidence.
         mkdir -p "$KEPT/baselines"; restore_kept
         before=$(find baselines -name '*_run.json' | sort)
         deadline ${RNNPERF_WRAP:-} python3 -m pytest -rs -p no:cacheprovider "${@:-suites/}" 2>&1 | tee -a "$OUT/suite.log"
         status=${PIPESTATUS[0]}
         comm -13 <(echo "$before") <(find baselines -name '*_run.json' | sort) | while read -r kept; do
           cp --parents "$kept" "$KEPT"/ && cp "$kept" "$OUT"/ && echo "gpu-check: kept $kept (a copy in \$OUT)"
         done
         # Every verdict's comparisons, passing cases' too (the log prints them for failures only).
         [ -f rnnperf-report/rnnperf.json ] && gzip -c rnnperf-report/rnnperf.json > "$OUT/rnnperf.json.gz"
         exit "$status" ;;
  first) # The machine goes back after 30 s idle, so a case that failed is rerun alone in the same call, on its card.
         rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/pytest-rnnperf"
         [ $# -gt 0 ] || set -- suites/ --benchmark-compare --rnnperf-keep-run --rnnperf-budget=5
         # The inner script counts its deadline from its own start: it gets what is left, less a minute for the reruns.
         inner=${GPU_CHECK_DEADLINE_S:+$(( GPU_CHECK_DEADLINE_S - SECONDS - 60 ))}
         GPU_CHECK_DEADLINE_S=$inner OUT=$OUT bash "$0" suite "$@" --junitxml="$OUT/first.xml"
         status=$?
         cp rnnperf-report/ahead-*.log "$OUT"/ 2>/dev/null
         # By node id: -k matches substrings, and torch-lstm-... would bring keras_torch-lstm-... along.
         tests=$(python3 -c "import json; r = json.load(open('rnnperf-report/rnnperf.json')); print(' '.join(
           f'suites/test_cudnn.py::test_cudnn_vs_generic[{v[\"case\"]}]' for v in r['verdicts']
           if v['outcome'] not in ('unchanged', 'improved') and '::' not in v['case']))" 2>/dev/null)
         if [ -n "$tests" ]; then
           echo "gpu-check: first: rerun alone on this card: $tests"
           # shellcheck disable=SC2086 # one node id per word
           python3 -m pytest -rs -p no:cacheprovider $tests --benchmark-compare --rnnperf-report-dir=/tmp/rnnperf-alone \
             2>&1 | tee "$OUT/alone.log" | grep -E '^(verdicts|=+ .*(passed|failed))'
         fi
         exit "$status" ;;
  packaged) # The suite as a team runs it from its own repository: the wheel built from this tree, installed into a
         # fresh virtualenv that sees the image's frameworks, run from a scratch folder holding a copy of baselines/
         # (without the evidence). The folder stays for later calls on this machine; its page, summary and kept runs go to $OUT.
         TEAM=${RNNPERF_TEAM:-/tmp/rnnperf-team}
         # device-setup.sh puts this tree first on PYTHONPATH; the installed wheel must be what runs.
         PYTHONPATH=$(printf '%s' "${PYTHONPATH:-}" | tr ':' '\n' | grep -vxF "$PWD" | paste -sd: -); export PYTHONPATH
         if [ ! -x "$TEAM/venv/bin/python" ]; then
           # The image's packages reach the virtualenv through a .pth line (its own .pth files stay unread).
           rm -rf build && python3 -m pip wheel -q --no-deps --no-build-isolation -w "$TEAM/dist" . \
             && python3 -m venv --without-pip "$TEAM/venv" \
             && python3 -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
                > "$("$TEAM/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-image.pth" \
             && python3 -m pip --python "$TEAM/venv/bin/python" install -q --no-deps --no-index \
                "$TEAM"/dist/pytest_rnnperf-*.whl \
             && mkdir -p "$TEAM/repo" && cp -r baselines "$TEAM/repo/" && rm -rf "$TEAM"/repo/baselines/*/evidence \
             || { echo "gpu-check: could not install the wheel into $TEAM"; exit 2; }
         fi
         before=$(cd "$TEAM/repo" && find baselines -name '*_run.json' | sort)
         (cd "$TEAM/repo" && ${RNNPERF_WRAP:-} "$TEAM/venv/bin/python" -m pytest --pyargs pytest_rnnperf.suites \
            --rootdir "$TEAM/repo" -rs -p no:cacheprovider "$@") 2>&1 | tee -a "$OUT/packaged.log"
         status=${PIPESTATUS[0]}
         (cd "$TEAM/repo" && comm -13 <(echo "$before") <(find baselines -name '*_run.json' | sort) \
            | while read -r kept; do cp "$kept" "$OUT"/ && echo "gpu-check: kept $kept (a copy in \$OUT)"; done)
         # The page and the summary only: a call brings back at most 8 files.
         for f in index.html summary.md; do cp "$TEAM/repo/rnnperf-report/$f" "$OUT/" 2>/dev/null; done
         exit "$status" ;;
  shard) # The same pytest run with one worker per GPU and in one process, one after the other on this host (fill
         # the compile cache first: the first run would pay for both). Logs and reports under $OUT/shard-*.
         # SHARD_RUNS=n2 or =one runs one of them, so that two nights longer than a call's 10 minutes fit two
         # calls on the same machine; the times are kept in /tmp/rnnperf-shard and the ratio printed once both ran.
         gpus=$(nvidia-smi -L | grep -c '^GPU ')
         [ "$gpus" -gt 1 ] || { echo "gpu-check: shard needs a host with two GPUs or more; this one has $gpus"; exit 2; }
         # A budget would give each worker its own minutes and so cut fewer rounds under -n than in one process:
         # by default no budget and every case at its minimum rounds (4 timed, 3 traced): the same work either way.
         # Where the GPU model's history stores no claims or full checks, one process measures them all, past a
         # call's 10 minutes: leave the claims and the energy window out of both runs (add --ignore=suites/claims
         # --rnnperf-energy-s=0 to these arguments).
         [ $# -gt 0 ] || set -- suites/ --benchmark-compare --rnnperf-rounds=4 --rnnperf-device-rounds=3
         # One process sees one GPU, as a one-GPU runner and the stored runs did: seeing both, TF and JAX set up both.
         first=${CUDA_VISIBLE_DEVICES:-0}; first=${first%%,*}
         keep=/tmp/rnnperf-shard; mkdir -p "$keep"
         for how in ${SHARD_RUNS:-"n$gpus" one}; do
           extra=(); pin=(); [ "$how" = one ] && pin=(env "CUDA_VISIBLE_DEVICES=$first") || extra=(-n "$gpus")
           start=$(date +%s%N)
           # Each test's seconds (junit XML): what the workers spend outside the cases' phases, test by test.
           deadline "${pin[@]}" python3 -m pytest -rs -p no:cacheprovider --junitxml="$OUT/shard-$how.xml" "$@" \
             "${extra[@]}" > "$OUT/shard-$how.log" 2>&1
           rc=$?
           echo $(( ($(date +%s%N) - start) / 1000000 )) > "$OUT/shard-$how.ms"
           echo "gpu-check: shard $how: exit $rc, $(grep -E '(passed|failed).* in [0-9.]+s' "$OUT/shard-$how.log" | tail -1)"
           grep -E '^(rnnperf: (all|regress)|verdicts|workers:|budget|checks:)' "$OUT/shard-$how.log" | cut -c1-250
           grep -A1 '^where the time went' "$OUT/shard-$how.log" | cut -c1-250  # its time before and after the tests
           [ -f rnnperf-report/rnnperf.json ] && gzip -c rnnperf-report/rnnperf.json > "$OUT/shard-$how.rnnperf.json.gz"
           grep -oE '^rnnperf: test_[^ ]+ failed' "$OUT/shard-$how.log" | sort -u > "$OUT/shard-$how.failed"
           # What the night did beyond its cases' minimum: the budget's cuts and the full checks, claims and parity
           # tests it ran or deferred (the run's length left out), for the same-work check below.
           grep -E '^(budget|checks:|claims:|parity:)' "$OUT/shard-$how.log" | sed -E 's/; run [0-9]+:[0-9]+.*//' \
             > "$OUT/shard-$how.work"
           # Programs compiled from scratch are work too: a cache filled by one run may not serve the other.
           [ -f rnnperf-report/rnnperf.json ] && python3 -c 'import json, sys
misses = sum((r.get("cold") or {}).get("compile_cache") == "miss" for r in json.load(open(sys.argv[1]))["results"])
print(f"compile cache: {misses} case(s) compiled from scratch")' rnnperf-report/rnnperf.json >> "$OUT/shard-$how.work"
           # Each test file's seconds and the slowest tests, from the junit XML: where a worker's time went.
           [ -f "$OUT/shard-$how.xml" ] && python3 - "$OUT/shard-$how.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
cases = [(c.get("classname", ""), c.get("name", ""), float(c.get("time", 0))) for c in ET.parse(sys.argv[1]).iter("testcase")]
files: dict[str, float] = {}
for module, _, seconds in cases:
    files[module] = files.get(module, 0.0) + seconds
print("gpu-check: tests' seconds by file: " + ", ".join(f"{m} {s:.0f} s" for m, s in sorted(files.items(), key=lambda f: -f[1])))
print("gpu-check: slowest tests: " + ", ".join(f"{n[:60]} {s:.1f} s" for _, n, s in sorted(cases, key=lambda c: -c[2])[:6]))
PY
           gzip -f "$OUT/shard-$how.log" "$OUT/shard-$how.xml"
           cp "$OUT/shard-$how.ms" "$OUT/shard-$how.failed" "$OUT/shard-$how.work" "$keep/"
         done
         [ -f "$keep/shard-n$gpus.ms" ] && [ -f "$keep/shard-one.ms" ] || exit 0
         python3 - "$keep" "n$gpus" <<'PY'
import sys
from pathlib import Path
out, sharded = Path(sys.argv[1]), sys.argv[2]
ms = {how: int((out / f"shard-{how}.ms").read_text()) for how in (sharded, "one")}
failed = {how: set((out / f"shard-{how}.failed").read_text().split("\n")) - {""} for how in (sharded, "one")}
print(f"gpu-check: shard: one process {ms['one'] / 1000:.1f} s, {sharded} {ms[sharded] / 1000:.1f} s: "
      f"{ms['one'] / ms[sharded]:.2f}x; failed in one only {len(failed['one'] - failed[sharded])}, "
      f"sharded only {len(failed[sharded] - failed['one'])}, both {len(failed['one'] & failed[sharded])}")
# The ratio is the same work's only where both runs cut, checked and measured the same: say where they did not.
work = {how: (out / f"shard-{how}.work").read_text() if (out / f"shard-{how}.work").exists() else "" for how in ms}
other = {sharded: "one", "one": sharded}
differ = [f"{how}: {line}" for how in ms
          for line in sorted(set(work[how].splitlines()) - set(work[other[how]].splitlines()))]
print("gpu-check: shard: the same work (budget cuts, full checks, claims, parity and compile-cache misses as counted)"
      if not differ else "gpu-check: shard: NOT the same work, the ratio compares different nights:\n  " + "\n  ".join(differ))
PY
         ;;
  cenv)  # The full checks, parity tests and claims a new driver makes due, against the budget. The copy keeps the
         # night's kept run too (in $SCRATCH), so a second call on the same machine is a quiet night after the change.
         SCRATCH=${RNNPERF_SCRATCH:-/tmp/rnnperf-cenv}
         if [ ! -d "$SCRATCH" ]; then
           restore_kept  # the runs kept by earlier calls on this machine belong to the history the change is made to
           cp -r baselines "$SCRATCH" && rm -rf "$SCRATCH"/*/evidence || { echo "gpu-check: cannot copy baselines/ to $SCRATCH"; exit 2; }
           python3 - "$SCRATCH" <<'PY'
import json, sys
from pathlib import Path
edited = 0
for path in sorted(Path(sys.argv[1]).glob("*/*/*.json")):
    data = json.loads(path.read_text())
    env = data.get("machine_info", {}).get("rnnperf", {}).get("environment", {})
    if "gpu.driver_version" in env:
        env["gpu.driver_version"] = "000.00.00 (emulated change)"
        path.write_text(json.dumps(data, indent=2))
        edited += 1
print(f"gpu-check: cenv: {edited} stored run(s) in {sys.argv[1]} now name another driver")
PY
         fi
         [ $# -gt 0 ] || set -- suites/ --benchmark-compare --rnnperf-keep-run --rnnperf-budget=5
         # Each test's seconds (junit XML): what the claims and parity tests cost where the budget could not defer them.
         deadline python3 -m pytest -rs -p no:cacheprovider --rnnperf-baselines="$SCRATCH" --junitxml="$OUT/cenv.xml" \
           "$@" 2>&1 | tee "$OUT/cenv.log"  # this night alone
         status=${PIPESTATUS[0]}
         grep -E '^(rnnperf: (all|regress)|verdicts|budget|checks:|claims:|parity:)' "$OUT/cenv.log" | cut -c1-250
         grep -A1 '^where the time went' "$OUT/cenv.log" | cut -c1-250
         gzip -f "$OUT/cenv.xml" 2>/dev/null
         # Every case's phases, for replaying what the budget believed against what the cases took.
         [ -f rnnperf-report/rnnperf.json ] && gzip -c rnnperf-report/rnnperf.json > "$OUT/cenv.rnnperf.json.gz"
         exit "$status" ;;
  fill)  # Programs compiled once serve every later night (the workflow restores the folder): without this, the
         # first of two runs compared pays for both. One worker per GPU: the cache is on disk, shared by all.
         gpus=$(nvidia-smi -L | grep -c '^GPU ')
         [ $# -gt 0 ] || set -- suites/ --ignore=suites/claims -k "jax or compile"
         workers=(); [ "$gpus" -gt 1 ] && workers=(-n "$gpus")
         start=$SECONDS
         deadline python3 -m pytest -p no:cacheprovider "$@" "${workers[@]}" > "$OUT/fill.log" 2>&1  # its header names the cache
         status=$?
         echo "gpu-check: fill: exit $status in $(( SECONDS - start )) s: $(grep -E '(passed|failed|error).* in [0-9.]+s' "$OUT/fill.log" | tail -1)"
         grep -E '^rnnperf: compile cache' "$OUT/fill.log" | cut -c1-250
         exit "$status" ;;
  probe) set -- "${@:-torch-gru-train-fp32-T100-B64-I64-H512-L2 torch-gru-infer-fp32-T60-B500-I32-H256-L1
                    torch-lstm-train-fp32-T100-B64-I64-H512-L2 torch-lstm-train-fp16-T50-B512-I512-H1024-L1
                    torch-lstm-train-fp32-T50-B512-I512-H1024-L1 torch-gru-train-fp32-T60-B4700-I32-H256-L1}"
         # shellcheck disable=SC2068  # the default list is split into case globs on purpose
         set -f; python3 scripts/noise_probe.py --json "$OUT/probe.json" $@ 2>&1 | tee -a "$OUT/probe.log" ;;
  *) echo "usage: $0 tests|suite|packaged|shard|cenv|fill|probe [args]"; exit 2 ;;
esac
