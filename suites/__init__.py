"""The ready pytest-rnnperf suite: ``pytest suites/ --benchmark-compare``."""
