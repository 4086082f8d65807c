"""List the import cycles of a package, read from the source (`inquire_lib.runs.imports.import_graph`).

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
import sys
from pathlib import Path

from inquire_lib.runs.imports import import_graph

REPO = Path(__file__).resolve().parents[1]


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
