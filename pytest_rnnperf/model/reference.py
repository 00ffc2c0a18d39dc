"""Float64 NumPy ground truth for LSTM/GRU/RNN: canonical weights, forward pass and full BPTT.

The weight layout and gate order are PyTorch's (``nn.LSTM``/``nn.GRU``/``nn.RNN``), so every backend
converts to and from this one layout and parity is always measured against the same float64 reference.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from pytest_rnnperf.model.cases import GATES

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, Shape

__all__ = [
    "LayerWeights",
    "RNNWeights",
    "RNNResult",
    "RNNGrads",
    "init_weights",
    "make_inputs",
    "forward",
    "backward",
]

# Names of the four arrays of one layer/direction, in PyTorch's _flat_weights order.
_ARRAY_NAMES: tuple[str, ...] = ("w_ih", "w_hh", "b_ih", "b_hh")


# eq=False on every array-holding dataclass: the generated __eq__ would compare arrays elementwise and
# then fail on truthiness; use max_abs_diff for numerical comparison instead.
@dataclass(frozen=True, eq=False)
class LayerWeights:
    """Weights of one layer in one direction: input and recurrent matrices and their biases."""

    w_ih: np.ndarray  # (G*H, in_size); in_size = input_size for layer 0, else H * directions
    w_hh: np.ndarray  # (G*H, H)
    b_ih: np.ndarray  # (G*H,)
    b_hh: np.ndarray  # (G*H,)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four arrays in PyTorch order (w_ih, w_hh, b_ih, b_hh)."""
        return (self.w_ih, self.w_hh, self.b_ih, self.b_hh)

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> LayerWeights:
        """New LayerWeights with ``fn`` applied to each array."""
        return LayerWeights(*(fn(a) for a in self.arrays()))


