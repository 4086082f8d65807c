"""What we measure: every step and episode metric with its definition, read from the docstrings of the modules that
compute them (`evaluation.metrics`, `evaluation.episodes`), so a definition is written once, beside its code, and
shown where the notebooks first use it. The sources are parsed (`ast`), not imported: no torch here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd

EVALUATION = Path(__file__).resolve().parents[1] / "evaluation"
SOURCES = {"step": EVALUATION / "metrics.py", "episode": EVALUATION / "episodes.py"}
# a term opening a bullet, or a clause after "; ": a few words, an optional (alias), then a colon
_TERM = re.compile(r"^([A-Za-z][\w\- ]{0,40}?(?: \([^)]{1,30}\))?): ")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _bullets(doc: str) -> list[str]:
    """The docstring's "- " bullets, each with its indented continuation lines joined onto it."""
    out: list[str] = []
    inside = False
    for line in doc.splitlines():
        if line.startswith("- "):
            out.append(line[2:].strip())
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
        else:
            inside = False
    return out


def _terms(bullet: str) -> list[tuple[str, str]]:
    """(term, definition) of each metric a bullet defines: the first, and any clause after "; " that opens
    with a term of its own (a clause after a comma belongs to the definition before it)."""
    pieces: list[list[str]] = []
    for part in bullet.split("; "):
        found = _TERM.match(part)
        if found and (not pieces or not pieces[-1][1].endswith(",")):
            pieces.append([found.group(1), part[found.end() :]])
        elif pieces:
            pieces[-1][1] += "; " + part
    return [(t.strip(), d.strip().rstrip(";").strip()) for t, d in pieces]


def glossary() -> pd.DataFrame:
    """One row per metric: its level (step or episode), name and definition, in the order the modules give them."""
    rows = []
    for level, path in SOURCES.items():
        for bullet in _bullets(_docstring(path)):
            for term, definition in _terms(bullet):
                rows.append({"level": level, "metric": term, "definition": definition})
    return pd.DataFrame(rows, columns=["level", "metric", "definition"])
