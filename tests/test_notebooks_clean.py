"""Notebooks in git are the sources: no outputs, no execution counts, one literal `parameters` cell,
stored as Jupyter writes them, and all of one idiom (the `inquire_lib.pipeline` front door, a metrics
file named after the notebook)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat

from inquire_lib.profiles import DEFAULT_PROFILE, PROFILES
from inquire_lib.runs import notebooks as runs

sys.path.insert(0, str(Path(__file__).parent))
from notebook_cells import closing_subject  # noqa: E402

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
NUMBERED = [p for p in NOTEBOOKS if p.parent == NOTEBOOKS_DIR]


def _problems(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    problems = []
    written = nbformat.writes(nb)
    if text != (written if written.endswith("\n") else written + "\n"):
        problems.append(f"{path.name}: not laid out as Jupyter writes it (run `make strip`)")
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


def test_all_seven_notebooks_and_the_ablation_point_are_checked():
    assert [p.name[:2] for p in NUMBERED] == ["01", "02", "03", "04", "05", "06", "07"]
    assert NOTEBOOKS_DIR / "ablations" / "ablation_point.ipynb" in NOTEBOOKS


def test_one_idiom_one_front_door():
    """Every notebook reaches the library through `inquire_lib.pipeline` only, takes its profile from
    `pipeline.profile_of` with its checked OVERRIDES (declared in the parameters cell, an empty dict
    by default), and the numbered ones write `metrics/<notebook>.json` under their own name."""
    for path in NOTEBOOKS:
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        imports = re.findall(r"^\s*(?:from|import)\s+(inquire_lib\S*)", code, re.M)
        assert imports and set(imports) <= {"inquire_lib", "inquire_lib.pipeline"}, (path.name, imports)
        assert "from inquire_lib import pipeline" in code, path.name
        assert "profile = pipeline.profile_of(PROFILE, SEED, OVERRIDES)" in code, path.name
        assert runs.declared_parameters(path) >= {"PROFILE", "SEED", "OVERRIDES"}, path.name
        params = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        assert re.search(r"^OVERRIDES = \{\}", params.source, re.M), path.name
        assert re.search(rf"^PROFILE = '{DEFAULT_PROFILE}'", params.source, re.M), path.name
        assert "get_profile" not in code and "write_json_atomic" not in code, path.name
        if path in NUMBERED:
            assert f'NOTEBOOK = "{path.stem}"' in code, path.name
            assert code.count("pipeline.write_notebook_metrics(profile, NOTEBOOK,") == 1, path.name
            figures = re.findall(r"pipeline\.show_fig\(", code)
            assert figures and ".save(" not in code and "save_fig(" not in code, path.name


def test_one_default_profile_everywhere():
    """`make run`, `inquire run` and every notebook opened by hand use the same profile when none is named."""
    from inquire_lib.cli import _parser

    assert DEFAULT_PROFILE in PROFILES
    makefile = (NOTEBOOKS_DIR.parent / "Makefile").read_text()
    assert re.findall(r"^PROFILE \?= (\S+)$", makefile, re.M) == [DEFAULT_PROFILE]
    assert _parser().parse_args(["run"]).profile == DEFAULT_PROFILE
    for path in NOTEBOOKS:
        params = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        assert re.findall(r"^PROFILE = '(\w+)'", params.source, re.M) == [DEFAULT_PROFILE], path.name


def test_every_numbered_notebook_ends_on_its_closing_summary():
    """The last cell renders the headline numbers and what they show from the metrics file just written, each
    notebook about a subject of its own that the library has a summary for."""
    from inquire_lib.viz.closing import SUMMARIES

    subjects = [closing_subject(path) for path in NUMBERED]
    assert sorted(subjects) == sorted(SUMMARIES) and len(set(subjects)) == len(subjects)
    for path in NUMBERED:
        cells = nbformat.read(path, as_version=4).cells
        assert cells[-2].cell_type == "markdown" and cells[-2].source.startswith("## What this run measured"), path.name
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        assert "path = pipeline.write_notebook_metrics(profile, NOTEBOOK," in code, path.name


def test_the_front_door_hands_on_only_what_a_notebook_calls():
    """Every name `pipeline` re-exports from elsewhere in the library is used by a notebook, as `pipeline.NAME`
    or imported from it; what `pipeline` defines itself is its own."""
    import types

    from inquire_lib import pipeline

    code = "\n".join(
        cell.source for p in NOTEBOOKS for cell in nbformat.read(p, as_version=4).cells if cell.cell_type == "code"
    )
    imported = {
        name.strip()
        for m in re.finditer(r"from inquire_lib\.pipeline import ([^\n]+)", code)
        for name in m.group(1).split(",")
    }
    for name in pipeline.__all__:
        obj = getattr(pipeline, name)
        own = not isinstance(obj, types.ModuleType) and getattr(obj, "__module__", None) == "inquire_lib.pipeline"
        assert own or name in imported or re.search(rf"\bpipeline\.{name}\b", code), name
