"""Notebook 06 runs under papermill (smoke profile) on a synthetic run and records what it shows."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic_run as syn  # noqa: E402

from inquire_lib.runs import notebooks as runs  # noqa: E402

pytestmark = pytest.mark.slow
WRITTEN = (
    "06_failures_base.html",
    "06_failures_sft.html",
    "06_episode.html",
    "06_step.html",
    "report.html",
    "report_failures.html",
)


def _cards(path: Path) -> list[str]:
    return re.findall(r"<div class='card'[^>]*>", path.read_text(encoding="utf-8"))


def test_notebook_06_smoke(tmp_path, monkeypatch, private_folders):
    """The run folder is passed as RUN_ROOT; figures go to this test's private folder."""
    FIGURES = Path(private_folders["figures"]) / "smoke"
    root = tmp_path / "papermill_runs"
    syn.write_run(tmp_path)  # tmp_path/papermill_runs/smoke/default/eval/{base,sft}/...
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(runs.REPO_ROOT), os.environ.get("PYTHONPATH")])))
    manifest = runs.run_notebooks(
        "smoke",
        only=["06"],
        out_root=root,
        cwd=tmp_path,
        parameters={"RUN_ROOT": str(root)},
        progress_bar=False,
        log=None,
    )
    assert manifest["status"] == "ok"
    assert [nb["name"] for nb in manifest["notebooks"]] == ["06_inspect_trajectories"]

    executed = nbformat.read(root / "smoke" / "default" / "06_inspect_trajectories.ipynb", as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs) == 1

    m = json.loads((root / "smoke" / "default" / "metrics" / "06_inspect_trajectories.json").read_text())
    assert m["notebook"] == "06_inspect_trajectories" and m["manifest"]["profile"] == "smoke"
    assert m["checkpoints"] == ["base", "sft"] and m["pair"] == ["base", "sft"]
    assert m["outcomes"] == {
        "base": {
            "correct": 4,
            "missed_inquiry": 2,
            "needless_inquiry": 0,
            "wrong_type": 1,
            "wrong_argument": 0,
            "unparseable": 1,
        },
        "sft": {
            "correct": 2,
            "missed_inquiry": 2,
            "needless_inquiry": 1,
            "wrong_type": 1,
            "wrong_argument": 1,
            "unparseable": 1,
        },
    }
    assert m["n_steps"] == {"base": 8, "sft": 8}
    # the inspector opened on checkpoint A's first missed inquiry, B on the same step
    shown = m["inspector"]
    assert (shown["checkpoint"], shown["checkpoint_b"], shown["outcome"]) == ("base", "sft", "missed_inquiry")
    assert (shown["id"], shown["id_b"], shown["episodes"]) == ("t0_risk/1", "t0_risk/1", ["t0_risk", "t1_privacy"])

    assert m["reports"] == {"all": str(FIGURES / "report.html"), "failures": str(FIGURES / "report_failures.html")}
    assert len(_cards(FIGURES / "report.html")) == 16
    failing = _cards(FIGURES / "report_failures.html")
    assert len(failing) == 10 and not any("data-outcome='correct'" in c for c in failing)
    for name in WRITTEN[:4]:
        assert (FIGURES / name).stat().st_size > 1_000
