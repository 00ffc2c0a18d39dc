"""The claims experiments, written once for every framework lab (``lab_torch``, ``lab_keras``).

Each experiment trains or times matched models (same initial weights, same data order, sides interleaved
epoch by epoch so drift hits both alike) and returns rows of the claims table (``pytest_rnnperf.judge.claims``).
Without a GPU an experiment runs its generic side against float64 on the CPU at a tiny scale (what CI
can check) and its cuDNN rows say why they were not measured.

Tolerances, and why:
- ``ACC_TOL`` 2.5 points of test accuracy (9 of 360 digits): two float32 paths differ by rounding only, and
  training turns that into a few flipped borderline images; a broken path (a gate in the wrong place, a
  dropped bias) loses tens of points on this task.
- ``CURVE_TOL`` 5% relative per-epoch mean loss: rounding makes two runs of one model drift apart slowly;
  a path that computes something else separates from the first epoch on.
- ``MSE_TOL`` 15% relative test error on the regression task: its error is small (about 1e-3), so a few
  rounding-level differences in the last steps move it by several percent; a wrong path misses by multiples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from pytest_rnnperf.judge.claims import NOT_RUN, SEED_BY_ID, ClaimRow, equal_verdict, not_run, ratio_verdict
from pytest_rnnperf.model.stats import speedup_interval

from . import data

ACC_TOL = 0.025
CURVE_TOL = 0.05
MSE_TOL = 0.15


@dataclass(frozen=True)
class Scale:
    """Sizes of every experiment at one scale."""

    digits_hidden: int
    digits_epochs: int
    digits_batch: int
    sine_n: int
    sine_steps: int
    sine_features: int
    sine_hidden: int
    sine_epochs: int
    batches: tuple[int, int]  # the small and the large batch of the batch-size claim
    lm_chars: int
    lm_steps: int
    lm_embed: int
    lm_hidden: int
    lm_batch: int
    lm_epochs: int
    load_repeats: int
    predict_repeats: int
    cpu_rounds: int
    cpu_steps: int
    precision_epochs: int
    util_s: float  # seconds of training per side in its NVML window (>= 1 s for the energy counter's resolution)


SCALES = {
    # CPU CI: tiny, each experiment a few seconds on two cores.
    "smoke": Scale(16, 3, 64, 470, 12, 4, 16, 2, (47, 470), 12_000, 24, 8, 16, 32, 2, 1, 2, 1, 1, 2, 0.0),
    # One H100/H200: the seeds' shapes (T60 B500 I32 H256 is the batch-size question's), all claims in minutes.
    "nightly": Scale(128, 8, 64, 18_800, 60, 32, 256, 5, (500, 4700), 400_000, 100, 64, 256, 64, 4, 3, 7, 5, 2, 4,
                     1.5),
    "full": Scale(128, 15, 64, 47_000, 60, 32, 256, 8, (500, 4700), 1_000_000, 100, 64, 512, 64, 8, 5, 15, 7, 3, 8,
                  3.0),
}


@dataclass
class Run:
    """One side's training: per-epoch mean loss and seconds, and what it reached."""

    name: str
    model: Any
    losses: list[float]
    seconds: list[float]
    metric: float = float("nan")


def _interval(cudnn: Sequence[float], generic: Sequence[float]) -> tuple[float, float, float]:
    """median(generic)/median(cudnn) with its paired bootstrap 95% interval (rounds timed back to back)."""
    iv = speedup_interval(list(cudnn), list(generic))
    return iv.estimate, iv.low, iv.high


def _ratio_row(seed: str, framework: str, what: str, cudnn: Sequence[float], generic: Sequence[float],
               detail: dict[str, Any], promise_not_slower: bool = False) -> ClaimRow:
    """A row for "cuDNN is N times faster": the measured ratio, its interval, the verdict; optionally a promise."""
    mid, lo, hi = _interval(cudnn, generic)
    verdict = ratio_verdict(SEED_BY_ID[seed].figure, lo, hi)
    detail = dict(detail, ratio=mid, low=lo, high=hi, cudnn_s=list(cudnn), generic_s=list(generic))
    failure = None
    if promise_not_slower and hi < 1.0:
        failure = f"cuDNN was slower than generic on the GPU: {mid:.2f}x [{lo:.2f}, {hi:.2f}]"
    return ClaimRow(seed, framework, f"{mid:.2f}x [{lo:.2f}, {hi:.2f}] {what}", verdict, detail, failure)


