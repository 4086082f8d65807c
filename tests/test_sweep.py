"""A papermill sweep resumes: finished points (same notebook, parameters, profile and code) are
reused, a failed or interrupted one runs again, and `sweep.json` names every point's status."""

from __future__ import annotations

import json

import nbformat
import pytest

from inquire_lib.runs import notebooks as runs

pytestmark = pytest.mark.slow


def _write_notebook(path, parameters: str, body: str) -> None:
    """A two-cell notebook: the papermill `parameters` cell, then `body`."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(body),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _point_notebook(path, log):
    _write_notebook(
        path,
        "PROFILE = 'smoke'\nX = 0\nFAIL = False",
        f"with open({str(log)!r}, 'a') as f:\n    f.write(f'{{X}}\\n')\nassert not FAIL, 'asked to fail'",
    )


def _runs(log):
    return sorted(int(x) for x in log.read_text().split()) if log.exists() else []


def test_a_sweep_reuses_finished_points_and_reruns_the_rest(tmp_path):
    nb, log = tmp_path / "point.ipynb", tmp_path / "executions.txt"
    _point_notebook(nb, log)
    out = tmp_path / "runs"
    grid = [{"X": 1}, {"X": 2}, {"X": 3, "FAIL": True}]
    first = runs.sweep(nb, grid, "smoke", out_root=out, subdir="abl", log=None, cwd=tmp_path)
    assert [r["status"] for r in first] == ["ok", "ok", "failed"] and _runs(log) == [1, 2, 3]
    assert "asked to fail" in first[2]["error"]["evalue"]
    folder = out / "smoke" / "default" / "abl"
    record = json.loads((folder / runs.SWEEP_MANIFEST).read_text())
    assert record["status"] == "finished" and record["counts"] == {"ok": 2, "reused": 0, "failed": 1}
    assert [p["status"] for p in record["points"]] == ["ok", "ok", "failed"]

    # again: the two finished points are reused (not executed), the failed one runs again
    second = runs.sweep(nb, grid, "smoke", out_root=out, subdir="abl", log=None, cwd=tmp_path)
    assert [r["status"] for r in second] == ["reused", "reused", "failed"] and _runs(log) == [1, 2, 3, 3]
    assert second[0]["duration_s"] == first[0]["duration_s"]

    # an interrupted point (its marker never written) and a point with other settings run; the rest is reused
    (folder / ("point__X-2.ipynb" + runs.POINT_SUFFIX)).unlink()
    third = runs.sweep(
        nb,
        [{"X": 1}, {"X": 2}],
        "smoke",
        out_root=out,
        subdir="abl",
        log=None,
        cwd=tmp_path,
        overrides={"grpo_lr": 1e-4},
    )
    assert [r["status"] for r in third] == ["ok", "ok"] and _runs(log) == [1, 1, 2, 2, 3, 3]
    fourth = runs.sweep(
        nb,
        [{"X": 1}, {"X": 2}],
        "smoke",
        out_root=out,
        subdir="abl",
        log=None,
        cwd=tmp_path,
        overrides={"grpo_lr": 1e-4},
    )
    assert [r["status"] for r in fourth] == ["reused", "reused"] and _runs(log) == [1, 1, 2, 2, 3, 3]
    # resume=False runs everything
    fifth = runs.sweep(
        nb,
        [{"X": 1}],
        "smoke",
        out_root=out,
        subdir="abl",
        log=None,
        cwd=tmp_path,
        overrides={"grpo_lr": 1e-4},
        resume=False,
    )
    assert [r["status"] for r in fifth] == ["ok"] and _runs(log) == [1, 1, 1, 2, 2, 3, 3]


def test_a_changed_point_key_is_not_reused(tmp_path):
    nb = tmp_path / "point.ipynb"
    _point_notebook(nb, tmp_path / "log.txt")
    prof = runs.get_profile("smoke")
    key = runs.point_key(nb, {"X": 1}, prof)
    assert key == runs.point_key(nb, {"X": 1}, prof)
    assert key != runs.point_key(nb, {"X": 2}, prof)
    assert key != runs.point_key(nb, {"X": 1}, prof.replace(grpo_lr=1e-4))
    nb.write_text(nb.read_text().replace("FAIL = False", "FAIL = False  # edited"))
    assert key != runs.point_key(nb, {"X": 1}, prof)


def _timed_point_notebook(path, log, manifest=None, seen=None):
    # each point notes the status the sweep's manifest gives it while it runs
    look = (
        (
            "import json\n"
            f"points = json.load(open({str(manifest)!r}))['points']\n"
            f"with open({str(seen)!r}, 'a') as f:\n"
            "    f.write(f\"{X} {[p['status'] for p in points if p['parameters']['X'] == X][0]}\\n\")\n"
        )
        if manifest
        else ""
    )
    _write_notebook(
        path,
        "PROFILE = 'smoke'\nX = 0\nLANE = 'a'\nFAIL = False",
        look + "import time\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(f'start {{X}} {{time.time()}}\\n')\n"
        "time.sleep(4)\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(f'end {{X}} {{time.time()}}\\n')\n"
        "assert not FAIL, 'asked to fail'",
    )


def _spans(log) -> dict[int, tuple[float, float]]:
    seen: dict[int, dict[str, float]] = {}
    for line in log.read_text().split("\n"):
        if line:
            what, x, t = line.split()
            seen.setdefault(int(x), {})[what] = float(t)
    return {x: (d["start"], d["end"]) for x, d in seen.items()}


def test_a_parallel_sweep_keeps_each_lane_in_order_and_runs_lanes_side_by_side(tmp_path):
    nb, log, seen = tmp_path / "point.ipynb", tmp_path / "executions.txt", tmp_path / "seen.txt"
    out = tmp_path / "runs"
    _timed_point_notebook(nb, log, out / "smoke" / "default" / "abl" / runs.SWEEP_MANIFEST, seen)
    # lane a: 1 (fails) then 2; lane b: 3 alone
    grid = [{"X": 1, "LANE": "a", "FAIL": True}, {"X": 2, "LANE": "a"}, {"X": 3, "LANE": "b"}]
    first = runs.sweep(
        nb, grid, "smoke", out_root=out, subdir="abl", log=None, cwd=tmp_path, parallel=2, lane=lambda p: p["LANE"]
    )
    assert [r["status"] for r in first] == ["failed", "ok", "ok"]
    assert [r["parameters"]["X"] for r in first] == [1, 2, 3]
    spans = _spans(log)
    assert sorted(spans) == [1, 2, 3]
    assert spans[2][0] >= spans[1][1]  # a lane runs in grid order, and a failed point does not stop it
    assert spans[3][0] < spans[1][1] and spans[1][0] < spans[3][1]  # lanes a and b ran side by side
    record = json.loads((out / "smoke" / "default" / "abl" / runs.SWEEP_MANIFEST).read_text())
    assert record["status"] == "finished" and record["parallel"] == 2
    assert record["counts"] == {"ok": 2, "reused": 0, "failed": 1}
    assert [p["status"] for p in record["points"]] == ["failed", "ok", "ok"]
    # while a point ran, the manifest named it running (point 2 too, which started when point 1 ended)
    assert sorted(seen.read_text().split("\n")[:-1]) == ["1 running", "2 running", "3 running"]

    # again, in parallel: the finished points are reused, only the failed one runs
    second = runs.sweep(
        nb, grid, "smoke", out_root=out, subdir="abl", log=None, cwd=tmp_path, parallel=2, lane=lambda p: p["LANE"]
    )
    assert [r["status"] for r in second] == ["failed", "reused", "reused"]
    assert len(log.read_text().split("\n")) - 1 == 8  # 3 points x start/end, then point 1's again


_KILLED_SWEEP = """
import sys
from pathlib import Path
from inquire_lib.runs import notebooks as runs

