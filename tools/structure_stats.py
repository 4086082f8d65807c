"""The numbers of the house's structure, counted on the tree: settings fields per settings object, signatures
that take the whole profile or one stage's settings, lines of the settings code and each recipe, the size of `assets/`, and lines under `docs/` by kind.

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


def _settings_sources(package: Path) -> list[Path]:
    """The settings code: `profiles.py` in an older checkout, the `profiles/` package since."""
    folder = package / "profiles"
    return sorted(folder.glob("*.py")) if folder.is_dir() else [package / "profiles.py"]


def _settings_objects(package: Path) -> dict[str, int]:
    """Annotated fields of each settings class: `Profile` alone in an older checkout, else every class of the
    `profiles/` package that declares fields (one per stage, and the name)."""
    out = {}
    for path in _settings_sources(package):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, ast.AnnAssign) for b in node.body)
                if n:
                    out[node.name] = n
    return out


def _annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else ""


def _one_stage(note: str) -> bool:
    """An annotation naming one stage's settings class (`...Settings`, or `Named` for the name alone)."""
    return any(p.strip().endswith("Settings") or p.strip() == "Named" for p in note.split("|"))


def _takes_profile(package: Path) -> tuple[int, int, int]:
    """(signatures with a parameter that is the whole profile, files holding one, signatures with a parameter that
    is one stage's settings). The whole profile: annotated `Profile`, or named `profile` without an annotation naming
    a settings class; one stage's: annotated with a `...Settings` class or `Named`."""
    whole, files, narrow = 0, 0, 0
    for path in sorted(package.rglob("*.py")):
        here = 0
        for n in ast.walk(ast.parse(path.read_text())):
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]
            notes = [_annotation(a) for a in args]
            here += any("Profile" in t or (a.arg == "profile" and not _one_stage(t)) for a, t in zip(args, notes))
            narrow += any(_one_stage(t) and "Profile" not in t for t in notes)
        whole += here
        files += bool(here)
    return whole, files, narrow


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def stats(root: Path = REPO) -> dict:
    package = root / "inquire_lib"
    recipes = sorted((package / "recipes").glob("*.yaml"))
    docs = sorted((root / "docs").rglob("*.md"))
    lab = [p for p in docs if "lab" in p.relative_to(root / "docs").parts]
    signatures, files, narrow = _takes_profile(package)
    objects = _settings_objects(package)
    return {
        "profile_fields": sum(objects.values()),
        "settings_objects": objects,
        "signatures_taking_the_profile": signatures,
        "files_with_such_signatures": files,
        "signatures_taking_one_stages_settings": narrow,
        "settings_code_lines": sum(_lines(p) for p in _settings_sources(package)),
        "settings_module_lines": {p.stem: _lines(p) for p in _settings_sources(package)},
        "recipe_lines": {p.stem: _lines(p) for p in recipes},
        "assets_bytes": sum(p.stat().st_size for p in (root / "assets").rglob("*") if p.is_file()),
        "docs_lines": {
            "lab": sum(_lines(p) for p in lab),
            "reference": sum(_lines(p) for p in docs if p not in lab),
        },
    }


def table(s: dict) -> str:
    recipes = ", ".join(f"{k} {v}" for k, v in s["recipe_lines"].items())
    objects = ", ".join(f"{k} {v}" for k, v in s["settings_objects"].items())
    modules = ", ".join(f"{k} {v}" for k, v in s["settings_module_lines"].items())
    rows = [
        ("`Profile` fields", s["profile_fields"]),
        ("fields per settings object", objects or "none"),
        (
            "signatures taking the whole profile",
            f"{s['signatures_taking_the_profile']} in {s['files_with_such_signatures']} files",
        ),
        ("signatures taking one stage's settings", s["signatures_taking_one_stages_settings"]),
        ("lines of the settings code", f"{s['settings_code_lines']} ({modules})"),
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