def _lockstep(lab: Any, runs: Sequence[Run], tensors: Sequence[Any], n: int, epochs: int, batch: int,
              seed: int) -> None:
    """Train every run ``epochs`` epochs, one epoch each in turn, all in the same seeded data order."""
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(n)
        for run, t in zip(runs, tensors):
            start = time.perf_counter()
            run.losses.append(lab.fit(run.model, t, order, batch))  # fit reads its loss: the device has finished
            run.seconds.append(time.perf_counter() - start)


def _accuracy(lab: Any, m: Any, x: Any, y: np.ndarray) -> float:
    """Share of test digits classified right."""
    return float((lab.outputs(m, x).argmax(axis=1) == y).mean())


def _curve_gap(a: Sequence[float], b: Sequence[float]) -> float:
    """Largest relative gap between two per-epoch loss curves."""
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def _proofs(lab: Any, runs: Sequence[Run], tensors: Sequence[Any]) -> tuple[str | None, dict[str, str]]:
    """Prove each run's path; (failure or None, evidence per run)."""
    evidence, bad = {}, []
    for run, t in zip(runs, tensors):
        ok, text = lab.prove(run.model, t)
        evidence[run.name] = text
        if not ok:
            bad.append(f"{run.name}: {text}")
    return ("path not proven: " + "; ".join(bad)) if bad else None, evidence


# ------------------------------------------------------------------------------------------------ experiments


def digits_training(lab: Any, sc: Scale) -> tuple[list[ClaimRow], list[str]]:
    """Claims train-speed and train-accuracy: the row-wise digits classifier trained on both paths.

    Returns the rows and the problems of the CPU check (generic float32 against float64) where there is no GPU.
    """
    d = data.digits()
    fw = lab.name
    gpu = lab.gpu_reason()
    dims = dict(task="classify", inputs=8, hidden=sc.digits_hidden, layers=1, outputs=10, seed=0)
    if gpu is None:
        dev = lab.gpu_device()
        c = lab.build(impl="cudnn", device=dev, **dims)
        g = lab.build(impl="generic", device=dev, like=c, **dims)
        runs = [Run("cudnn", c, [], []), Run("generic", g, [], [])]
    else:  # CPU: the generic side against a float64 copy, what a machine without a GPU can check
        c = lab.build(impl="generic", device="cpu", precision="fp64", **dims)
        g = lab.build(impl="generic", device="cpu", like=c, **dims)
        runs = [Run("generic fp64", c, [], []), Run("generic fp32", g, [], [])]
    tensors = [lab.tensors(r.model, d.x_train, d.y_train) for r in runs]
    failure, evidence = _proofs(lab, runs, tensors) if gpu is None else (None, {})
    _lockstep(lab, runs, tensors, len(d.y_train), sc.digits_epochs, sc.digits_batch, seed=1)
    for r in runs:
        r.metric = _accuracy(lab, r.model, lab.tensors(r.model, d.x_test, d.y_test)[0], d.y_test)
    a, b = runs
    detail = {"epochs": sc.digits_epochs, "batch": sc.digits_batch, "hidden": sc.digits_hidden,
              "test_images": len(d.y_test), "loss": {r.name: r.losses for r in runs},
              "epoch_s": {r.name: r.seconds for r in runs}, "accuracy": {r.name: r.metric for r in runs},
              "curve_gap": _curve_gap(a.losses, b.losses), "proof": evidence}
    verdict, holds = equal_verdict(a.metric, b.metric, ACC_TOL)
    if gpu is not None:
        problems = [] if holds else [f"digits: generic fp32 accuracy {b.metric:.3f} vs float64 {a.metric:.3f} "
                                     f"(tolerance {ACC_TOL})"]
        why = f"no GPU: {gpu}; generic fp32 {b.metric:.3f} vs float64 {a.metric:.3f} on the CPU"
        return [not_run("train-speed", fw, why), not_run("train-accuracy", fw, why)], problems
    speed = _ratio_row("train-speed", fw, f"per epoch ({sc.digits_epochs - 1} epochs after the first, digits 8x8 "
                       f"H{sc.digits_hidden} B{sc.digits_batch})", a.seconds[1:], b.seconds[1:], detail,
                       promise_not_slower=True)
    if failure:
        speed = replace(speed, failure=failure)
    acc = ClaimRow("train-accuracy", fw, f"test accuracy {a.metric:.3f} vs {b.metric:.3f}; loss curves within "
                   f"{detail['curve_gap']:.1%}", verdict, detail,
                   None if holds else f"cuDNN reached {a.metric:.3f}, generic {b.metric:.3f} (tolerance {ACC_TOL})")
    return [speed, acc], []


