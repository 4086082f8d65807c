"""No import cycles among inquire_lib's modules or its packages (`tools/import_cycles.py`, read from the
source: lazy imports inside functions count), and the tool finds a cycle where there is one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import import_cycles  # noqa: E402


@pytest.mark.parametrize("level", ["module", "package"])
def test_the_library_has_no_import_cycle(level):
    assert import_cycles.find_cycles(REPO, "inquire_lib", level) == []


def test_the_script_prints_none_and_exits_0():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "import_cycles.py")], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "no import cycles\n"), done.stderr


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    _package(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/a.py": "from .b import g\n\ndef f():\n    return g()\n",
            "toy/b.py": "def g():\n    from toy.a import f  # inside a function, still a cycle\n    return f\n",
            "toy/c.py": "from . import a\n",
            "toy/sub/__init__.py": "",
            "toy/sub/d.py": "from ..c import a\n",
            "toy/e.py": "import toy.sub.d\n",
        },
    )
    assert import_cycles.find_cycles(tmp_path, "toy") == [["toy.a", "toy.b"]]
    # c, d and e import along one direction only: no cycle between the packages either
    assert import_cycles.find_cycles(tmp_path, "toy", "package") == [["toy.a", "toy.b"]]
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "import_cycles.py"), "--root", str(tmp_path), "--package", "toy"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (1, "toy.a <-> toy.b\n")


def test_a_cycle_between_packages_is_found_where_modules_have_none(tmp_path):
    _package(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/low/__init__.py": "",
            "toy/low/x.py": "from ..high.z import VALUE\n",
            "toy/low/y.py": "",
            "toy/high/__init__.py": "",
            "toy/high/z.py": "VALUE = 1\n",
            "toy/high/w.py": "from toy.low import y\n",
        },
    )
    assert import_cycles.find_cycles(tmp_path, "toy") == []
    assert import_cycles.find_cycles(tmp_path, "toy", "package") == [["toy.high", "toy.low"]]


def test_a_self_import_and_a_longer_cycle(tmp_path):
    _package(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/a.py": "import toy.a\nfrom toy import b\n",
            "toy/b.py": "from toy.c import x\n",
            "toy/c.py": "x = 1\n\ndef h():\n    from .a import nothing\n",
        },
    )
    assert import_cycles.find_cycles(tmp_path, "toy") == [["toy.a", "toy.b", "toy.c"]]


def test_reachable_follows_imports_only_through_the_modules_kept(tmp_path):
    from inquire_lib.runs.imports import import_graph, reachable

    _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/make/__init__.py": "",
            "pkg/make/a.py": "from . import b\nfrom ..read import c\n",
            "pkg/make/b.py": "def f():\n    from .d import g\n",
            "pkg/make/d.py": "g = 1\n",
            "pkg/read/__init__.py": "",
            "pkg/read/c.py": "from ..make import e\n",
            "pkg/make/e.py": "",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.make.a"] == {"pkg.make", "pkg.make.b", "pkg.read", "pkg.read.c"}
    kept = reachable(graph, "pkg.make.a", lambda m: m.startswith("pkg.make."))
    # the lazy import counts; e is reached only through read, which is not followed
    assert kept == {"pkg.make.a", "pkg.make.b", "pkg.make.d"}
    assert reachable(graph, "pkg.make.a") >= kept | {"pkg.read.c", "pkg.make.e"}
