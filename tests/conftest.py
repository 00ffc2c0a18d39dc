"""Shared by every test: the extension modules that pytester's in-process runs load, loaded once up front."""

# An extension module (numpy's FFT, scipy's) loads only once a process, and pytester unloads what a test loaded:
# loaded here, before any test, they stay loaded through every in-process run, whichever helper module ran it
# (tests/plugin/conftest.py keeps the ones a run loads, but tests/browser loads that file under a name of its own).
import numpy.fft  # noqa: F401
import scipy.stats  # noqa: F401
