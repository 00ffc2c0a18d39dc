"""No import circle among the package's modules, imports inside functions included (import-linter sees only part).

An import inside a function still closes a circle: it runs later, but the two modules then need each other to
load, and neither can be read or changed alone. The scan reads every ``import`` and ``from ... import`` of every
module, at module level, under TYPE_CHECKING and inside functions, and keeps those naming another module of the
package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_rnnperf

PACKAGE = Path(pytest_rnnperf.__file__).parent
# Circles outside backends/ found when the scan was written; a new one fails, and a fixed one may leave the list.
KNOWN_ELSEWHERE: set[frozenset[str]] = set()


def package_modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of ``package`` by dotted name, with its file and whether it is a package's ``__init__``."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def imported_modules(name: str, path: Path, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports anywhere in its file (function bodies included)."""
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package ``level - 1`` steps above this module's own
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import name`` imports the submodule where one is called so, else the package itself
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    return (found & modules) - {name}


def import_circles(package: Path) -> list[frozenset[str]]:
    """The groups of modules of ``package`` that import each other, directly or through others (Tarjan's SCCs)."""
    modules = package_modules(package)
    graph = {name: imported_modules(name, path, is_package, set(modules))
             for name, (path, is_package) in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[frozenset[str]] = []

    def visit(module: str) -> None:
        """Tarjan's depth-first step: a module whose lowest reachable index is its own closes a group."""
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                circles.append(frozenset(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_the_scan_finds_a_circle_closed_by_an_import_inside_a_function(tmp_path: Path) -> None:
    """Two modules that reach each other only through a function-local import still form a circle."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import g\n    return g\n")
    (package / "c.py").write_text("def g():\n    from . import a\n    return a\n")
    (package / "d.py").write_text("import pkg.a\n")
    assert import_circles(package) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]


def test_no_import_circle_runs_through_the_backends() -> None:
    """Framework backends and their helpers import one way: shared modules never reach back into a backend."""
    through_backends = [sorted(c) for c in import_circles(PACKAGE)
                        if any(m.startswith("pytest_rnnperf.backends") for m in c)]
    assert through_backends == []


def test_no_new_import_circle_anywhere_in_the_package() -> None:
    """Outside backends/ only the circles known when the scan was written remain."""
    assert [sorted(c) for c in import_circles(PACKAGE) if c not in KNOWN_ELSEWHERE] == []