def regression_and_batch(lab: Any, sc: Scale) -> tuple[list[ClaimRow], list[str]]:
    """Claims regression-accuracy and batch-size: the sine regression on both paths, and cuDNN at two batch sizes."""
    d = data.sines(sc.sine_n, sc.sine_steps, sc.sine_features)
    fw = lab.name
    gpu = lab.gpu_reason()
    small, large = sc.batches
    dims = dict(task="regress", inputs=sc.sine_features, hidden=sc.sine_hidden, layers=1, outputs=1, seed=0)
    dev = lab.gpu_device() if gpu is None else "cpu"
    if gpu is None:
        c = lab.build(impl="cudnn", device=dev, **dims)
        runs = [Run("cudnn", c, [], []), Run("generic", lab.build(impl="generic", device=dev, like=c, **dims), [], [])]
    else:
        c = lab.build(impl="generic", device=dev, precision="fp64", **dims)
        runs = [Run("generic fp64", c, [], []),
                Run("generic fp32", lab.build(impl="generic", device=dev, like=c, **dims), [], [])]
    tensors = [lab.tensors(r.model, d.x_train, d.y_train) for r in runs]
    sides = [(runs[0], tensors[0], small), (runs[1], tensors[1], small)]
    if gpu is None:  # the batch-size claim: cuDNN again from the same weights, at the large batch
        big = Run(f"cudnn B{large}", lab.build(impl="cudnn", device=dev, like=c, **dims), [], [])
        sides.append((big, lab.tensors(big.model, d.x_train, d.y_train), large))
    rng = np.random.default_rng(2)
    for _ in range(sc.sine_epochs):
        order = rng.permutation(len(d.y_train))
        for run, t, batch in sides:
            start = time.perf_counter()
            run.losses.append(lab.fit(run.model, t, order, batch))
            run.seconds.append(time.perf_counter() - start)
    done = [run for run, _, _ in sides]
    for r in done:
        x_test = lab.tensors(r.model, d.x_test, d.y_test)[0]
        r.metric = float(np.mean((lab.outputs(r.model, x_test) - d.y_test) ** 2))
    a, b = runs
    detail = {"n": sc.sine_n, "shape": f"T{sc.sine_steps} I{sc.sine_features} H{sc.sine_hidden}",
              "epochs": sc.sine_epochs, "test_mse": {r.name: r.metric for r in done},
              "epoch_s": {r.name: r.seconds for r in done}, "loss": {r.name: r.losses for r in done}}
    rel = abs(a.metric - b.metric) / max(b.metric, 1e-12)
    holds = rel <= MSE_TOL or a.metric < b.metric
    if gpu is not None:
        problems = [] if holds else [f"sines: generic fp32 test MSE {b.metric:.3g} vs float64 {a.metric:.3g}"]
        why = f"no GPU: {gpu}; generic fp32 MSE {b.metric:.3g} vs float64 {a.metric:.3g} on the CPU"
        return [not_run("regression-accuracy", fw, why), not_run("batch-size", fw, why)], problems
    verdict = (f"equal (within {rel:.0%} <= {MSE_TOL:.0%})" if rel <= MSE_TOL
               else ("better" if a.metric < b.metric else f"worse by {rel:.0%} (> {MSE_TOL:.0%})"))
    reg = ClaimRow("regression-accuracy", fw, f"test MSE {a.metric:.3g} vs {b.metric:.3g} (B{small}, "
                   f"{sc.sine_epochs} epochs)", verdict, detail,
                   None if holds else f"cuDNN test MSE {a.metric:.3g} vs generic {b.metric:.3g}: {rel:.0%} apart")
    big = done[2]
    batch = _ratio_row("batch-size", fw, f"per epoch, cuDNN B{small} -> B{large}; test MSE {a.metric:.3g} -> "
                       f"{big.metric:.3g} after {sc.sine_epochs} epochs", big.seconds[1:], a.seconds[1:], detail)
    return [reg, batch], []


