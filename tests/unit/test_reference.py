"""Tests of the float64 NumPy reference: finite-difference gradients, layout, hand-computed steps, torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_rnnperf.model.cases import CELLS, GATES, Case, Shape
from pytest_rnnperf.model.reference import (
    LayerWeights, RNNResult, RNNWeights, backward, forward, init_weights, make_inputs,
)

# (num_layers, bidirectional): covers stacking and the reverse direction separately and together.
CONFIGS = [(1, False), (2, False), (1, True), (2, True)]
T, B, I, H = 3, 2, 3, 4


def _loss(res: RNNResult, d_output: np.ndarray, d_h_n: np.ndarray, d_c_n: np.ndarray | None) -> float:
    """The parity loss whose gradient backward() computes."""
    total = float(np.sum(res.output * d_output) + np.sum(res.h_n * d_h_n))
    if d_c_n is not None:
        assert res.c_n is not None
        total += float(np.sum(res.c_n * d_c_n))
    return total


def _rel_err(numeric: np.ndarray, analytic: np.ndarray) -> float:
    """Norm-wise relative error; per-entry ratios are noise-dominated for near-zero gradient entries."""
    denom = max(float(np.linalg.norm(numeric)), float(np.linalg.norm(analytic)), 1e-12)
    return float(np.linalg.norm(numeric - analytic)) / denom


def _inputs(cell: str, num_layers: int, bidirectional: bool, seed: int = 1):
    """Tiny parity inputs for the gradient checks."""
    case = Case("torch", cell, Shape(T, B, I, H, num_layers, bidirectional))
    return make_inputs(case, seed=seed)


@pytest.mark.parametrize("num_layers,bidirectional", CONFIGS, ids=lambda v: str(v))
@pytest.mark.parametrize("cell", CELLS)
def test_gradients_match_finite_differences(cell: str, num_layers: int, bidirectional: bool) -> None:
    weights = init_weights(cell, I, H, num_layers, bidirectional, seed=3)
    # Larger-than-default weights push activations away from the linear regime, so gate-order or
    # derivative mistakes cannot hide behind tanh(x) ~ x.
    weights = weights.map(lambda a: a * 2.0)
    inp = _inputs(cell, num_layers, bidirectional)
    grads = backward(weights, inp.x, inp.d_output, inp.d_h_n, inp.d_c_n)
    eps = 1e-6

    def loss_at(w: RNNWeights, x: np.ndarray) -> float:
        return _loss(forward(w, x), inp.d_output, inp.d_h_n, inp.d_c_n)

    # d_input: every entry.
    numeric = np.zeros_like(inp.x)
    for idx in np.ndindex(inp.x.shape):
        xp, xm = inp.x.copy(), inp.x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        numeric[idx] = (loss_at(weights, xp) - loss_at(weights, xm)) / (2 * eps)
    assert grads.d_input.shape == inp.x.shape
    assert _rel_err(numeric, grads.d_input) < 1e-6

    # Every weight and bias array, every entry (the shapes are tiny).
    flat = weights.flat()
    names = weights.flat_names()
    analytic = grads.d_weights.flat()
    assert len(analytic) == len(flat)
    for k, (arr, name) in enumerate(zip(flat, names)):
        numeric = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            plus = [a.copy() for a in flat]
            minus = [a.copy() for a in flat]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            wp = RNNWeights.from_flat(cell, I, H, num_layers, bidirectional, plus)
            wm = RNNWeights.from_flat(cell, I, H, num_layers, bidirectional, minus)
            numeric[idx] = (loss_at(wp, inp.x) - loss_at(wm, inp.x)) / (2 * eps)
        assert analytic[k].shape == arr.shape, name
        assert float(np.abs(analytic[k]).max()) > 0.0, f"{name}: gradient identically zero"
        assert _rel_err(numeric, analytic[k]) < 1e-6, name


@pytest.mark.parametrize("cell", CELLS)
def test_shapes_bidirectional_two_layers(cell: str) -> None:
    t, b, i, h, layers = 5, 3, 6, 7, 2
    weights = init_weights(cell, i, h, layers, bidirectional=True)
    g = GATES[cell]
    assert weights.directions == 2
    assert [a.shape for a in weights.flat()] == [
        (g * h, i), (g * h, h), (g * h,), (g * h,),  # layer 0 forward
        (g * h, i), (g * h, h), (g * h,), (g * h,),  # layer 0 reverse
        (g * h, 2 * h), (g * h, h), (g * h,), (g * h,),  # layer 1 forward: input is both directions
        (g * h, 2 * h), (g * h, h), (g * h,), (g * h,),  # layer 1 reverse
    ]  # fmt: skip
    inp = make_inputs(Case("torch", cell, Shape(t, b, i, h, layers, True)))
    assert inp.x.shape == (t, b, i)
    assert inp.d_output.shape == (t, b, 2 * h)
    assert inp.d_h_n.shape == (2 * layers, b, h)
    assert (inp.d_c_n is not None) == (cell == "lstm")
    assert all(a.dtype == np.float64 for a in (inp.x, inp.d_output, inp.d_h_n))

    res = forward(weights, inp.x)
    assert res.output.shape == (t, b, 2 * h)
    assert res.h_n.shape == (2 * layers, b, h)
    if cell == "lstm":
        assert res.c_n is not None and res.c_n.shape == (2 * layers, b, h)
    else:
        assert res.c_n is None
    # Top layer: forward final state is the last output, reverse final state is the first output.
    np.testing.assert_array_equal(res.h_n[2], res.output[-1, :, :h])
    np.testing.assert_array_equal(res.h_n[3], res.output[0, :, h:])

    grads = backward(weights, inp.x, inp.d_output, inp.d_h_n, inp.d_c_n)
    assert grads.d_input.shape == (t, b, i)
    assert [a.shape for a in grads.d_weights.flat()] == [a.shape for a in weights.flat()]


@pytest.mark.parametrize("cell", CELLS)
def test_reverse_direction_is_time_reversed_forward(cell: str) -> None:
    weights = init_weights(cell, I, H, 1, bidirectional=True, seed=5)
    fwd_only = RNNWeights(cell, I, H, 1, False, ((weights.layers[0][0],),))
    rev_only = RNNWeights(cell, I, H, 1, False, ((weights.layers[0][1],),))
    x = np.random.default_rng(0).standard_normal((T, B, I))
    res = forward(weights, x)
    res_f = forward(fwd_only, x)
    res_r = forward(rev_only, x[::-1])
    np.testing.assert_allclose(res.output[:, :, :H], res_f.output, rtol=0, atol=1e-15)
    np.testing.assert_allclose(res.output[:, :, H:], res_r.output[::-1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(res.h_n[1], res_r.h_n[0], rtol=0, atol=1e-15)


def test_flat_round_trip_and_names() -> None:
    weights = init_weights("gru", 3, 5, num_layers=2, bidirectional=True, seed=7)
    flat = weights.flat()
    assert len(flat) == 4 * 2 * 2
    assert weights.flat_names()[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert weights.flat_names()[4] == "weight_ih_l0_reverse"
    assert weights.flat_names()[-1] == "bias_hh_l1_reverse"
    # flat() order is layer-major, then direction, then (w_ih, w_hh, b_ih, b_hh).
    assert flat[4] is weights.layers[0][1].w_ih
    assert flat[11] is weights.layers[1][0].b_hh
    back = RNNWeights.from_flat("gru", 3, 5, 2, True, flat)
    assert back.max_abs_diff(weights) == 0.0
    assert all(a is b for a, b in zip(back.flat(), flat))
    with pytest.raises(ValueError):
        RNNWeights.from_flat("gru", 3, 5, 2, True, flat[:-1])
    with pytest.raises(ValueError):
        RNNWeights.from_flat("lstm", 3, 5, 2, True, flat)  # gru arrays have 3 gates, lstm needs 4


def test_astype_map_and_max_abs_diff() -> None:
    weights = init_weights("lstm", 3, 4, num_layers=2)
    w32 = weights.astype(np.float32)
    assert all(a.dtype == np.float32 for a in w32.flat())
    assert all(a.dtype == np.float64 for a in weights.flat())  # original untouched
    assert 0.0 < w32.max_abs_diff(weights) < 1e-7
    assert w32.astype(np.float64).max_abs_diff(w32) == 0.0
    shifted = weights.map(lambda a: a + 0.25)
    assert shifted.max_abs_diff(weights) == pytest.approx(0.25)
    assert shifted.cell == "lstm" and shifted.num_layers == 2
    with pytest.raises(ValueError):
        weights.max_abs_diff(init_weights("lstm", 3, 4, num_layers=1))


def test_forward_accepts_float32_and_computes_in_float64() -> None:
    weights = init_weights("lstm", 3, 4)
    x = np.random.default_rng(0).standard_normal((2, 2, 3))
    res32 = forward(weights.astype(np.float32), x.astype(np.float32))
    assert res32.output.dtype == np.float64
    with pytest.raises(ValueError):
        forward(weights, x[..., :2])


def test_init_weights_deterministic_and_in_range() -> None:
    a = init_weights("lstm", 5, 16, num_layers=2, bidirectional=True, seed=11)
    b = init_weights("lstm", 5, 16, num_layers=2, bidirectional=True, seed=11)
    c = init_weights("lstm", 5, 16, num_layers=2, bidirectional=True, seed=12)
    assert a.max_abs_diff(b) == 0.0
    assert a.max_abs_diff(c) > 0.0
    bound = 1.0 / math.sqrt(16)
    allv = np.concatenate([x.ravel() for x in a.flat()])
    assert allv.dtype == np.float64
    assert np.all(np.abs(allv) <= bound)
    assert allv.min() < -0.9 * bound and allv.max() > 0.9 * bound  # uses the whole range
    with pytest.raises(ValueError):
        init_weights("lstmx", 5, 16)


def test_make_inputs_deterministic_and_scaled() -> None:
    case = Case("tf", "lstm", Shape(50, 20, 10, 8, 2, True))
    a, b, c = make_inputs(case, seed=0), make_inputs(case, seed=0), make_inputs(case, seed=1)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)
    assert a.d_c_n is not None and a.d_c_n.shape == a.d_h_n.shape
    assert 0.9 < a.x.std() < 1.1
    assert 0.09 < a.d_output.std() < 0.11


# --- Hand-computed steps: scalar formulas written out per gate (H=1), so a wrong gate order fails. ---


def _sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def _hand_weights(cell: str) -> RNNWeights:
    """H=1, I=1 weights with a distinct value per gate, so swapping any two gates changes the result."""
    g = GATES[cell]
    w_ih = np.array([[0.5], [-0.7], [0.9], [0.3]])[:g]
    w_hh = np.array([[-0.4], [0.8], [0.6], [-0.2]])[:g]
    b_ih = np.array([0.1, 0.25, -0.15, 0.05])[:g]
    b_hh = np.array([-0.3, 0.2, 0.35, -0.1])[:g]
    return RNNWeights(cell, 1, 1, 1, False, ((LayerWeights(w_ih, w_hh, b_ih, b_hh),),))


def _hand_run(cell: str, xs: list[float]) -> tuple[list[float], float]:
    """Run the documented PyTorch equations over xs with scalars; returns (outputs, final c)."""
    (a_i, a_f, a_g, a_o) = (0.5, -0.7, 0.9, 0.3)
    (u_i, u_f, u_g, u_o) = (-0.4, 0.8, 0.6, -0.2)
    (b_i, b_f, b_g, b_o) = (0.1, 0.25, -0.15, 0.05)
    (c_i, c_f, c_g, c_o) = (-0.3, 0.2, 0.35, -0.1)
    h, c, outs = 0.0, 0.0, []
    for x in xs:
        if cell == "lstm":
            i = _sig(a_i * x + b_i + u_i * h + c_i)
            f = _sig(a_f * x + b_f + u_f * h + c_f)
            g = math.tanh(a_g * x + b_g + u_g * h + c_g)
            o = _sig(a_o * x + b_o + u_o * h + c_o)
            c = f * c + i * g
            h = o * math.tanh(c)
        elif cell == "gru":  # gates r, z, n use rows 0, 1, 2
            r = _sig(a_i * x + b_i + u_i * h + c_i)
            z = _sig(a_f * x + b_f + u_f * h + c_f)
            n = math.tanh(a_g * x + b_g + r * (u_g * h + c_g))
            h = (1 - z) * n + z * h
        elif cell == "rnn_tanh":
            h = math.tanh(a_i * x + b_i + u_i * h + c_i)
        else:
            h = max(0.0, a_i * x + b_i + u_i * h + c_i)
        outs.append(h)
    return outs, c


@pytest.mark.parametrize("cell", CELLS)
def test_single_step_hand_computed(cell: str) -> None:
    weights = _hand_weights(cell)
    res = forward(weights, np.array([[[0.8]]]))
    outs, c = _hand_run(cell, [0.8])
    assert res.output[0, 0, 0] == pytest.approx(outs[0], abs=1e-15)
    assert res.h_n[0, 0, 0] == pytest.approx(outs[0], abs=1e-15)
    if cell == "lstm":
        assert res.c_n is not None and res.c_n[0, 0, 0] == pytest.approx(c, abs=1e-15)


@pytest.mark.parametrize("cell", CELLS)
def test_two_steps_hand_computed(cell: str) -> None:
    # The second step has nonzero h and c, so the forget gate and the recurrent weights matter too.
    weights = _hand_weights(cell)
    xs = [0.8, 1.3]  # positive second input keeps the relu case off its zero branch
    res = forward(weights, np.array(xs).reshape(2, 1, 1))
    outs, c = _hand_run(cell, xs)
    assert outs[1] != 0.0
    np.testing.assert_allclose(res.output[:, 0, 0], outs, rtol=0, atol=1e-15)
    if cell == "lstm":
        assert res.c_n is not None and res.c_n[0, 0, 0] == pytest.approx(c, abs=1e-15)


def test_rejects_bad_upstream_gradients() -> None:
    weights = init_weights("gru", I, H)
    inp = _inputs("gru", 1, False)
    with pytest.raises(ValueError):
        backward(weights, inp.x, inp.d_output[:, :, :2], inp.d_h_n)
    with pytest.raises(ValueError):
        backward(weights, inp.x, inp.d_output, inp.d_h_n, np.zeros_like(inp.d_h_n))  # gru has no c


# --- Cross-check against PyTorch (skipped when torch is not installed). ---


@pytest.mark.parametrize("cell", CELLS)
def test_matches_torch_float64(cell: str) -> None:
    torch = pytest.importorskip("torch")
    t, b, i, h, layers = 4, 3, 5, 6, 2
    weights = init_weights(cell, i, h, layers, bidirectional=True, seed=2)
    inp = make_inputs(Case("torch", cell, Shape(t, b, i, h, layers, True)), seed=4)

    kwargs = dict(input_size=i, hidden_size=h, num_layers=layers, bidirectional=True)
    if cell == "lstm":
        module = torch.nn.LSTM(**kwargs)
    elif cell == "gru":
        module = torch.nn.GRU(**kwargs)
    else:
        module = torch.nn.RNN(nonlinearity=cell.removeprefix("rnn_"), **kwargs)
    module = module.double()
    with torch.no_grad():
        for name, arr in zip(weights.flat_names(), weights.flat()):
            getattr(module, name).copy_(torch.from_numpy(arr))

    x = torch.from_numpy(inp.x.copy()).requires_grad_(True)
    out, state = module(x)
    tensors = [out, state[0], state[1]] if cell == "lstm" else [out, state]
    upstream = [inp.d_output, inp.d_h_n] + ([inp.d_c_n] if cell == "lstm" else [])
    torch.autograd.backward(tensors, [torch.from_numpy(u) for u in upstream])

    ref = forward(weights, inp.x)
    grads = backward(weights, inp.x, inp.d_output, inp.d_h_n, inp.d_c_n)
    np.testing.assert_allclose(ref.output, out.detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(ref.h_n, tensors[1].detach().numpy(), rtol=0, atol=1e-10)
    if cell == "lstm":
        assert ref.c_n is not None
        np.testing.assert_allclose(ref.c_n, tensors[2].detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(grads.d_input, x.grad.numpy(), rtol=0, atol=1e-10)
    torch_grads = RNNWeights.from_flat(
        cell, i, h, layers, True, [getattr(module, n).grad.numpy() for n in weights.flat_names()]
    )
    assert grads.d_weights.max_abs_diff(torch_grads) < 1e-10


def test_make_inputs_draws_the_same_stream_for_every_cell_and_hands_out_copies() -> None:
    """Cases of one shape share one draw (x, upstream gradients, then d_c_n for an LSTM), as a fresh stream gives it;
    what a caller writes into its inputs never reaches the next case."""
    shape = Shape(5, 3, 4, 6, 2, bidirectional=True)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 3, 4))
    d_output, d_h_n, d_c_n = (0.1 * rng.standard_normal(s) for s in ((5, 3, 12), (4, 3, 6), (4, 3, 6)))
    lstm = make_inputs(Case("torch", "lstm", shape), seed=7)
    lstm.x[:] = 0.0  # a careless caller
    gru = make_inputs(Case("tf", "gru", shape, mode="infer"), seed=7)
    again = make_inputs(Case("torch", "lstm", shape), seed=7)
    for got in (gru, again):
        assert np.array_equal(got.x, x) and np.array_equal(got.d_output, d_output) and np.array_equal(got.d_h_n, d_h_n)
    assert gru.d_c_n is None and again.d_c_n is not None and np.array_equal(again.d_c_n, d_c_n)
    assert not np.array_equal(make_inputs(Case("torch", "lstm", shape), seed=8).x, x)
