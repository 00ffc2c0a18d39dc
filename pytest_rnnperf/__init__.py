"""pytest-rnnperf: catch cuDNN RNN performance and accuracy regressions on GPU runners.

Data flows down the layers measure -> judge -> store -> report, and every import points down:
``model`` (data and pure math) < ``backends`` < ``measure`` < ``judge`` < ``store`` < ``report`` <
``history`` < ``session`` < ``cli`` | ``plugin`` (a test holds the contract). Only ``plugin`` knows pytest,
and the frameworks are imported lazily by ``backends``.
"""

__version__ = "0.1.0"