def char_lm(lab: Any, sc: Scale, window: Callable[[], Any] | None) -> list[ClaimRow]:
    """Claims charlm-*: a 2-layer character LSTM on Python's own source, on both paths from the same weights."""
    corpus = data.char_corpus(sc.lm_chars, sc.lm_steps)
    d = corpus.split
    fw = lab.name
    gpu = lab.gpu_reason()
    if gpu is not None:
        return [not_run(s, fw, f"no GPU: {gpu}") for s in ("charlm-train", "charlm-curve", "charlm-load",
                                                           "charlm-memory", "charlm-utilization")]
    dev = lab.gpu_device()
    dims = dict(task="lm", inputs=sc.lm_embed, hidden=sc.lm_hidden, layers=2, outputs=len(corpus.vocab))
    first = np.arange(sc.lm_batch)
    loads: dict[str, list[float]] = {"cudnn": [], "generic": []}
    models: dict[str, Any] = {}
    for _ in range(sc.load_repeats):  # "load": build the model and run its first training step
        for impl in ("cudnn", "generic"):
            start = time.perf_counter()
            m = lab.build(impl=impl, device=dev, seed=0, **dims)
            lab.fit(m, lab.tensors(m, d.x_train, d.y_train), first, sc.lm_batch)
            loads[impl].append(time.perf_counter() - start)
            models[impl] = m
    # Both trained sides start from the same weights: the generic one is a copy of the cuDNN one.
    c = lab.build(impl="cudnn", device=dev, seed=0, **dims)
    runs = [Run("cudnn", c, [], []), Run("generic", lab.build(impl="generic", device=dev, like=c, **dims), [], [])]
    tensors = [lab.tensors(r.model, d.x_train, d.y_train) for r in runs]
    failure, evidence = _proofs(lab, runs, tensors)
    peak: dict[str, int | None] = {}
    for run, t in zip(runs, tensors):  # peak memory of one epoch of each side, measured alone
        lab.memory_reset(run.model)
        lab.fit(lab.build(impl=run.model.impl, device=dev, like=run.model, **dims), t, first, sc.lm_batch)
        peak[run.name] = lab.memory_peak(run.model)
    _lockstep(lab, runs, tensors, len(d.y_train), sc.lm_epochs, sc.lm_batch, seed=3)
    for r in runs:
        r.metric = float(lab.loss_on(r.model, lab.tensors(r.model, d.x_test, d.y_test)))
    telemetry: dict[str, dict[str, Any]] = {}
    for run, t in zip(runs, tensors):  # utilization: each side alone in its own NVML window
        if window is None or sc.util_s <= 0:
            break
        rng = np.random.default_rng(4)
        with window() as w:
            start = time.perf_counter()
            while time.perf_counter() - start < sc.util_s:
                lab.fit(run.model, t, rng.permutation(len(d.y_train))[: sc.lm_batch * 8], sc.lm_batch)
        s = w.summary
        telemetry[run.name] = {"utilization_pct": s.utilization.get("mean"),
                               "sm_activity_pct": s.gpm.get("sm_activity_pct"), "seconds": s.duration_s}
    prompt = corpus.encode("def ")
    samples = {r.name: corpus.decode(lab.generate(r.model, prompt, 60)) for r in runs}
    a, b = runs
    gap = _curve_gap(a.losses, b.losses)
    detail = {"shape": f"2-layer LSTM E{sc.lm_embed} H{sc.lm_hidden} T{sc.lm_steps} B{sc.lm_batch}",
              "vocab": len(corpus.vocab), "chars": sc.lm_chars, "loss": {r.name: r.losses for r in runs},
              "epoch_s": {r.name: r.seconds for r in runs}, "test_loss": {r.name: r.metric for r in runs},
              "load_s": loads, "peak_bytes": peak, "telemetry": telemetry, "samples": samples, "proof": evidence}
    rows = [_ratio_row("charlm-train", fw, f"per epoch ({sc.lm_epochs - 1} after the first)", a.seconds[1:],
                       b.seconds[1:], detail, promise_not_slower=True)]
    if failure:
        rows[0] = replace(rows[0], failure=failure)
    curve_ok = gap <= CURVE_TOL
    rows.append(ClaimRow("charlm-curve", fw, f"loss curves within {gap:.1%}; test loss {a.metric:.3f} vs "
                         f"{b.metric:.3f} nats/char; samples {samples['cudnn'][:24]!r} / {samples['generic'][:24]!r}",
                         f"same curve (<= {CURVE_TOL:.0%})" if curve_ok else f"apart ({gap:.1%} > {CURVE_TOL:.0%})",
                         detail, None if curve_ok else f"loss curves {gap:.1%} apart (tolerance {CURVE_TOL:.0%})"))
    rows.append(_ratio_row("charlm-load", fw, f"build + first step, {sc.load_repeats} each: "
                           f"{np.median(loads['cudnn']):.2f} s vs {np.median(loads['generic']):.2f} s",
                           loads["cudnn"], loads["generic"], detail))
    pc, pg = peak.get("cudnn"), peak.get("generic")
    if pc and pg:
        ratio = pg / pc
        rows.append(ClaimRow("charlm-memory", fw, f"peak {pc / 2**20:.0f} MiB vs {pg / 2**20:.0f} MiB: generic/cuDNN "
                             f"{ratio:.2f}x (allocator peak, one epoch)",
                             ratio_verdict(SEED_BY_ID["charlm-memory"].figure, ratio, ratio), detail))
    else:
        rows.append(not_run("charlm-memory", fw, f"{fw} reports no peak device memory here"))
    uc = telemetry.get("cudnn", {}).get("utilization_pct")
    ug = telemetry.get("generic", {}).get("utilization_pct")
    if isinstance(uc, (int, float)) and isinstance(ug, (int, float)) and ug > 0:
        sm = {k: v.get("sm_activity_pct") for k, v in telemetry.items()}
        # One window per side and no interval: NVML's utilization is "a kernel was running", sampled coarsely.
        rows.append(ClaimRow("charlm-utilization", fw, f"GPU utilization {uc:.0f}% vs {ug:.0f}% ({uc / ug:.2f}x; "
                             f"SM activity {sm.get('cudnn')} vs {sm.get('generic')}); one window each",
                             ratio_verdict(SEED_BY_ID["charlm-utilization"].figure, uc / ug, uc / ug) + " (one window)",
                             detail))
    else:
        rows.append(not_run("charlm-utilization", fw, "no NVML utilization in the windows"))
    return rows


