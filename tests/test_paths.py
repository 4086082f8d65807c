"""One home for locations and safe writes: roots and their overrides, atomic files and folders."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from inquire_lib.profiles import get_profile
from inquire_lib.runs import paths


def test_roots_follow_their_variable_and_default_to_the_repo(monkeypatch, tmp_path):
    for folder, (variable, default) in paths.FOLDERS.items():
        monkeypatch.delenv(variable, raising=False)
        assert paths.root(folder) == paths.REPO_ROOT / default
        monkeypatch.setenv(variable, str(tmp_path / folder))
        assert paths.root(folder) == tmp_path / folder
        monkeypatch.setenv(variable, "relative/x")  # relative: from the repo root, not the cwd
        assert paths.root(folder) == paths.REPO_ROOT / "relative" / "x"
        assert paths.root(folder, tmp_path / "given") == tmp_path / "given"  # an explicit root wins


def test_profile_folders(monkeypatch, tmp_path):
    for variable, _ in paths.FOLDERS.values():
        monkeypatch.setenv(variable, str(tmp_path / variable))
    smoke = get_profile("smoke")
    assert paths.cache_dir() == tmp_path / "INQUIRE_CACHE"
    assert paths.artifacts_dir(smoke) == paths.artifacts_dir("smoke") == tmp_path / "INQUIRE_ARTIFACTS" / "smoke"
    monkeypatch.delenv(paths.RUN_NAME[0], raising=False)
    assert paths.run_dir(smoke) == tmp_path / "INQUIRE_RUNS" / "smoke" / "default"
    assert paths.run_dir("smoke", tmp_path / "other") == tmp_path / "other" / "smoke" / "default"
    assert paths.metrics_dir(smoke) == paths.run_dir(smoke) / "metrics"
    assert paths.eval_dir(smoke) == paths.run_dir(smoke) / "eval"
    figures = paths.figures_dir(smoke)
    assert figures == tmp_path / "INQUIRE_FIGURES" / "smoke" and figures.is_dir()


def test_write_json_atomic(tmp_path: Path):
    path = tmp_path / "sub" / "m.json"
    obj = {
        "a": (1, 2),
        "nan": math.nan,
        "inf": -math.inf,
        "np": np.float32(0.5),
        "arr": np.arange(3),
        "p": Path("x/y"),
        "n": None,
    }
    assert paths.write_json_atomic(path, obj) == path
    assert json.loads(path.read_text()) == {
        "a": [1, 2],
        "nan": None,
        "inf": None,
        "np": 0.5,
        "arr": [0, 1, 2],
        "p": "x/y",
        "n": None,
    }
    before = path.read_text()
    with pytest.raises(TypeError, match=r"\$\.bad.*object"):
        paths.write_json_atomic(path, {"bad": object()})
    assert path.read_text() == before  # the old file survives a failed write
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.json"]  # no temp files left


def test_atomic_path_mode_and_failure(tmp_path: Path):
    target = tmp_path / "f.png"
    with paths.atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"abc")
        assert not target.exists()  # nothing visible before the rename
    assert target.read_bytes() == b"abc"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(RuntimeError):
        with paths.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("writer failed")
    assert target.read_bytes() == b"abc" and sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]


def test_jsonl_and_atomic_dir(tmp_path: Path):
    rows = [{"a": 1}, {"b": (2, 3)}]
    path = paths.write_jsonl_atomic(tmp_path / "x.jsonl", rows)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"a": 1}, {"b": [2, 3]}]
    out = tmp_path / "folder"
    with paths.atomic_dir(out) as tmp:
        (tmp / "one").write_text("1")
    assert (out / "one").read_text() == "1"
    with pytest.raises(RuntimeError):
        with paths.atomic_dir(out) as tmp:
            (tmp / "two").write_text("2")
            raise RuntimeError
    assert sorted(p.name for p in out.iterdir()) == ["one"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "x.jsonl"]


def test_only_the_paths_module_reads_the_folder_variables():
    package = paths.REPO_ROOT / "inquire_lib"
    readers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if any(v in p.read_text() for v, _ in paths.FOLDERS.values())
    )
    assert readers == ["runs/paths.py"]
