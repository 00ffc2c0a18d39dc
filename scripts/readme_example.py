"""Write one of the README's example test files as printed, and print its path (to hand to pytest).

    python3 scripts/readme_example.py test_my_keras_model.py [FOLDER]

FOLDER defaults to .rnnperf-examples/ in the repository, so pytest's rootdir (and with it baselines/) is the
repository's: a GPU runner records and compares the example's baseline like the suite's. On a GPU runner:

    scripts/gpu-check.sh suite "$(python3 scripts/readme_example.py test_my_keras_model.py)" -k tensorflow
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def example(name: str, readme: Path = REPO / "README.md") -> str:
    """The Python block of the README that starts with ``# <name>``; SystemExit naming the ones there otherwise."""
    text = readme.read_text()
    match = re.search(r"```python\n(# " + re.escape(name) + r"\n.*?)```", text, re.S)
    if not match:
        found = re.findall(r"```python\n# (\S+\.py)\n", text)
        raise SystemExit(f"README.md has no '# {name}' example; it has: {', '.join(found) or 'none'}")
    return match.group(1)


def main(argv: list[str]) -> int:
    """Write the example named by ``argv[0]`` into ``argv[1]`` (default .rnnperf-examples/); print its path."""
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    folder = Path(argv[1]) if len(argv) > 1 else REPO / ".rnnperf-examples"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / argv[0]
    path.write_text(example(argv[0]))
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
