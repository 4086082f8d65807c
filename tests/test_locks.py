"""A run, and a checkpoint folder being trained, is used by one process at a time."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import papermill
import pytest

from inquire_lib.runs import locks
from inquire_lib.runs import notebooks as runs
from inquire_lib.runs.paths import REPO_ROOT, root
from inquire_lib.training.fit import fit

HOLD = (
    "import sys, time\n"
    "from inquire_lib.runs import locks\n"
    "with locks.held(sys.argv[1], sys.argv[2]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(120)\n"
)
BUSY = re.compile(
    r"(.+) is in use by pid (\d+) \(started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC on (.+)\); lock file (.+)"
)


@contextmanager
def holder(path: Path, what: str):
    """Another process holding the lock `path` until the block ends (then killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), what],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held", proc.stderr.read()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_inquire_run_on_a_held_run_stops_at_once_with_one_line():
    lock = root("runs") / "smoke" / "twin" / locks.LOCK_NAME
    with holder(lock, "run smoke/twin") as first:
        t0 = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "inquire_lib.cli", "run", "--profile", "smoke", "--name", "twin", "--only", "01"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        seconds = time.monotonic() - t0
        held = json.loads(lock.read_text())
    assert second.returncode == 2 and second.stdout == ""
    lines = second.stderr.splitlines()
    assert len(lines) == 1, second.stderr
    m = BUSY.fullmatch(lines[0])
    assert m and m[1] == "inquire run: run smoke/twin" and int(m[2]) == first.pid == held["pid"], lines[0]
    assert m[4] == socket.gethostname() and m[5] == str(lock)
    assert f"{m[3]} UTC" == held["started"]
    assert not (lock.parent / "manifest.json").exists()  # stopped before touching the run
    assert seconds < 120  # no kernel started: the notebook alone takes minutes


def test_a_killed_holders_lock_is_taken_over_with_one_warning(tmp_path: Path):
    lock = tmp_path / "run" / locks.LOCK_NAME
    with holder(lock, "run smoke/twin") as first:
        first.send_signal(signal.SIGKILL)
        first.wait()
        warnings = []
        with locks.held(lock, "run smoke/twin", warn=warnings.append) as mine:
            assert json.loads(lock.read_text()) == mine and mine["pid"] == os.getpid()
    assert len(warnings) == 1
    assert warnings[0] == (
        f"warning: run smoke/twin: taking over the lock of pid {first.pid} (started "
        f"{warnings[0].split('(started ')[1].split(' on ')[0]} on {socket.gethostname()}), "
        f"which is no longer running ({lock})"
    )
    assert not lock.exists()


def test_a_reused_pid_does_not_keep_a_lock(tmp_path: Path):
    """The file names this very process's pid with another start time: the pid was reused, the holder is gone."""
    lock = tmp_path / locks.LOCK_NAME
    ticks = locks.start_ticks(os.getpid())
    assert isinstance(ticks, int) and ticks > 0
    lock.write_text(
        json.dumps({"pid": os.getpid(), "start_ticks": ticks - 1, "started": "then", "host": socket.gethostname()})
    )
    warnings = []
    with locks.held(lock, "run x", warn=warnings.append):
        pass
    assert len(warnings) == 1 and f"pid {os.getpid()} (started then on" in warnings[0]


def test_a_live_holder_and_one_on_another_host_refuse(tmp_path: Path):
    lock = tmp_path / locks.LOCK_NAME
    with locks.held(lock, "run x") as mine:
        with pytest.raises(locks.Busy, match=rf"^run x is in use by pid {os.getpid()} \(started .* UTC on "):
            locks.acquire(lock, "run x")
        assert json.loads(lock.read_text()) == mine
    lock.write_text(json.dumps({"pid": 1, "start_ticks": 1, "started": "2026-01-01 00:00:00 UTC", "host": "elsewhere"}))
    with pytest.raises(locks.Busy, match="on elsewhere"):
        locks.acquire(lock, "run x")


def test_an_unreadable_lock_file_is_taken_over(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(locks, "_SETTLE_S", 0.1)
    lock = tmp_path / locks.LOCK_NAME
    lock.write_text("")
    warnings = []
    with locks.held(lock, "run x", warn=warnings.append):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert warnings == [
        f"warning: run x: taking over the lock of a process that left it unreadable, which is "
        f"no longer running ({lock})"
    ]


def test_the_lock_is_released_on_an_exception(tmp_path: Path):
    lock = tmp_path / locks.LOCK_NAME
    with pytest.raises(KeyError):
        with locks.held(lock, "run x"):
            assert lock.exists()
            raise KeyError("boom")
    assert not lock.exists()


def test_a_lock_taken_over_from_us_is_left_to_its_new_holder(tmp_path: Path):
    lock = tmp_path / locks.LOCK_NAME
    with locks.held(lock, "run x"):
        lock.write_text(json.dumps({"pid": 1, "host": "elsewhere"}))
    assert json.loads(lock.read_text()) == {"pid": 1, "host": "elsewhere"}


def _one_notebook(tmp_path: Path) -> Path:
    d = tmp_path / "nbs"
    d.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "cpu"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, d / "01_one.ipynb")
    return d


def test_run_notebooks_holds_the_run_while_it_runs_and_releases_it(tmp_path: Path, monkeypatch):
    seen = []

    def execute(source, executed, **_):
        lock = Path(executed).parent / locks.LOCK_NAME
        seen.append(json.loads(lock.read_text()))
        if len(seen) == 2:
            raise RuntimeError("the notebook failed")
        shutil.copy(source, executed)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    nbs, out = _one_notebook(tmp_path), tmp_path / "runs"
    runs.run_notebooks("smoke", name="twin", out_root=out, notebooks_dir=nbs, log=None)
    lock = out / "smoke" / "twin" / locks.LOCK_NAME
    assert seen[0]["pid"] == os.getpid() and seen[0]["what"] == "run smoke/twin" and not lock.exists()
    with pytest.raises(runs.NotebookFailed):
        runs.run_notebooks("smoke", name="twin", out_root=out, notebooks_dir=nbs, log=None)
    assert len(seen) == 2 and not lock.exists()


def test_training_a_folder_another_process_trains_is_refused(tmp_path: Path):
    out_dir = tmp_path / "sft_full"

    class Untouched:  # the refusal comes before the trainer is used
        def __getattr__(self, name):
            raise AssertionError(f"trainer.{name} used")

    with holder(out_dir / locks.LOCK_NAME, f"training into {out_dir}") as first:
        with pytest.raises(
            locks.Busy, match=rf"^training into {re.escape(str(out_dir))} is in use by pid {first.pid} "
        ):
            fit(Untouched(), out_dir, resume=False)
