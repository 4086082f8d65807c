"""Which settings each function of `inquire_lib` reads, from the source (`ast`): the fields it reads off a settings
parameter, and the library functions it hands that parameter on to.

A parameter annotated with one stage's settings class (`profiles.SETTINGS`) may read only that class's fields and
methods, and hand itself on only where the callee's parameter takes that class or one of its bases;
`tests/test_settings_reads.py` holds the library to it. A parameter that is the whole profile (annotated `Profile`,
or named `profile` unannotated) is told the narrowest settings class it could take.

    python tools/settings_reads.py           # the violations, then each whole-profile parameter a class could replace
    python tools/settings_reads.py --apply   # write those narrower annotations (repeat until none is left)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "inquire_lib"
sys.path.insert(0, str(REPO))

from inquire_lib.runs.imports import import_origin, module_names  # noqa: E402


@dataclasses.dataclass
class Param:
    """One settings parameter of one function."""

    module: str
    function: str
    name: str
    annotation: str  # the class name, "Profile", or "" (a `profile` parameter without an annotation)
    line: int
    col: int
    reads: set[str] = dataclasses.field(default_factory=set)
    passes: list[tuple[str, int | str, int]] = dataclasses.field(
        default_factory=list
    )  # (callee, position or key, line)
    escapes: list[int] = dataclasses.field(default_factory=list)  # lines where it goes anywhere else


def settings_classes() -> dict[str, type]:
    from inquire_lib.profiles import SETTINGS, Profile

    return {c.__name__: c for c in (*SETTINGS, Profile)}


class _Module:
    def __init__(self, name: str, path: Path):
        self.name = name
        self.tree = ast.parse(path.read_text(), filename=str(path))
        package = path.name == "__init__.py"
        self.imported: dict[str, str] = {}  # local name -> "module:function" or "module" (a module alias)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                src = import_origin(node, self.name, package)
                for a in node.names:
                    self.imported[a.asname or a.name] = f"{src}:{a.name}"
        self.defs = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _annotation_name(arg: ast.arg) -> str:
    """The settings class a parameter is annotated with: the annotation, or the part of a union (`str | Named`)
    that names a class ("" without an annotation)."""
    if arg.annotation is None:
        return ""
    parts = [p.strip() for p in ast.unparse(arg.annotation).strip("'\"").split("|")]
    named = [p for p in parts if p.endswith("Settings") or p in ("Profile", "Named")]
    return named[0] if named else " | ".join(parts)


def _params(fn) -> list[ast.arg]:
    return [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]


class Library:
    """Every module of the package, its top-level functions and their settings parameters."""

    def __init__(self, package: Path = PACKAGE):
        self.classes = settings_classes()
        self.modules = {n: _Module(n, p) for n, p in module_names(package.parent, package.name).items()}
        self.params: list[Param] = []
        for mod in self.modules.values():
            for fn in mod.defs.values():
                for arg in _params(fn):
                    note = _annotation_name(arg)
                    if note in self.classes or (arg.arg == "profile" and not note) or note == "Profile":
                        self.params.append(self._uses(mod, fn, arg, note))

    def function(self, module: str, name: str):
        """The top-level def `name` seen from `module` (its own, or imported from a library module), else None."""
        mod = self.modules.get(module)
        if mod is None:
            return None
        if name in mod.defs:
            return module, mod.defs[name]
        target = mod.imported.get(name)
        if target is None:
            return None
        src, _, real = target.partition(":")
        if src in self.modules and real in self.modules[src].defs:
            return src, self.modules[src].defs[real]
        if src in self.modules and real in self.modules[src].imported:  # re-exported by a package
            return self.function(src, real)
        return None

    def _callee(self, mod: _Module, func: ast.expr):
        if isinstance(func, ast.Name):
            return self.function(mod.name, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            target = mod.imported.get(func.value.id, "")
            src, _, real = target.partition(":")
            module = f"{src}.{real}" if src else ""
            if module in self.modules:
                return self.function(module, func.attr)
        return None

    def _uses(self, mod: _Module, fn, arg: ast.arg, note: str) -> Param:
        p = Param(mod.name, fn.name, arg.arg, note or "", arg.lineno, arg.col_offset)
        handled: set[int] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == arg.arg:
                p.reads.add(node.attr)
                handled.add(id(node.value))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                handled.update(id(a) for a in node.args[:1])  # a type test reads nothing
            elif isinstance(node, ast.Call):
                given = [(i, a) for i, a in enumerate(node.args)] + [(k.arg, k.value) for k in node.keywords]
                for where, value in given:
                    if isinstance(value, ast.Name) and value.id == arg.arg:
                        callee = self._callee(mod, node.func)
                        if callee is not None:
                            p.passes.append((f"{callee[0]}:{callee[1].name}", where, node.lineno))
                            handled.add(id(value))
        takes_text = arg.annotation is not None and "str" in ast.unparse(arg.annotation).split(" | ")
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id == arg.arg and isinstance(node.ctx, ast.Load):
                if id(node) not in handled and not takes_text:  # a `str | Named` goes on as the text it may be
                    p.escapes.append(node.lineno)
        return p

    def callee_class(self, callee: str, where: int | str) -> str:
        """The class the callee's parameter at `where` (a position or a keyword) is annotated with ("Profile"
        when it takes the whole profile or cannot be told)."""
        module, _, name = callee.partition(":")
        fn = self.modules[module].defs[name]
        args = _params(fn)
        arg = args[where] if isinstance(where, int) and where < len(fn.args.posonlyargs + fn.args.args) else None
        if isinstance(where, str):
            arg = next((a for a in args if a.arg == where), None)
        note = _annotation_name(arg) if arg is not None else ""
        return note if note in self.classes and note != "Profile" else "Profile"

    def fits(self, p: Param, cls: str) -> list[str]:
        """Why parameter `p` could not be `cls`: a read the class lacks, a hand-on to a wider parameter, or a use
        that hands it anywhere else; empty when it fits."""
        c = self.classes[cls]
        fields = {f.name for f in dataclasses.fields(c)}
        out = [f"reads {a}" for a in sorted(p.reads) if a not in fields and not hasattr(c, a)]
        for callee, where, line in p.passes:
            need = self.classes[self.callee_class(callee, where)]
            if not issubclass(c, need):
                out.append(f"line {line}: hands it to {callee}, which takes {need.__name__}")
        out += [f"line {line}: hands it on beyond the library's functions" for line in p.escapes]
        return out

    def narrowest(self, p: Param) -> str | None:
        """The settings class with the fewest fields that `p` fits, if any fits; None for a parameter that is
        neither read nor handed on (a registry's uniform signature: nothing says which class it is)."""
        if not p.reads and not p.passes and not p.escapes:
            return None
        fitting = [n for n, c in self.classes.items() if n != "Profile" and not self.fits(p, n)]
        return min(fitting, key=lambda n: len(dataclasses.fields(self.classes[n])), default=None)


def violations(lib: Library) -> list[str]:
    """'module:function(param: Class): why' for each parameter annotated with a settings class it does not fit."""
    return [
        f"{p.module}:{p.function}({p.name}: {p.annotation}): {why}"
        for p in lib.params
        if p.annotation not in ("", "Profile")
        for why in lib.fits(p, p.annotation)
    ]


def candidates(lib: Library):
    """(parameter, the narrower class it fits) for the whole profile, or a class of which a base fits too (after
    a field moved to a shared class)."""
    for p in lib.params:
        cls = lib.narrowest(p)
        wider = lib.classes.get(p.annotation or "Profile")
        if cls and wider is not None and cls != p.annotation and issubclass(wider, lib.classes[cls]):
            yield p, cls


def apply(lib: Library) -> int:
    """Annotate each parameter that a narrower settings class fits (the whole profile, or a class a base of which
    fits) with the narrowest; the module imports it."""
    changed = 0
    by_file: dict[Path, list[tuple[Param, str]]] = {}
    for p, cls in candidates(lib):
        path = REPO / (p.module.replace(".", "/") + ".py")
        path = path if path.exists() else REPO / p.module.replace(".", "/") / "__init__.py"
        by_file.setdefault(path, []).append((p, cls))
    for path, items in by_file.items():
        lines = path.read_text().splitlines(keepends=True)
        needed = set()
        for p, cls in items:
            text = lines[p.line - 1]
            old = f"{p.name}: {p.annotation}" if p.annotation else p.name
            if text[p.col : p.col + len(old)] == old:
                lines[p.line - 1] = text[: p.col] + f"{p.name}: {cls}" + text[p.col + len(old) :]
                needed.add(cls)
                changed += 1
        text = "".join(lines)
        for cls in sorted(needed):
            text = _import(text, cls, path)
        path.write_text(text)
    return changed


def _import(text: str, cls: str, path: Path) -> str:
    """`text` with `cls` imported from the profiles package beside its `Profile` import (or a new import)."""
    depth = len(path.relative_to(PACKAGE).parts) - 1
    src = "." * (depth + 1) + "profiles"
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(f"from {src} import ") and "(" not in line:
            names = [n.strip() for n in line.split(" import ", 1)[1].split(",")]
            if cls not in names:
                order = sorted([*names, cls], key=lambda n: (not n.isupper(), n[0].islower(), n))  # as isort orders
                lines[i] = f"from {src} import {', '.join(order)}\n"
            return "".join(lines)
    at = next(i for i, line in enumerate(lines) if line.startswith("from __future__"))
    lines.insert(at + 2, f"from {src} import {cls}\n")
    return "".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apply", action="store_true", help="annotate the parameters a narrower class fits")
    args = ap.parse_args(argv)
    lib = Library()
    bad = violations(lib)
    print("\n".join(bad) or "no settings parameter reads beyond its class")
    if args.apply:
        print(f"{apply(lib)} parameter(s) narrowed")
        return 0
    for p, cls in candidates(lib):
        print(f"{p.module}:{p.function}({p.name}: {p.annotation or 'Profile'}) could take {cls}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
