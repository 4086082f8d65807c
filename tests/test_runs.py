"""The papermill runner: manifests, executed copies, failures that name notebook and cell."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform
import re
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from inquire_lib.runs import notebooks as runs
from inquire_lib.profiles import get_profile


def _notebook(path: Path, *code: str, parameters: str = 'PROFILE = "cpu"\nOUT = ""') -> Path:
    """Write a notebook: a markdown cell, a `parameters` cell, then one code cell per string."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# test notebook"), params]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in code]
    nbformat.write(nb, path)
    return path


WRITE_JSON = (
    "import json, os, pathlib\npathlib.Path(OUT).write_text(json.dumps({'profile': PROFILE, 'cwd': os.getcwd()}))"
)


@pytest.fixture()
def nbdir(tmp_path: Path) -> Path:
    d = tmp_path / "nbs"
    d.mkdir()
    _notebook(d / "01_write.ipynb", WRITE_JSON)
    _notebook(d / "02_fail.ipynb", "raise ValueError('boom in cell two')", "x = 1")
    _notebook(d / "03_after.ipynb", "y = 2")
    _notebook(d / "scratch.ipynb", "z = 3")  # not numbered: never run
    return d


def test_discover_and_select(nbdir: Path):
    found = runs.discover_notebooks(nbdir)
    assert [p.name for p in found] == ["01_write.ipynb", "02_fail.ipynb", "03_after.ipynb"]
    assert [p.stem for p in runs.select_notebooks(found, ["03", "01"])] == ["01_write", "03_after"]
    assert [p.stem for p in runs.select_notebooks(found, ["02_fail.ipynb"])] == ["02_fail"]
    assert [p.stem for p in runs.select_notebooks(found, ["02_fail"])] == ["02_fail"]
    assert runs.select_notebooks(found, None) == found
    with pytest.raises(ValueError, match=r"'09'.*01_write, 02_fail, 03_after"):
        runs.select_notebooks(found, ["09"])


def test_repo_notebooks_are_numbered_and_sorted():
    names = [p.name for p in runs.NOTEBOOKS]
    assert names == sorted(names)
    assert all(p.parent == runs.NOTEBOOKS_DIR and p.name[:2].isdigit() and p.name[2] == "_" for p in runs.NOTEBOOKS)


