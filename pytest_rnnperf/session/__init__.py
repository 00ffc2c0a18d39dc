"""The run's owner (knows nothing of pytest), its settings, and the pytest-xdist merge."""