def inference(lab: Any, sc: Scale) -> list[ClaimRow]:
    """Claim predict-speed: predict() over the regression test set, cuDNN against generic, rounds interleaved."""
    fw = lab.name
    gpu = lab.gpu_reason()
    if gpu is not None:
        return [not_run("predict-speed", fw, f"no GPU: {gpu}")]
    d = data.sines(sc.sine_n, sc.sine_steps, sc.sine_features)
    dev = lab.gpu_device()
    dims = dict(task="regress", inputs=sc.sine_features, hidden=sc.sine_hidden, layers=1, outputs=1)
    c = lab.build(impl="cudnn", device=dev, seed=0, **dims)
    g = lab.build(impl="generic", device=dev, like=c, **dims)
    xs = [lab.tensors(m, d.x_test, d.y_test)[0] for m in (c, g)]
    batch = sc.batches[0]
    for m, x in zip((c, g), xs):
        lab.predict(m, x, batch)  # warm-up: plans, graphs
    times: dict[str, list[float]] = {"cudnn": [], "generic": []}
    for _ in range(sc.predict_repeats):
        for name, m, x in (("cudnn", c, xs[0]), ("generic", g, xs[1])):
            times[name].append(lab.timed(m, lambda m=m, x=x: lab.predict(m, x, batch)))
    n = len(d.y_test)
    detail = {"sequences": n, "batch": batch, "predict_s": times}
    rate = n / float(np.median(times["cudnn"]))
    return [_ratio_row("predict-speed", fw, f"predict() of {n} sequences T{sc.sine_steps} B{batch}: "
                       f"{rate:,.0f} seq/s on cuDNN", times["cudnn"], times["generic"], detail,
                       promise_not_slower=True)]