def test_successful_run_writes_copy_and_manifest(nbdir: Path, tmp_path: Path):
    out = tmp_path / "result.json"
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    manifest = runs.run_notebooks(
        "smoke",
        only=["01"],
        out_root=tmp_path / "runs",
        parameters={"OUT": str(out)},
        notebooks_dir=nbdir,
        log=None,
    )
    # the notebook saw the profile parameter and ran in the repo root
    assert json.loads(out.read_text()) == {"profile": "smoke", "cwd": str(runs.REPO_ROOT)}

    executed = tmp_path / "runs" / "smoke" / "default" / "01_write.ipynb"
    nb = nbformat.read(executed, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and 'PROFILE = "smoke"' in injected[0].source

    on_disk = json.loads((tmp_path / "runs" / "smoke" / "default" / "manifest.json").read_text())
    assert on_disk == manifest
    assert manifest["profile"] == "smoke"
    assert manifest["settings"] == json.loads(json.dumps(get_profile("smoke").to_dict()))
    assert manifest["settings"]["sft_steps"] == get_profile("smoke").sft_steps
    assert manifest["seed"] == get_profile("smoke").seed
    assert manifest["parameters"] == {"PROFILE": "smoke", "OUT": str(out)}
    assert manifest["python"] == platform.python_version()
    assert manifest["packages"]["torch"] == importlib.metadata.version("torch")
    assert manifest["packages"]["papermill"] == importlib.metadata.version("papermill")
    assert set(manifest["packages"]) >= {
        "torch",
        "transformers",
        "trl",
        "peft",
        "bitsandbytes",
        "datasets",
        "papermill",
        "plotly",
        "ipywidgets",
    }
    head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=runs.REPO_ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert manifest["git_sha"] == head.stdout.strip()
        assert isinstance(manifest["git_dirty"], bool)
    else:
        assert manifest["git_sha"] is None
    assert manifest["status"] == "ok"
    t0 = dt.datetime.fromisoformat(manifest["started"])
    t1 = dt.datetime.fromisoformat(manifest["finished"])
    assert started <= t0 <= t1
    [entry] = manifest["notebooks"]
    assert entry["name"] == "01_write" and entry["status"] == "ok" and entry["error"] is None
    assert 0 < entry["duration_s"] <= (t1 - t0).total_seconds() + 1
    assert entry["executed"] == str(executed)


def test_kernels_talk_over_private_sockets_outside_the_repository(nbdir: Path, tmp_path: Path):
    a, b = runs._ipc_kernel_manager()(), runs._ipc_kernel_manager()()
    folder = Path(a.ip).parent
    assert a.transport == b.transport == "ipc" and a.ip != b.ip  # two kernels never share socket names
    assert folder.stat().st_mode & 0o077 == 0 and runs.REPO_ROOT not in folder.parents
    assert len(a.ip) + len("-65535") <= 107  # the longest socket path a unix socket accepts
    before = set(runs.REPO_ROOT.glob("kernel-*ipc*"))
    runs.run_notebooks(
        "smoke",
        only=["01"],
        out_root=tmp_path / "runs",
        parameters={"OUT": str(tmp_path / "r.json")},
        notebooks_dir=nbdir,
        log=None,
    )
    assert set(runs.REPO_ROOT.glob("kernel-*ipc*")) == before
    assert not list(folder.iterdir())  # the kernel removed its sockets at shutdown


def test_failure_names_notebook_and_cell_and_stops(nbdir: Path, tmp_path: Path):
    out = tmp_path / "result.json"
    with pytest.raises(runs.NotebookFailed) as info:
        runs.run_notebooks(
            "smoke", out_root=tmp_path / "runs", parameters={"OUT": str(out)}, notebooks_dir=nbdir, log=None
        )
    err = info.value
    # source cells: 0 markdown, 1 parameters, 2 the raise; executed: parameters In [1],
    # injected parameters In [2], the raise In [3]
    assert err.notebook == "02_fail.ipynb"
    assert (err.cell_index, err.exec_count, err.ename, err.evalue) == (2, 3, "ValueError", "boom in cell two")
    msg = str(err)
    assert "02_fail.ipynb" in msg and "cell index 2" in msg and "In [3]" in msg
    assert "ValueError: boom in cell two" in msg
    assert err.output_path == tmp_path / "runs" / "smoke" / "default" / "02_fail.ipynb" and err.output_path.exists()

    manifest = json.loads((tmp_path / "runs" / "smoke" / "default" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["finished"] is not None
    statuses = [(e["name"], e["status"]) for e in manifest["notebooks"]]
    assert statuses == [("01_write", "ok"), ("02_fail", "failed"), ("03_after", "not run")]
    failed = manifest["notebooks"][1]
    assert failed["error"] == {"cell_index": 2, "exec_count": 3, "ename": "ValueError", "evalue": "boom in cell two"}
    assert failed["duration_s"] > 0
    assert manifest["notebooks"][2]["duration_s"] is None and manifest["notebooks"][2]["error"] is None
    assert not (tmp_path / "runs" / "smoke" / "default" / "03_after.ipynb").exists()
    assert json.loads(out.read_text())["profile"] == "smoke"  # 01 did run before the failure


def test_bad_arguments_fail_before_any_kernel(nbdir: Path, tmp_path: Path):
    with pytest.raises(KeyError, match="unknown profile"):
        runs.run_notebooks("nope", notebooks_dir=nbdir, out_root=tmp_path, log=None)
    with pytest.raises(ValueError, match="contradicts"):
        runs.run_notebooks("smoke", parameters={"PROFILE": "cpu"}, notebooks_dir=nbdir, out_root=tmp_path, log=None)
    with pytest.raises(FileNotFoundError, match="no notebooks"):
        runs.run_notebooks("smoke", notebooks_dir=tmp_path / "empty", out_root=tmp_path, log=None)
    assert not (tmp_path / "smoke").exists()


def _head() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=runs.REPO_ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def test_run_manifest_fields():
    before = _head()
    m = runs.run_manifest("cpu", seed=7)
    after = _head()  # a commit may land meanwhile: the sha is HEAD's at one end or the other
    assert m["profile"] == "cpu" and m["seed"] == 7
    assert m["settings"] == json.loads(json.dumps(get_profile("cpu").to_dict()))
    assert m["settings"]["lora_targets"] == list(get_profile("cpu").lora_targets)
    assert runs.run_manifest("gpu")["seed"] == get_profile("gpu").seed
    assert m["packages"]["transformers"] == importlib.metadata.version("transformers")
    if before is not None:  # a git checkout: HEAD's full sha, and whether the tree differs from it
        assert re.fullmatch(r"[0-9a-f]{40}", m["git_sha"]) and m["git_sha"] in {before, after}
        assert isinstance(m["git_dirty"], bool)
    else:  # a tree outside git (an unpacked archive): nothing to name
        assert (m["git_sha"], m["git_dirty"]) == (None, None)
    dt.datetime.fromisoformat(m["created"])


def test_a_hung_cell_fails_the_notebook_at_the_cell_timeout(tmp_path: Path):
    d = tmp_path / "nbs"
    d.mkdir()
    _notebook(d / "01_hang.ipynb", "import time\ntime.sleep(600)", "after = 1")
    t0 = time.perf_counter()
    with pytest.raises(runs.NotebookFailed) as info:
        runs.run_notebooks("smoke", out_root=tmp_path / "runs", notebooks_dir=d, log=None, cell_timeout=3)
    assert time.perf_counter() - t0 < 120  # the kernel start dominates; the cell is cut at 3 s
    assert info.value.notebook == "01_hang.ipynb" and "Timeout" in (info.value.ename or "")
    manifest = json.loads((tmp_path / "runs" / "smoke" / "default" / "manifest.json").read_text())
    assert manifest["cell_timeout_s"] == 3 and manifest["notebooks"][0]["status"] == "failed"
    # the smoke profile (CI) bounds every cell by default
    assert get_profile("smoke").cell_timeout_s == 900 and get_profile("cpu").cell_timeout_s is None


WRITE_RUN = (
    "import json, os, pathlib\n"
    "from inquire_lib.pipeline import profile_of\n"
    "from inquire_lib.runs.paths import run_dir\n"
    "p = profile_of(PROFILE, overrides=OVERRIDES, quiet=True)\n"
    "pathlib.Path(OUT).write_text(json.dumps({'grpo_lr': p.grpo_lr, 'overrides': OVERRIDES,\n"
    "    'run_dir': str(run_dir(p)), 'run': os.environ.get('INQUIRE_RUN_NAME')}))"
)


@pytest.fixture()
def named_nbdir(tmp_path: Path) -> Path:
    d = tmp_path / "named"
    d.mkdir()
    params = 'PROFILE = "cpu"\nOUT = ""\nOVERRIDES = {}'
    _notebook(d / "01_write.ipynb", WRITE_RUN, parameters=params)
    _notebook(d / "02_middle.ipynb", "x = 1", parameters=params)
    _notebook(d / "03_last.ipynb", "y = 2", parameters=params)
    return d


def test_named_runs_are_kept_apart_and_record_the_effective_profile(named_nbdir: Path, tmp_path: Path):
    root = tmp_path / "runs"
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    ma = runs.run_notebooks(
        "smoke",
        name="a",
        overrides={"grpo_lr": 1e-4},
        out_root=root,
        parameters={"OUT": str(out_a)},
        notebooks_dir=named_nbdir,
        log=None,
    )
    mb = runs.run_notebooks(
        "smoke",
        name="b",
        overrides={"grpo_lr": 2e-4},
        out_root=root,
        parameters={"OUT": str(out_b)},
        notebooks_dir=named_nbdir,
        log=None,
    )
    # each kernel saw its overrides, its run name and its own run folder
    assert json.loads(out_a.read_text()) == {
        "grpo_lr": 1e-4,
        "overrides": {"grpo_lr": 1e-4},
        "run_dir": str(root / "smoke" / "a"),
        "run": "a",
    }
    assert json.loads(out_b.read_text())["run_dir"] == str(root / "smoke" / "b")
    for name, m, lr in (("a", ma, 1e-4), ("b", mb, 2e-4)):
        assert json.loads((root / "smoke" / name / "manifest.json").read_text()) == m
        assert (m["run"], m["overrides"], m["settings"]["grpo_lr"]) == (name, {"grpo_lr": lr}, lr)
        assert m["settings"]["sft_steps"] == get_profile("smoke").sft_steps
        assert m["parameters"]["OVERRIDES"] == {"grpo_lr": lr}
        assert [(e["name"], e["status"]) for e in m["notebooks"]] == [
            ("01_write", "ok"),
            ("02_middle", "ok"),
            ("03_last", "ok"),
        ]
        stamp = nbformat.read(root / "smoke" / name / "02_middle.ipynb", as_version=4).metadata["inquire"]
        assert (stamp["run"], stamp["profile"], stamp["overrides"]) == (name, "smoke", {"grpo_lr": lr})
        assert stamp["settings"]["grpo_lr"] == lr and stamp["settings"]["overrides"] == [["grpo_lr", lr]]

    # the same name with other settings is refused and leaves run a as it was
    before = (root / "smoke" / "a" / "manifest.json").read_text()
    with pytest.raises(ValueError, match=r"run 'a' .* overrides \{'grpo_lr': 0.0001\}.*choose another --name"):
        runs.run_notebooks(
            "smoke",
            name="a",
            overrides={"grpo_lr": 3e-4},
            out_root=root,
            parameters={"OUT": str(out_a)},
            notebooks_dir=named_nbdir,
            log=None,
        )
    assert (root / "smoke" / "a" / "manifest.json").read_text() == before

    # re-running 02 of run a: one manifest, 01 still ok, 02 re-run, 03 marked stale
    lines: list[str] = []
    again = runs.run_notebooks(
        "smoke",
        name="a",
        overrides={"grpo_lr": 1e-4},
        only=["02"],
        out_root=root,
        parameters={"OUT": str(out_a)},
        notebooks_dir=named_nbdir,
        log=lines.append,
    )
    status = {e["name"]: (e["status"], e["stale_because"]) for e in again["notebooks"]}
    assert status == {
        "01_write": ("ok", None),
        "02_middle": ("ok", None),
        "03_last": ("stale", "02_middle was re-run after it"),
    }
    assert [h["notebooks"] for h in again["history"]] == [["01_write", "02_middle", "03_last"], ["02_middle"]]
    assert [h["status"] for h in again["history"]] == ["ok", "ok"]
    assert again["started"] == ma["started"]
    assert any("stale now" in line and "03_last" in line for line in lines)
    # running 03 again clears it
    final = runs.run_notebooks(
        "smoke",
        name="a",
        overrides={"grpo_lr": 1e-4},
        only=["03"],
        out_root=root,
        parameters={"OUT": str(out_a)},
        notebooks_dir=named_nbdir,
        log=None,
    )
    assert [e["status"] for e in final["notebooks"]] == ["ok", "ok", "ok"]
    assert sorted(p.name for p in (root / "smoke").iterdir()) == ["a", "b"]


def test_default_run_name_and_deaf_notebooks(named_nbdir: Path, nbdir: Path, tmp_path: Path):
    root = tmp_path / "runs"
    m = runs.run_notebooks(
        "smoke",
        only=["01"],
        overrides={"missed_penalty": 2},
        out_root=root,
        parameters={"OUT": str(tmp_path / "o.json")},
        notebooks_dir=named_nbdir,
        log=None,
    )
    assert m["run"] == "missed_penalty=2" and (root / "smoke" / "missed_penalty=2" / "01_write.ipynb").exists()
    # a notebook without an OVERRIDES parameter would silently ignore them: refused up front
    with pytest.raises(runs.OverrideError, match=r"without an OVERRIDES parameter.*01_write.ipynb, 02_fail.ipynb"):
        runs.run_notebooks("smoke", overrides={"grpo_lr": 1e-4}, out_root=root, notebooks_dir=nbdir, log=None)
    with pytest.raises(runs.OverrideError, match="unknown profile field 'grpo'"):
        runs.run_notebooks("smoke", overrides={"grpo": 1e-4}, out_root=root, notebooks_dir=named_nbdir, log=None)
    assert sorted(p.name for p in (root / "smoke").iterdir()) == ["missed_penalty=2"]


def test_stage_timings_land_in_the_manifest_and_the_time_table(tmp_path: Path):
    """What a notebook's stages record (`runs.timing`) is tagged with that notebook in the manifest,
    and the run ends with the time table."""
    d = tmp_path / "nbs"
    d.mkdir()
    stage = (
        "from inquire_lib.runs import timing\nfrom inquire_lib.runs.paths import run_dir\n"
        "timing.record(run_dir(PROFILE), {!r}, {!r}, {!r}{})"
    )
    _notebook(d / "01_train.ipynb", stage.format("sft", "sft_full", 75.0, ""))
    _notebook(
        d / "02_eval.ipynb",
        stage.format("evaluate steps", "sft_full", 0.01, ", reused=True"),
        stage.format("evaluate steps", "untrained", 3.0, ""),
    )
    lines = []
    manifest = runs.run_notebooks("smoke", out_root=tmp_path / "runs", notebooks_dir=d, log=lines.append)
    first, second = manifest["notebooks"]
    assert first["stages"] == [{"stage": "sft", "name": "sft_full", "seconds": 75.0}]
    assert second["stages"] == [
        {"stage": "evaluate steps", "name": "sft_full", "seconds": 0.01, "reused": True},
        {"stage": "evaluate steps", "name": "untrained", "seconds": 3.0},
    ]
    table = lines[-1].splitlines()
    assert table[0].startswith("time table") and table[1].split() == ["notebook", "/", "stage", "wall"]
    assert [r.split()[:3] for r in table[2:]][:3] == [
        ["01_train", table[2].split()[1], "ok"],
        ["sft", "sft_full", "1:15"],
        ["02_eval", table[4].split()[1], "ok"],
    ]
    assert table[5].split() == ["evaluate", "steps", "sft_full", "0:00", "read", "back"]
    assert table[-1].split()[0] == "total"


def test_a_timed_stage_records_its_own_peak_memory(tmp_path):
    """Each stage's line holds the process's peak RSS during that stage alone: a stage that holds 300 MB more
    records at least that, and the next, smaller stage does not inherit its peak."""
    import numpy as np

    from inquire_lib.runs import timing
    from inquire_lib.runs.paths import run_dir
    from inquire_lib.stages.timed import timed

    @timed("big")
    def big(profile, name):
        block = np.ones(300 * 2**20 // 8)
        return float(block[-1])

    @timed("small")
    def small(profile, name):
        return 0.0

    big("smoke", name="a")
    small("smoke", name="b")
    first, second = timing.read(run_dir("smoke"))[-2:]
    assert (first["stage"], first["name"], second["name"]) == ("big", "a", "b")
    assert first["peak_rss_mb"] - second["peak_rss_mb"] > 250
    assert "peak" in timing.table([{"name": "nb", "duration_s": 1.0, "stages": [first]}])
