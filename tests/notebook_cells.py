"""What the tests read from the notebooks' own cells."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"


def closing_subject(path: Path) -> str:
    """The subject a notebook's last cell asks `pipeline.closing.show` to summarise."""
    last = nbformat.read(path, as_version=4).cells[-1]
    found = re.fullmatch(r'pipeline\.closing\.show\(path, "(\w+)"\)', last.source) if last.cell_type == "code" else None
    assert found, f"{path.name}: the last cell is not pipeline.closing.show(path, SUBJECT)"
    return found.group(1)
