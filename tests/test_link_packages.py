"""tools/link_packages.py links a distribution and what it requires (extras and markers followed) into a venv."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "link_packages", Path(__file__).resolve().parents[1] / "tools" / "link_packages.py"
)
link = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(link)


def _install(site: Path, name: str, version: str, requires: list[str], files: dict[str, str]) -> None:
    """A distribution as pip leaves it: its files, and a .dist-info whose RECORD lists them."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in record))


@pytest.fixture
def venvs(tmp_path):
    source, into = tmp_path / "a", tmp_path / "b"
    site = link.site_packages(source)
    _install(site, "top", "2.0", ["middle[gpu]", 'never; python_version < "3"'], {"top/__init__.py": "t"})
    _install(
        site,
        "middle",
        "1.0",
        ['leaf; extra == "gpu"', 'unused; extra == "docs"'],
        {"middle.py": "m", "__pycache__/middle.cpython-311.pyc": "bytecode", "../../../bin/middle-cli": "#!x"},
    )
    _install(site, "leaf", "0.3", [], {"leaf/core.so": "l"})
    _install(site, "unused", "9.9", [], {"unused.py": "u"})
    _install(site, "never", "1.0", [], {"never.py": "n"})
    _install(link.site_packages(into), "leaf", "0.1", [], {"leaf/core.so": "old"})
    return source, into


def _names(dists) -> list[str]:
    return [d.metadata["Name"] for d in dists]


def test_the_closure_follows_requested_extras_and_skips_markers_that_do_not_hold(venvs):
    source, _ = venvs
    assert _names(link.required_closure(link.site_packages(source), ["top==2.0"])) == ["leaf", "middle", "top"]


def test_a_pinned_root_at_another_version_or_missing_is_one_line(venvs):
    source, _ = venvs
    with pytest.raises(SystemExit, match=r"top==3\.0 is wanted but 2\.0 is installed"):
        link.required_closure(link.site_packages(source), ["top==3.0"])
    with pytest.raises(SystemExit, match="absent is not installed there"):
        link.required_closure(link.site_packages(source), ["absent"])


def test_files_are_hardlinked_and_what_the_venv_has_is_left_to_pip(venvs, capsys):
    source, into = venvs
    assert link.main(["--from", str(source), "--into", str(into), "top==2.0"]) == 0
    assert "linked 6 files of 2 distributions" in capsys.readouterr().out
    src, dst = link.site_packages(source), link.site_packages(into)
    for rel in ("top/__init__.py", "middle.py", "middle-1.0.dist-info/METADATA", "top-2.0.dist-info/RECORD"):
        assert os.path.samefile(src / rel, dst / rel), rel
    # The venv's own leaf stays; bytecode and console scripts are not linked.
    assert (dst / "leaf/core.so").read_text() == "old"
    assert not (dst / "__pycache__").exists()
    assert not (into / "bin" / "middle-cli").exists()
    # A run stopped before middle's metadata: the next one links just that, and then nothing.
    for rel in ("middle-1.0.dist-info/METADATA", "middle-1.0.dist-info/RECORD"):
        (dst / rel).unlink()
    assert link.main(["--from", str(source), "--into", str(into), "top==2.0"]) == 0
    assert "linked 2 files of 1 distributions" in capsys.readouterr().out
    assert link.main(["--from", str(source), "--into", str(into), "top==2.0"]) == 0
    assert "linked 0 files of 0 distributions" in capsys.readouterr().out


def test_a_different_file_in_the_way_is_refused_naming_it(venvs):
    source, into = venvs
    clash = link.site_packages(into) / "middle.py"
    clash.write_text("someone else's")
    with pytest.raises(SystemExit, match="middle.py: exists and is not"):
        link.main(["--from", str(source), "--into", str(into), "top"])
    assert clash.read_text() == "someone else's"
