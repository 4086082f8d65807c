"""The numbers of the house's structure, counted on the tree: settings fields, signatures that take the whole
profile, lines of the settings code and each recipe, the size of `assets/`, and lines under `docs/` by kind.

    python tools/structure_stats.py            # this tree, as a Markdown table
    python tools/structure_stats.py --json     # the same numbers as JSON

Read from the source with `ast` (nothing is imported), so it counts an old checkout as well as this one.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _profile_fields(source: Path) -> int:
    """Annotated fields of the `Profile` class (its settings), read from `profiles.py`."""
    tree = ast.parse(source.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Profile":
            return sum(isinstance(n, ast.AnnAssign) for n in node.body)
    return 0


def _takes_profile(package: Path) -> tuple[int, int]:
    """(signatures with a parameter named `profile`, files holding one)."""
    count, files = 0, 0
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        here = sum(
            any(a.arg == "profile" for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs])
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        )
        count += here
        files += bool(here)
    return count, files


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def stats(root: Path = REPO) -> dict:
    package = root / "inquire_lib"
    recipes = sorted((package / "recipes").glob("*.yaml"))
    docs = sorted((root / "docs").rglob("*.md"))
    lab = [p for p in docs if "lab" in p.relative_to(root / "docs").parts]
    signatures, files = _takes_profile(package)
    return {
        "profile_fields": _profile_fields(package / "profiles.py"),
        "signatures_taking_the_profile": signatures,
        "files_with_such_signatures": files,
        "settings_code_lines": _lines(package / "profiles.py"),
        "recipe_lines": {p.stem: _lines(p) for p in recipes},
        "assets_bytes": sum(p.stat().st_size for p in (root / "assets").rglob("*") if p.is_file()),
        "docs_lines": {
            "lab": sum(_lines(p) for p in lab),
            "reference": sum(_lines(p) for p in docs if p not in lab),
        },
    }


def table(s: dict) -> str:
    recipes = ", ".join(f"{k} {v}" for k, v in s["recipe_lines"].items())
    rows = [
        ("`Profile` fields", s["profile_fields"]),
        (
            "signatures taking the profile",
            f"{s['signatures_taking_the_profile']} in {s['files_with_such_signatures']} files",
        ),
        ("lines of `profiles.py`", s["settings_code_lines"]),
        ("lines of each recipe", recipes or "none"),
        ("`assets/`", f"{s['assets_bytes'] / 1e6:.1f} MB"),
        ("lines under `docs/`: lab / reference", f"{s['docs_lines']['lab']} / {s['docs_lines']['reference']}"),
    ]
    return "\n".join(["| | this tree |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(REPO), help="the checkout to count")
    parser.add_argument("--json", action="store_true", help="print JSON, not a Markdown table")
    args = parser.parse_args(argv)
    s = stats(Path(args.root))
    print(json.dumps(s, indent=1) if args.json else table(s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