def cpu_vs_gpu(lab: Any, sc: Scale) -> list[ClaimRow]:
    """Claims cpu-vs-gpu and cudnn-vs-generic-gpu: one training step of the seed's shape on CPU, GPU generic, GPU cuDNN."""
    fw = lab.name
    gpu = lab.gpu_reason()
    if gpu is not None:
        why = f"no GPU: {gpu}"
        return [not_run("cpu-vs-gpu", fw, why), not_run("cudnn-vs-generic-gpu", fw, why)]
    d = data.sines(sc.batches[0] * sc.cpu_steps, sc.sine_steps, sc.sine_features, test_share=0.0)
    dims = dict(task="regress", inputs=sc.sine_features, hidden=sc.sine_hidden, layers=1, outputs=1)
    dev = lab.gpu_device()
    c = lab.build(impl="cudnn", device=dev, seed=0, **dims)
    sides = {"cudnn": c, "generic": lab.build(impl="generic", device=dev, like=c, **dims),
             "cpu": lab.build(impl="generic", device="cpu", like=c, **dims)}
    tensors = {k: lab.tensors(m, d.x_train, d.y_train) for k, m in sides.items()}
    order = np.arange(len(d.y_train))
    batch = sc.batches[0]
    for k, m in sides.items():
        lab.fit(m, tensors[k], order[:batch], batch)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(sc.cpu_rounds):
        for k, m in sides.items():
            start = time.perf_counter()
            lab.fit(m, tensors[k], order, batch)
            times[k].append((time.perf_counter() - start) / sc.cpu_steps)
    med = {k: float(np.median(v)) for k, v in times.items()}
    steps = sc.sine_steps
    detail = {"shape": f"T{steps} B{batch} I{sc.sine_features} H{sc.sine_hidden}", "step_s": times,
              "cpu_threads": lab.cpu_threads()}
    cpu_row = _ratio_row("cpu-vs-gpu", fw, "CPU over GPU generic,", times["cpu"], times["generic"], detail)
    mid = cpu_row.detail["ratio"]
    if mid > 1:
        why = (f"CPU wins: the generic GPU loop is launch-bound, {med['generic'] / steps * 1e3:.3f} ms per timestep "
               f"against {med['cpu'] / steps * 1e3:.3f} ms on {lab.cpu_threads()} CPU threads")
    else:
        why = (f"GPU generic wins: {med['generic'] / steps * 1e3:.3f} ms per timestep against "
               f"{med['cpu'] / steps * 1e3:.3f} ms on {lab.cpu_threads()} CPU threads")
    cpu_row = replace(cpu_row, measured=f"{cpu_row.measured} train step T{steps} B{batch}: CPU "
                      f"{med['cpu'] * 1e3:.0f} ms, GPU generic {med['generic'] * 1e3:.1f} ms, cuDNN "
                      f"{med['cudnn'] * 1e3:.1f} ms; {why}")
    return [cpu_row, _ratio_row("cudnn-vs-generic-gpu", fw, f"train step T{steps} B{batch} on the GPU (cuDNN "
                                f"{med['cpu'] / med['cudnn']:.0f}x faster than the CPU)", times["cudnn"],
                                times["generic"], detail, promise_not_slower=True)]


