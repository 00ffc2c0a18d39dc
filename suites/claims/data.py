"""The claims suite's data: all of it ships inside installed packages or is generated from a seed; nothing downloads.

- handwritten digits: scikit-learn's 8x8 digits (1797 images), read row by row (8 steps of 8 pixels), the
  row-wise setup of the original MNIST claims at the size scikit-learn ships;
- a regression task: noisy sums of sine waves, next value from a window, generated from a seed;
- text: the source of Python's standard library, for the character-level language model.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Split:
    """Train and test arrays of one task (x: batch, time, features; y: labels, targets or next characters)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def digits(seed: int = 0, test_share: float = 0.2) -> Split:
    """scikit-learn's 8x8 digits as sequences of 8 rows, pixels scaled to [0, 1]; a seeded stratified split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float64)  # (1797, 8, 8): time = image row
    y = data.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_share, random_state=seed, stratify=y)
    return Split(x_tr, y_tr, x_te, y_te)


def sines(n: int, steps: int, features: int, seed: int = 0, test_share: float = 0.2) -> Split:
    """Windows of ``features`` noisy sine waves; the target is the mean of the waves one step after the window."""
    rng = np.random.default_rng(seed)
    freq = rng.uniform(0.02, 0.2, size=(n, 1, features))
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, features))
    t = np.arange(steps + 1, dtype=np.float64)[None, :, None]
    waves = np.sin(2 * np.pi * freq * t + phase)
    x = waves[:, :steps] + rng.normal(0, 0.05, size=(n, steps, features))
    y = waves[:, steps].mean(axis=1, keepdims=True)
    cut = int(n * (1 - test_share))
    return Split(x[:cut], y[:cut], x[cut:], y[cut:])


# Modules of the standard library whose source makes the corpus: plain, stable, present in every CPython.
_STDLIB_FILES = ("textwrap.py", "string.py", "fnmatch.py", "glob.py", "shlex.py", "calendar.py", "difflib.py",
                 "argparse.py", "pprint.py", "heapq.py", "bisect.py", "random.py", "statistics.py", "fractions.py")


def python_source(chars: int) -> str:
    """The first ``chars`` characters of the corpus (the same files in the same order on every machine)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    text = ""
    for name in _STDLIB_FILES:
        path = root / name
        if path.is_file():
            text += path.read_text(encoding="utf-8", errors="replace")
        if len(text) >= chars:
            break
    return text[:chars]


@dataclass(frozen=True)
class Corpus:
    """A text as windows of character ids: x holds ``steps`` ids, y the same shifted by one."""

    vocab: str
    split: Split

    def decode(self, ids: list[int]) -> str:
        """Characters of ``ids``."""
        return "".join(self.vocab[i] for i in ids)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (characters outside the vocabulary dropped)."""
        index = {c: i for i, c in enumerate(self.vocab)}
        return [index[c] for c in text if c in index]


def char_corpus(chars: int, steps: int, test_share: float = 0.1) -> Corpus:
    """Non-overlapping windows of ``steps + 1`` characters of Python source; the last ones are the test set."""
    text = python_source(chars)
    vocab = "".join(sorted(set(text)))
    ids = np.array([vocab.index(c) for c in text], dtype=np.int64)
    n = (len(ids) - 1) // steps
    x = ids[: n * steps].reshape(n, steps)
    y = ids[1: n * steps + 1].reshape(n, steps)
    cut = max(1, int(n * (1 - test_share)))
    return Corpus(vocab, Split(x[:cut], y[:cut], x[cut:], y[cut:]))
