"""``python -m pytest_rnnperf``: the subcommands in ``pytest_rnnperf.cli``."""

import sys

from pytest_rnnperf.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
