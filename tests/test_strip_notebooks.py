"""tools/strip_notebooks.py clears outputs and run metadata and keeps sources and tags."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

_spec = importlib.util.spec_from_file_location(
    "strip_notebooks", Path(__file__).resolve().parents[1] / "tools" / "strip_notebooks.py")
strip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(strip)


def _executed(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"PROFILE": "smoke"}}
    params = nbformat.v4.new_code_cell('PROFILE = "cpu"', execution_count=1)
    params.metadata["tags"] = ["parameters"]
    params.metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    work = nbformat.v4.new_code_cell("print(1)", execution_count=2,
                                     outputs=[nbformat.v4.new_output("stream", text="1\n")])
    nb.cells = [nbformat.v4.new_markdown_cell("# title"), params, work]
    nbformat.write(nb, path)
    return path


def test_strip_clears_outputs_and_keeps_sources(tmp_path: Path, capsys):
    path = _executed(tmp_path / "01_x.ipynb")
    assert strip.main(["--check", str(path)]) == 1
    assert "would strip" in capsys.readouterr().out
    assert nbformat.read(path, as_version=4).cells[2].outputs  # --check wrote nothing

    assert strip.main([str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert [c.source for c in nb.cells] == ["# title", 'PROFILE = "cpu"', "print(1)"]
    assert [c.get("execution_count") for c in nb.cells[1:]] == [None, None]
    assert [c.outputs for c in nb.cells[1:]] == [[], []]
    assert nb.cells[1].metadata == {"tags": ["parameters"]}
    assert "papermill" not in nb.metadata
    assert strip.main(["--check", str(path)]) == 0  # now clean
    assert sorted(p.name for p in tmp_path.iterdir()) == ["01_x.ipynb"]
