"""Whole models through rnnperf.model(), the API a team uses for its own network.

Two small but typical models: a character-level language model (embedding, two-layer LSTM, projection)
fed token ids, and a bidirectional GRU classifier fed features. Each is copied for the cuDNN and the
generic side with identical weights, checked against a float64 copy, timed, and compared with the stored
baseline under its test's id. Without a GPU the generic copy is checked against float64 only.
"""

from __future__ import annotations

import pytest

from pytest_rnnperf.plugin.fixtures import RnnperfFixture

torch = pytest.importorskip("torch", reason="the model checks need torch (pip install 'pytest-rnnperf[torch]')")
nn = torch.nn


class CharLM(nn.Module):
    """Embedding -> LSTM(2 layers) -> next-character logits."""

    def __init__(self, vocab: int = 96, hidden: int = 256) -> None:
        """Sizes of a small character model."""
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)
        self.lstm = nn.LSTM(64, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits for every position."""
        y, _ = self.lstm(self.embed(tokens))
        return self.head(y)


class BiGRUClassifier(nn.Module):
    """Bidirectional GRU over a feature sequence, classified from its last step."""

    def __init__(self, features: int = 40, hidden: int = 128, classes: int = 10) -> None:
        """Sizes of a small sequence classifier."""
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits."""
        y, _ = self.gru(x)
        return self.head(y[:, -1])


def test_char_lm_trains_on_cudnn(rnnperf: RnnperfFixture, scale: str) -> None:
    """Training step (forward + backward) of the character model: cuDNN ran, matches, not slower."""
    hidden, batch, steps = (32, 4, 12) if scale == "smoke" else (256, 32, 100)
    rnnperf.check(rnnperf.model(lambda: CharLM(hidden=hidden), inputs=lambda: torch.randint(0, 96, (batch, steps)),
                                floor=1.0))


def test_bigru_classifier_infers_on_cudnn(rnnperf: RnnperfFixture, scale: str) -> None:
    """Inference of the bidirectional GRU classifier: cuDNN ran, matches, not slower."""
    hidden, batch, steps = (16, 4, 10) if scale == "smoke" else (128, 64, 50)
    rnnperf.check(rnnperf.model(lambda: BiGRUClassifier(hidden=hidden), inputs=lambda: torch.randn(batch, steps, 40),
                                mode="infer", floor=1.0))
