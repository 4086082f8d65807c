"""Clear outputs, execution counts and run metadata from notebooks, so git holds only sources.

Usage: python tools/strip_notebooks.py [--check] [NOTEBOOK ...]   (default: every notebooks/**/*.ipynb)
The notebooks are the source students edit (in JupyterLab or any editor); a stripped notebook is
written exactly as Jupyter writes it (nbformat, indent 1), so a saved edit shows as that cell only.
With --check nothing is written; the exit status is 1 when some notebook would change.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat

REPO_ROOT = Path(__file__).resolve().parents[1]
# Cell metadata that an execution or an editor session adds; tags and the rest are kept.
VOLATILE_CELL_KEYS = ("execution", "papermill", "collapsed", "scrolled", "ExecuteTime")
VOLATILE_NOTEBOOK_KEYS = ("papermill", "widgets", "varInspector")


def strip_notebook(nb: nbformat.NotebookNode) -> bool:
    """Clear outputs, execution counts and volatile metadata of nb in place; True if anything changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code":
            if cell.get("outputs"):
                cell.outputs = []
                changed = True
            if cell.get("execution_count") is not None:
                cell.execution_count = None
                changed = True
        for key in VOLATILE_CELL_KEYS:
            if key in cell.get("metadata", {}):
                del cell.metadata[key]
                changed = True
    for key in VOLATILE_NOTEBOOK_KEYS:
        if key in nb.metadata:
            del nb.metadata[key]
            changed = True
    # a kernel fills in its Python version, mimetype, ...: keep only the language's name
    info = nb.metadata.get("language_info")
    if info is not None and set(info) != {"name"}:
        nb.metadata["language_info"] = {"name": info.get("name", "python")}
        changed = True
    return changed


def jupyter_text(nb: nbformat.NotebookNode) -> str:
    """The file text Jupyter writes for nb (what `nbformat.write` produces)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def strip_file(path: Path, check: bool = False) -> bool:
    """Strip one notebook file (atomically: temp file then rename) unless check; True if it was not clean."""
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    changed = strip_notebook(nb)
    changed = changed or text != jupyter_text(nb)  # e.g. hand-edited JSON laid out otherwise
    if changed and not check:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(jupyter_text(nb))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return changed


def notebooks() -> list[Path]:
    """Every notebook under notebooks/ (the numbered ones and the ablation point), checkpoints excluded."""
    return sorted(p for p in (REPO_ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, do not write; exit 1 if unclean")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.paths or notebooks()
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 1
    unclean = 0
    for path in paths:
        if strip_file(path, check=args.check):
            unclean += 1
            print(f"{'would strip' if args.check else 'stripped'} {path}")
    return 1 if (args.check and unclean) else 0


if __name__ == "__main__":
    sys.exit(main())