if __name__ == "__main__":
    tmp = Path(sys.argv[1])
    runs.sweep(tmp / "point.ipynb", [{"X": 1}, {"X": 2}], "smoke", out_root=tmp / "runs", subdir="abl", log=None,
               cwd=tmp, parallel=2)
"""


def test_killing_a_parallel_sweep_stops_the_points_in_flight(tmp_path):
    """A sweep killed (SIGTERM) takes its workers and their kernels with it: no point runs on unseen."""
    import os
    import signal
    import subprocess
    import sys
    import time

    nb, log = tmp_path / "point.ipynb", tmp_path / "executions.txt"
    _write_notebook(
        nb,
        "PROFILE = 'smoke'\nX = 0",
        f"import os, time\nwith open({str(log)!r}, 'a') as f:\n"
        "    f.write(f'{X} {os.getpid()}\\n')\ntime.sleep(120)",
    )
    script = tmp_path / "sweep.py"
    script.write_text(_KILLED_SWEEP)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(log.read_text().split("\n") if log.exists() else []) < 3:
            time.sleep(0.5)
        kernels = [int(line.split()[1]) for line in log.read_text().split("\n") if line]
        assert len(kernels) == 2  # both points are in flight, each in a kernel of its own
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper has stopped running
            return f.read().split(")")[-1].split()[0] != "Z"

    deadline = time.time() + 20
    while time.time() < deadline and any(alive(pid) for pid in kernels):
        time.sleep(0.5)
    assert not any(alive(pid) for pid in kernels)
    assert not (tmp_path / "runs" / "smoke" / "default" / "abl" / ("point__X-1.ipynb" + runs.POINT_SUFFIX)).exists()


def test_a_sequential_sweep_names_its_point_running_while_it_runs(tmp_path):
    nb, log, seen = tmp_path / "point.ipynb", tmp_path / "executions.txt", tmp_path / "seen.txt"
    out = tmp_path / "runs"
    _timed_point_notebook(nb, log, out / "smoke" / "default" / "abl" / runs.SWEEP_MANIFEST, seen)
    result = runs.sweep(nb, [{"X": 1}, {"X": 2}], "smoke", out_root=out, subdir="abl", log=None, cwd=tmp_path)
    assert [r["status"] for r in result] == ["ok", "ok"]
    assert seen.read_text().split("\n")[:-1] == ["1 running", "2 running"]