@dataclass(frozen=True, eq=False)
class RNNWeights:
    """All weights of a (possibly stacked, bidirectional) RNN in PyTorch's layout and gate order."""

    cell: str
    input_size: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    layers: tuple[tuple[LayerWeights, ...], ...]  # [layer][direction]; direction 0 forward, 1 reverse

    def __post_init__(self) -> None:
        """Check the structure and every array shape, so layout bugs fail where they are made."""
        if self.cell not in GATES:
            raise ValueError(f"unknown cell {self.cell!r}; expected one of {', '.join(GATES)}")
        if len(self.layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(self.layers)}")
        for layer, dirs in enumerate(self.layers):
            if len(dirs) != self.directions:
                raise ValueError(f"layer {layer}: expected {self.directions} directions, got {len(dirs)}")
            expected = self.layer_shapes(layer)
            for direction, lw in enumerate(dirs):
                for name, arr, shape in zip(_ARRAY_NAMES, lw.arrays(), expected):
                    if tuple(arr.shape) != shape:
                        raise ValueError(
                            f"layer {layer} direction {direction} {name}: shape {tuple(arr.shape)}, expected {shape}"
                        )

    @property
    def directions(self) -> int:
        """Number of directions (1 or 2)."""
        return 2 if self.bidirectional else 1

    @property
    def gates(self) -> int:
        """Gate count G of the cell (4 LSTM, 3 GRU, 1 plain RNN)."""
        return GATES[self.cell]

    def layer_input_size(self, layer: int) -> int:
        """Input width of ``layer``: the sequence features for layer 0, else the previous layer's output."""
        return self.input_size if layer == 0 else self.hidden_size * self.directions

    def layer_shapes(self, layer: int) -> tuple[tuple[int, ...], ...]:
        """Expected shapes of (w_ih, w_hh, b_ih, b_hh) for ``layer``."""
        gh = self.gates * self.hidden_size
        return ((gh, self.layer_input_size(layer)), (gh, self.hidden_size), (gh,), (gh,))

    def flat(self) -> list[np.ndarray]:
        """Arrays in PyTorch's _flat_weights order: (w_ih, w_hh, b_ih, b_hh) per layer, per direction."""
        return [a for dirs in self.layers for lw in dirs for a in lw.arrays()]

    def flat_names(self) -> list[str]:
        """PyTorch parameter names matching flat(), e.g. ``weight_ih_l1_reverse``."""
        names = []
        for layer in range(self.num_layers):
            for direction in range(self.directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                names += [f"{p}{suffix}" for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        return names

    @classmethod
    def from_flat(
        cls,
        cell: str,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        arrays: Sequence[np.ndarray],
    ) -> RNNWeights:
        """Inverse of flat(): rebuild from arrays in PyTorch's _flat_weights order (dtype kept as given)."""
        directions = 2 if bidirectional else 1
        expected = 4 * num_layers * directions
        if len(arrays) != expected:
            raise ValueError(f"expected {expected} arrays, got {len(arrays)}")
        it = iter(np.asarray(a) for a in arrays)
        layers = tuple(
            tuple(LayerWeights(next(it), next(it), next(it), next(it)) for _ in range(directions))
            for _ in range(num_layers)
        )
        return cls(cell, input_size, hidden_size, num_layers, bidirectional, layers)

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> RNNWeights:
        """New RNNWeights with ``fn`` applied to every array (structure unchanged)."""
        layers = tuple(tuple(lw.map(fn) for lw in dirs) for dirs in self.layers)
        return RNNWeights(self.cell, self.input_size, self.hidden_size, self.num_layers, self.bidirectional, layers)

    def astype(self, dtype: np.dtype | type | str) -> RNNWeights:
        """Copy with every array cast to ``dtype``."""
        return self.map(lambda a: np.asarray(a).astype(dtype))

    def max_abs_diff(self, other: RNNWeights) -> float:
        """Largest absolute elementwise difference over all arrays, computed in float64."""
        mine, theirs = self.flat(), other.flat()
        if len(mine) != len(theirs):
            raise ValueError(f"different structure: {len(mine)} vs {len(theirs)} arrays")
        worst = 0.0
        for a, b in zip(mine, theirs):
            if a.shape != b.shape:
                raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
            if a.size:
                diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
                worst = max(worst, float(diff.max()))
        return worst


@dataclass(frozen=True, eq=False)
class RNNResult:
    """Forward outputs: full output sequence and final states, in PyTorch's (time-major) layout."""

    output: np.ndarray  # (T, B, D*H); bidirectional: [forward H | reverse H]
    h_n: np.ndarray  # (L*D, B, H); index = layer * D + direction
    c_n: np.ndarray | None  # (L*D, B, H) for LSTM, else None


@dataclass(frozen=True, eq=False)
class RNNGrads:
    """Gradients of the parity loss with respect to the input sequence and every weight."""

    d_input: np.ndarray  # (T, B, I)
    d_weights: RNNWeights  # same structure as the weights


def init_weights(
    cell: str,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
    seed: int = 0,
) -> RNNWeights:
    """Float64 weights drawn uniform(-1/sqrt(H), 1/sqrt(H)) like PyTorch's default init, deterministic in seed."""
    if cell not in GATES:
        raise ValueError(f"unknown cell {cell!r}; expected one of {', '.join(GATES)}")
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(hidden_size)
    directions = 2 if bidirectional else 1
    gh = GATES[cell] * hidden_size
    layers = []
    for layer in range(num_layers):
        in_size = input_size if layer == 0 else hidden_size * directions
        dirs = []
        for _ in range(directions):
            # Drawn in flat() order so the stream of random numbers maps one-to-one onto _flat_weights.
            w_ih, w_hh, b_ih, b_hh = (
                rng.uniform(-bound, bound, size=shape) for shape in ((gh, in_size), (gh, hidden_size), (gh,), (gh,))
            )
            dirs.append(LayerWeights(w_ih, w_hh, b_ih, b_hh))
        layers.append(tuple(dirs))
    return RNNWeights(cell, input_size, hidden_size, num_layers, bidirectional, tuple(layers))


def make_inputs(case: Case, seed: int = 0) -> CaseInputs:
    """Float64 parity inputs for ``case``: x ~ N(0, 1), upstream gradients ~ 0.1 * N(0, 1); the caller's own copies."""
    drawn = _drawn(case.shape, seed)
    return CaseInputs(x=drawn.x.copy(), d_output=drawn.d_output.copy(), d_h_n=drawn.d_h_n.copy(),
                      d_c_n=drawn.d_c_n.copy() if case.cell == "lstm" and drawn.d_c_n is not None else None)


# The nightly matrix has 8 shapes shared by its 88 cases: each is drawn once (1.1 GB held in all), since a copy
# costs less than half a draw.
@functools.lru_cache(maxsize=8)
def _drawn(s: Shape, seed: int) -> CaseInputs:
    """The draws of every case of shape ``s``: one stream, so a GRU's are an LSTM's without the last (d_c_n)."""
    rng = np.random.default_rng(seed)
    dh = s.hidden_size * s.directions
    state_shape = (s.num_layers * s.directions, s.batch, s.hidden_size)
    x = rng.standard_normal((s.seq_len, s.batch, s.input_size))
    # 0.1 keeps the upstream gradients small enough that low-precision backends do not overflow in backward.
    d_output = 0.1 * rng.standard_normal((s.seq_len, s.batch, dh))
    d_h_n = 0.1 * rng.standard_normal(state_shape)
    d_c_n = 0.1 * rng.standard_normal(state_shape)
    return CaseInputs(x=x, d_output=d_output, d_h_n=d_h_n, d_c_n=d_c_n)


# ---------------------------------------------------------------------------------------------------------
# Internals: one cell step forward/backward, and the layer/direction walk shared by forward and backward.
# ---------------------------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function, written to avoid overflow warnings for large negative inputs."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@dataclass(frozen=True, eq=False)
class _StepCache:
    """What backward needs from one forward step of one cell."""

    x: np.ndarray  # (B, in_size) the step input
    h_prev: np.ndarray  # (B, H)
    c_prev: np.ndarray | None  # (B, H), LSTM only
    acts: tuple[np.ndarray, ...]  # cell-specific activations (see _step_forward)


def _step_forward(
    cell: str, lw: LayerWeights, x: np.ndarray, h: np.ndarray, c: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None, _StepCache]:
    """One time step for a batch: returns (h', c' or None, cache)."""
    gi = x @ lw.w_ih.T + lw.b_ih
    gh = h @ lw.w_hh.T + lw.b_hh
    if cell == "lstm":
        assert c is not None
        i, f, g, o = np.split(gi + gh, 4, axis=1)
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c_new = f * c + i * g
        tanh_c = np.tanh(c_new)
        return o * tanh_c, c_new, _StepCache(x, h, c, (i, f, g, o, tanh_c))
    if cell == "gru":
        gi_r, gi_z, gi_n = np.split(gi, 3, axis=1)
        gh_r, gh_z, gh_n = np.split(gh, 3, axis=1)
        r = _sigmoid(gi_r + gh_r)
        z = _sigmoid(gi_z + gh_z)
        # The reset gate multiplies the recurrent term *including* b_hn (PyTorch/cuDNN variant), so the
        # backward needs gh_n itself, not just W_hn h.
        n = np.tanh(gi_n + r * gh_n)
        return (1.0 - z) * n + z * h, None, _StepCache(x, h, None, (r, z, n, gh_n))
    pre = gi + gh
    h_new = np.tanh(pre) if cell == "rnn_tanh" else np.maximum(pre, 0.0)
    return h_new, None, _StepCache(x, h, None, (h_new,))


def _step_backward(
    cell: str, cache: _StepCache, dh: np.ndarray, dc: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Backward of one step given dL/dh' and dL/dc'.

    Returns (d_gi, d_gh, dh_prev_direct, dc_prev): gradients of the input and recurrent pre-activations
    (they differ only for GRU's n gate), the part of dL/dh_prev that bypasses W_hh, and dL/dc_prev.
    """
    if cell == "lstm":
        assert dc is not None and cache.c_prev is not None
        i, f, g, o, tanh_c = cache.acts
        dc_total = dc + dh * o * (1.0 - tanh_c**2)
        d_pre = np.concatenate(
            [
                dc_total * g * i * (1.0 - i),
                dc_total * cache.c_prev * f * (1.0 - f),
                dc_total * i * (1.0 - g**2),
                dh * tanh_c * o * (1.0 - o),
            ],
            axis=1,
        )
        return d_pre, d_pre, np.zeros_like(dh), dc_total * f
    if cell == "gru":
        r, z, n, gh_n = cache.acts
        dn_pre = dh * (1.0 - z) * (1.0 - n**2)
        dr_pre = dn_pre * gh_n * r * (1.0 - r)
        dz_pre = dh * (cache.h_prev - n) * z * (1.0 - z)
        d_gi = np.concatenate([dr_pre, dz_pre, dn_pre], axis=1)
        d_gh = np.concatenate([dr_pre, dz_pre, dn_pre * r], axis=1)
        return d_gi, d_gh, dh * z, None
    (h_new,) = cache.acts
    # relu'(pre) = [pre > 0] = [h' > 0]; tanh'(pre) = 1 - h'^2: both recoverable from the output.
    d_pre = dh * ((1.0 - h_new**2) if cell == "rnn_tanh" else (h_new > 0.0).astype(h_new.dtype))
    return d_pre, d_pre, np.zeros_like(dh), None


def _time_order(seq_len: int, direction: int) -> range:
    """Processing order of time indices: forward for direction 0, reversed for direction 1."""
    return range(seq_len) if direction == 0 else range(seq_len - 1, -1, -1)


@dataclass(frozen=True, eq=False)
class _ForwardCache:
    """Forward result plus, per [layer][direction], the step caches in processing order."""

    result: RNNResult
    steps: tuple[tuple[tuple[_StepCache, ...], ...], ...]


def _as_input(weights: RNNWeights, x: np.ndarray) -> np.ndarray:
    """Cast x to float64 and check it is (T, B, input_size)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3 or x.shape[2] != weights.input_size:
        raise ValueError(f"x must be (T, B, {weights.input_size}), got {x.shape}")
    return x


def _forward_cached(weights: RNNWeights, x: np.ndarray) -> _ForwardCache:
    """Forward pass from zero initial states, keeping every step's cache for backward."""
    w = weights.astype(np.float64)
    x = _as_input(w, x)
    seq_len, batch, _ = x.shape
    hsz, lstm = w.hidden_size, w.cell == "lstm"
    h_n, c_n, steps = [], [], []
    layer_in = x
    for dirs in w.layers:
        outs, layer_steps = [], []
        for direction, lw in enumerate(dirs):
            h = np.zeros((batch, hsz))
            c = np.zeros((batch, hsz)) if lstm else None
            out = np.empty((seq_len, batch, hsz))
            caches = []
            for t in _time_order(seq_len, direction):
                h, c, cache = _step_forward(w.cell, lw, layer_in[t], h, c)
                out[t] = h  # reverse outputs go back to their original time index
                caches.append(cache)
            outs.append(out)
            layer_steps.append(tuple(caches))
            h_n.append(h)
            c_n.append(c)
        layer_in = np.concatenate(outs, axis=2)
        steps.append(tuple(layer_steps))
    result = RNNResult(
        output=layer_in,
        h_n=np.stack(h_n),
        c_n=np.stack([c for c in c_n if c is not None]) if lstm else None,  # every c is an array for LSTM
    )
    return _ForwardCache(result, tuple(steps))


def forward(weights: RNNWeights, x: np.ndarray) -> RNNResult:
    """Float64 forward pass from zero initial states; x is (T, B, input_size), time-major."""
    return _forward_cached(weights, x).result


def backward(
    weights: RNNWeights,
    x: np.ndarray,
    d_output: np.ndarray,
    d_h_n: np.ndarray,
    d_c_n: np.ndarray | None = None,
) -> RNNGrads:
    """Full BPTT of L = <output, d_output> + <h_n, d_h_n> + <c_n, d_c_n> (zero initial states)."""
    w = weights.astype(np.float64)
    fc = _forward_cached(w, x)
    res = fc.result
    x = _as_input(w, x)
    d_output = np.asarray(d_output, dtype=np.float64)
    d_h_n = np.asarray(d_h_n, dtype=np.float64)
    lstm = w.cell == "lstm"
    for name, arr, ref in (("d_output", d_output, res.output), ("d_h_n", d_h_n, res.h_n)):
        if arr.shape != ref.shape:
            raise ValueError(f"{name} must have shape {ref.shape}, got {arr.shape}")
    if lstm:
        assert res.c_n is not None
        # A missing d_c_n means c_n is not part of the loss.
        d_c_n = np.zeros_like(res.c_n) if d_c_n is None else np.asarray(d_c_n, dtype=np.float64)
        if d_c_n.shape != res.c_n.shape:
            raise ValueError(f"d_c_n must have shape {res.c_n.shape}, got {d_c_n.shape}")
    elif d_c_n is not None:
        raise ValueError(f"d_c_n given for cell {w.cell!r}, which has no cell state")

    seq_len = x.shape[0]
    hsz, ndir = w.hidden_size, w.directions
    grads: list[tuple[LayerWeights, ...]] = [()] * w.num_layers
    d_layer_out = d_output  # dL/d(output of the current layer), (T, B, D*H)
    for layer in range(w.num_layers - 1, -1, -1):
        d_layer_in = np.zeros((seq_len, x.shape[1], w.layer_input_size(layer)))
        layer_grads = []
        for direction, lw in enumerate(w.layers[layer]):
            gw_ih, gw_hh = np.zeros_like(lw.w_ih), np.zeros_like(lw.w_hh)
            gb_ih, gb_hh = np.zeros_like(lw.b_ih), np.zeros_like(lw.b_hh)
            state = layer * ndir + direction
            # h_n/c_n are the states after the last processed step, so their gradients seed the recursion.
            dh_next = d_h_n[state].copy()
            dc_next = d_c_n[state].copy() if lstm and d_c_n is not None else None  # set above for LSTM
            caches = fc.steps[layer][direction]
            order = list(_time_order(seq_len, direction))
            for k in range(seq_len - 1, -1, -1):
                t, cache = order[k], caches[k]
                dh = dh_next + d_layer_out[t, :, direction * hsz : (direction + 1) * hsz]
                d_gi, d_gh, dh_direct, dc_next = _step_backward(w.cell, cache, dh, dc_next)
                gw_ih += d_gi.T @ cache.x
                gw_hh += d_gh.T @ cache.h_prev
                gb_ih += d_gi.sum(axis=0)
                gb_hh += d_gh.sum(axis=0)
                d_layer_in[t] += d_gi @ lw.w_ih
                dh_next = dh_direct + d_gh @ lw.w_hh
            layer_grads.append(LayerWeights(gw_ih, gw_hh, gb_ih, gb_hh))
        grads[layer] = tuple(layer_grads)
        d_layer_out = d_layer_in
    d_weights = RNNWeights(w.cell, w.input_size, w.hidden_size, w.num_layers, w.bidirectional, tuple(grads))
    return RNNGrads(d_input=d_layer_out, d_weights=d_weights)


@dataclass(frozen=True)
class CaseInputs:
    """Host-side inputs every backend receives: input sequence and upstream gradients (float64)."""

    x: "np.ndarray"  # (T, B, I)
    d_output: "np.ndarray"  # (T, B, D*H): upstream gradient of the output, the parity loss is <y, d_output>
    d_h_n: "np.ndarray"  # (L*D, B, H)
    d_c_n: "np.ndarray | None"  # (L*D, B, H) for LSTM
