"""pytest-rnnperf: catch cuDNN RNN performance and accuracy regressions on GPU runners.

The core modules know nothing of pytest and import no framework at load time; the pytest side lives in
``pytest_rnnperf.plugin`` and the frameworks are imported lazily by ``pytest_rnnperf.backends``.
"""

__version__ = "0.1.0"
