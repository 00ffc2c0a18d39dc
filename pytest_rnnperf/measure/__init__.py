"""Measuring a case: the runner, wall and device timers, NVML fingerprint and telemetry, the software environment, backend subprocesses and GPU placement."""
