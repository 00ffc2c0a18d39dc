"""``python -m pytest_rnnperf``: one module per subcommand."""
