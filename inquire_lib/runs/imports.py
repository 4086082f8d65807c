"""The library's import graph, read from its source with `ast`: what the import-cycle check walks, and what the
data's content key follows to find the code that makes the data (`data.benchmark.generator_modules`).

Every import counts, at module level or inside a function (a lazy import still ties the two modules together),
and `from pkg import name` counts as importing `pkg.name` when that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (a folder under `root`) by dotted name; a package by its `__init__.py`."""
    out = {}
    for path in sorted((Path(root) / package).rglob("*.py")):
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
    origin = import_origin(node, module, is_package)
    return [origin] + [f"{origin}.{alias.name}" for alias in node.names]


def import_origin(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The dotted module a `from ... import` statement of `module` imports from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    # `from . import x` in a package's __init__ is relative to the package itself
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (anywhere in its source)."""
    modules = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = {t for node in ast.walk(tree) for t in _imported(node, name, is_package) if t in modules}
    return graph


def reachable(graph: dict[str, set[str]], start: str, within=lambda module: True) -> set[str]:
    """`start` and every module it reaches through imports, following only the modules `within` keeps."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(t for t in graph.get(name, ()) if within(t))
    return seen


def code_modules(package_dir: Path, starts: tuple[str, ...], rooms: tuple[str, ...]) -> tuple[str, ...]:
    """`starts` (dotted names below the package, e.g. "evaluation.steps") and every module they reach through
    imports inside the package's `rooms` (its first-level sub-packages, e.g. "world"): the code a computation
    runs, read from the source, so a new import is followed without a list to keep."""
    package_dir = Path(package_dir)
    name = package_dir.name
    kept = {f"{name}.{room}" for room in rooms}
    within = lambda module: ".".join(module.split(".")[:2]) in kept  # noqa: E731
    graph = import_graph(package_dir.parent, name)
    found: set[str] = set()
    for start in starts:
        found |= reachable(graph, f"{name}.{start}", within)
    return tuple(sorted(found))


def module_file(package_dir: Path, module: str) -> Path:
    """The source file of a dotted module name of the package at `package_dir`."""
    path = Path(package_dir).joinpath(*module.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
