"""Data and pure math: cases, flags, measurements, weights and the float64 reference, records, statistics.

Imports nothing else of pytest_rnnperf and no framework."""
