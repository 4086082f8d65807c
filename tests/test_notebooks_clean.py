"""Notebooks in git are sources: no outputs, no execution counts, one literal `parameters` cell."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"{path.name}: cell {i} has outputs (run `make strip`)")
        if cell.get("execution_count") is not None:
            problems.append(f"{path.name}: cell {i} has execution_count {cell.execution_count}")
    params = [(i, c) for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(params) != 1:
        problems.append(f"{path.name}: {len(params)} cells tagged 'parameters', expected exactly 1")
        return problems
    i, cell = params[0]
    if cell.cell_type != "code" or not re.search(r"^PROFILE\s*=", cell.source, re.M):
        problems.append(f"{path.name}: parameters cell {i} must be code assigning PROFILE = ...")
        return problems
    # papermill overrides parameters by re-assigning them: only plain `NAME = literal` lines work
    for stmt in ast.parse(cell.source).body:
        try:
            ok = isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)
            ast.literal_eval(stmt.value) if ok else None
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"{path.name}: parameters cell {i} line {stmt.lineno} is not NAME = literal")
    return problems


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


def test_notebooks_are_clean_and_parameterised():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"
    problems = [p for path in NOTEBOOKS for p in _problems(path)]
    assert problems == []
