"""List the import cycles of a package, read from the source with `ast`.

Every import counts, at module level or inside a function (a lazy import still ties the two modules
together), and `from pkg import name` counts as importing `pkg.name` when that is a module. A cycle is
a strongly connected set of two or more modules (or one module importing itself).

    python tools/import_cycles.py                      # the modules of inquire_lib
    python tools/import_cycles.py --level package      # its sub-packages (inquire_lib.world, ...)
    python tools/import_cycles.py --root DIR --package NAME

Prints one cycle per line, or "no import cycles"; exits 1 when there is a cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (a folder under `root`) by dotted name; a package by its `__init__.py`."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement of `module` may load."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        # `from . import x` in a package's __init__ is relative to the package itself
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    return [origin] + [f"{origin}.{alias.name}" for alias in node.names]


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (anywhere in its source)."""
    modules = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package):
                if target in modules:
                    targets.add(target)
        graph[name] = targets
    return graph


def collapse(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph between the direct children of `package` (`inquire_lib.world`, `inquire_lib.pipeline`,
    ...); imports inside one child are dropped."""
    depth = package.count(".") + 2

    def child(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == package:
            continue
        mine = out.setdefault(child(module), set())
        mine.update(child(t) for t in targets if t != package and child(t) != child(module))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with a cycle (Tarjan's algorithm), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def find_cycles(root: Path = REPO, package: str = "inquire_lib", level: str = "module") -> list[list[str]]:
    graph = import_graph(Path(root), package)
    return cycles(collapse(graph, package) if level == "package" else graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(REPO), help="the folder holding the package")
    parser.add_argument("--package", default="inquire_lib")
    parser.add_argument("--level", choices=("module", "package"), default="module")
    args = parser.parse_args(argv)
    found = find_cycles(Path(args.root), args.package, args.level)
    for component in found:
        print(" <-> ".join(component))
    if not found:
        print("no import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
