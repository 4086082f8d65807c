"""tools/strip_notebooks.py clears outputs and run metadata and keeps sources and tags."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

_spec = importlib.util.spec_from_file_location(
    "strip_notebooks", Path(__file__).resolve().parents[1] / "tools" / "strip_notebooks.py"
)
strip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(strip)


def _executed(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"PROFILE": "smoke"}}
    params = nbformat.v4.new_code_cell('PROFILE = "cpu"', execution_count=1)
    params.metadata["tags"] = ["parameters"]
    params.metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    work = nbformat.v4.new_code_cell(
        "print(1)", execution_count=2, outputs=[nbformat.v4.new_output("stream", text="1\n")]
    )
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


def test_a_jupyterlab_save_of_one_markdown_edit_changes_that_cell_only(tmp_path: Path):
    """Edit a markdown cell of notebook 03 and save it as JupyterLab does (nbformat, indent 1), with
    what a kernel session adds (language details, outputs, execution counts and timings); after
    stripping, the file differs from the committed one in that cell's source lines alone."""
    import difflib

    source = Path(__file__).resolve().parents[1] / "notebooks" / "03_grpo_action_level.ipynb"
    before = source.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    i = next(k for k, c in enumerate(nb.cells) if c.cell_type == "markdown" and k > 2)
    old_lines = nb.cells[i].source.splitlines()
    nb.cells[i].source += "\n\nA sentence a student added."
    nb.metadata["language_info"] = {
        "name": "python",
        "version": "3.11.2",
        "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3},
    }
    code = next(c for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))
    code.execution_count = 3
    code.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    code.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00"}
    edited = tmp_path / source.name
    with open(edited, "w", encoding="utf-8") as fh:
        nbformat.write(nb, fh)  # what JupyterLab's save does
    assert strip.main([str(edited)]) == 0
    after = edited.read_text(encoding="utf-8")
    diff = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if not line.startswith(("+++", "---"))
    ]
    # one hunk: the cell's last source line gains a newline, two lines follow; nothing else moves
    last = old_lines[-1].replace('"', '\\"')
    assert diff[1:] == [f'-    "{last}"', f'+    "{last}\\n",', '+    "\\n",', '+    "A sentence a student added."'], (
        diff
    )
    assert len([line for line in diff if line.startswith("@@")]) == 1
