"""The stored layout: baselines per GPU model, runs, formats and migrations."""