def precision(lab: Any, sc: Scale) -> list[ClaimRow]:
    """Claim precision: the digits classifier in every precision on both paths, against a float64 reference."""
    fw = lab.name
    d = data.digits()
    gpu = lab.gpu_reason()
    dev = lab.gpu_device() if gpu is None else "cpu"
    dims = dict(task="classify", inputs=8, hidden=sc.digits_hidden, layers=1, outputs=10)
    ref = lab.build(impl="generic", device=dev, precision="fp64", seed=0, **dims)
    impls = ("cudnn", "generic") if gpu is None else ("generic",)
    precisions = lab.precisions if gpu is None else ("fp32",)
    runs = [Run("generic fp64", ref, [], [])]
    runs += [Run(f"{impl} {p}", lab.build(impl=impl, device=dev, precision=p, like=ref, **dims), [], [])
             for p in precisions for impl in impls]
    # Forward error before training isolates the arithmetic; accuracy after training is what a user sees. A
    # precision a path does not support here is reported as such, not as a failure of the claim.
    x64 = lab.tensors(ref, d.x_test, d.y_test)[0]
    base = lab.outputs(ref, x64)
    err: dict[str, float] = {}
    unsupported: dict[str, str] = {}
    for r in runs[1:]:
        try:
            out = lab.outputs(r.model, lab.tensors(r.model, d.x_test, d.y_test)[0])
        except Exception as exc:  # noqa: BLE001 - the framework's own refusal is the finding
            unsupported[r.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            continue
        err[r.name] = float(np.abs(out - base).max() / max(np.abs(base).max(), 1e-30))
    runs = [runs[0]] + [r for r in runs[1:] if r.name in err]
    tensors = [lab.tensors(r.model, d.x_train, d.y_train) for r in runs]
    _lockstep(lab, runs, tensors, len(d.y_train), sc.precision_epochs, sc.digits_batch, seed=5)
    acc = {r.name: _accuracy(lab, r.model, lab.tensors(r.model, d.x_test, d.y_test)[0], d.y_test) for r in runs}
    per_epoch = {r.name: float(np.median(r.seconds[1:] or r.seconds)) for r in runs}
    detail = {"forward_error_vs_fp64": err, "accuracy": acc, "epoch_s": per_epoch, "epochs": sc.precision_epochs,
              "loss": {r.name: r.losses for r in runs}, "unsupported": unsupported}
    if gpu is not None:
        return [not_run("precision", fw, f"no GPU: {gpu}; generic fp32 forward error vs float64 "
                                         f"{err.get('generic fp32', float('nan')):.1e} on the CPU")]
    both = [p for p in precisions if f"cudnn {p}" in acc and f"generic {p}" in acc]
    drops = {p: acc[f"generic {p}"] - acc[f"cudnn {p}"] for p in both}
    parts = [f"{p}: cuDNN {acc[f'cudnn {p}']:.3f} / generic {acc[f'generic {p}']:.3f} (fwd err "
             f"{err[f'cudnn {p}']:.0e}/{err[f'generic {p}']:.0e})" for p in both]
    parts += [f"{name}: unsupported" for name in unsupported]
    measured = f"fp64 {acc['generic fp64']:.3f}; " + "; ".join(parts)
    worst = max(drops, key=lambda p: drops[p]) if drops else None
    if worst is None:
        verdict = NOT_RUN
    elif drops[worst] > ACC_TOL:
        verdict = f"drop seen at {worst}: {drops[worst]:.1%} (cuDNN vs generic at the same precision)"
    else:
        low = min(both, key=lambda p: acc[f"cudnn {p}"])
        verdict = (f"no cuDNN drop at equal precision (<= {ACC_TOL:.1%}); lowest: {low} "
                   f"{acc[f'cudnn {low}'] - acc['generic fp64']:+.1%} vs fp64")
    return [ClaimRow("precision", fw, measured, verdict, detail)]
