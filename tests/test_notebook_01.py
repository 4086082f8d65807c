"""Notebook 01 runs under the smoke profile and writes its metrics and figures."""

from __future__ import annotations

import json
import os

import pytest

from inquire_lib.viz import explore
from inquire_lib.runs import notebooks as runs

pytestmark = pytest.mark.slow

FIGURES = ("01_categories", "01_examples", "01_example_inquiry", "01_trajectory_lengths", "01_prompt_lengths")


def test_notebook_01_smoke(tmp_path, monkeypatch):
    # the kernel starts in tmp_path and inherits this test's private folders (conftest.py); the
    # repo stays importable from there
    monkeypatch.setenv("INQUIRE_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(runs.REPO_ROOT), os.environ.get("PYTHONPATH")])))
    manifest = runs.run_notebooks(
        "smoke", only=["01"], out_root=tmp_path / "papermill_runs", cwd=tmp_path, progress_bar=False, log=None
    )
    assert manifest["status"] == "ok"
    assert [nb["name"] for nb in manifest["notebooks"]] == ["01_explore_inquirebench"]
    assert (tmp_path / "papermill_runs" / "smoke" / "default" / "01_explore_inquirebench.ipynb").exists()

    m = json.loads(
        (tmp_path / "papermill_runs" / "smoke" / "default" / "metrics" / "01_explore_inquirebench.json").read_text()
    )
    assert m["notebook"] == "01_explore_inquirebench" and m["profile"] == "smoke" and m["seed"] == 0
    assert m["n_tasks"] == explore.coverage_tasks() == 54
    assert m["n_categories"] == 5 and m["n_subcategories"] == 22
    assert m["safe_tasks"] > 0 and m["safe_tasks"] + m["inquiry_tasks"] == m["n_tasks"]
    assert len(m["fingerprint"]) == 16 and m["stats"]["fingerprint"] == m["fingerprint"]
    train = m["stats"]["splits"]["train"]
    assert train["n_subcategories"] == 22 and train["tasks"] + m["stats"]["splits"]["test"]["tasks"] == 54
    assert m["trajectory_length"]["inquiry"]["mean"] > m["trajectory_length"]["safe"]["mean"] >= 2
    prompt = m["prompt_tokens"]
    assert prompt["text"]["n"] == m["stats"]["steps"] and prompt["text"]["min"] > 10
    assert prompt["image_tokens"]["min"] == 32  # 360x720 -> 112x224: 4 x 8 patches of 28 pixels
    assert m["inquiremobile_samples"] == {
        "tasks": 10,
        "task_categories": {"combination": 2, "intension": 2, "privacy": 2, "risk": 2, "uncertainty": 2},
        "grpo_records": 4,
        "grpo_frames": {"original": 1, "resized": 0, "none": 2, "inconsistent": 1},
    }
    assert m["manifest"]["profile"] == "smoke"

    assert sorted(m["figures"]) == sorted(FIGURES)
    for stem in FIGURES:
        html = tmp_path / "figures" / "smoke" / f"{stem}.html"
        assert m["figures"][stem]["html"] == str(html)
        assert html.stat().st_size > 3_000
        assert (html.parent / "plotly.min.js").stat().st_size > 1_000_000  # shared, not inlined
        # one idiom: pipeline.show_fig, which writes a PNG on every profile where a Chrome exists
        png = html.parent / f"{stem}.png"
        assert m["figures"][stem]["png"] == str(png) and png.stat().st_size > 5_000
