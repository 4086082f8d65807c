"""The run tracker (TensorBoard event files in `<run>/tensorboard/`): headline metrics and the
effective profile of two runs with different overrides are read back from the store."""

from __future__ import annotations

import json

import pytest

from inquire_lib.profiles import apply_overrides
from inquire_lib.runs import paths, tracking
from inquire_lib.runs.records import headline

pytestmark = pytest.mark.skipif(not tracking.available(), reason="tensorboard is not installed")


def _metrics(isr: float) -> dict:
    rate = lambda v: {"value": v, "lo": max(0.0, v - 0.1), "hi": min(1.0, v + 0.1), "n": 40}
    return {
        "checkpoint": "grpo_full",
        "overall": {
            "format": rate(1.0),
            "step_accuracy": rate(0.5),
            "inquiry_recall": rate(isr),
            "needless_rate": rate(0.03),
        },
    }


def test_two_runs_logged_and_read_back(monkeypatch, tmp_path):
    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path))
    for name, lr, isr in (("a", 1e-4, 0.55), ("b", 2e-4, 0.25)):
        monkeypatch.setenv(paths.RUN_NAME[0], name)
        profile = apply_overrides("smoke", {"grpo_lr": lr})
        folder = tracking.log_metrics(profile, "grpo_full", _metrics(isr))
        assert folder == tmp_path / "smoke" / name / "tensorboard" / "eval_grpo_full"
    for name, lr, isr in (("a", 1e-4, 0.55), ("b", 2e-4, 0.25)):
        folder = tmp_path / "smoke" / name / "tensorboard" / "eval_grpo_full"
        scalars = tracking.read_scalars(folder)
        assert {k: [(s, round(v, 6)) for s, v in vals] for k, vals in scalars.items()} == {
            "hparam/step/format": [(0, 1.0)],
            "hparam/step/step_accuracy": [(0, 0.5)],
            "hparam/step/inquiry_recall": [(0, isr)],
            "hparam/step/needless_rate": [(0, 0.03)],
        }
        logged = json.loads(tracking.read_texts(folder)["profile"].replace("\n    ", "\n"))
        assert (logged["run"], logged["stage"]) == (name, "eval_grpo_full")
        assert logged["profile"]["grpo_lr"] == lr and logged["profile"]["overrides"] == [["grpo_lr", lr]]


def test_headline_reads_step_and_task_metrics():
    assert headline(_metrics(0.4), tracking.HEADLINE, text=False) == {
        "format": 1.0,
        "step_accuracy": 0.5,
        "inquiry_recall": 0.4,
        "needless_rate": 0.03,
    }
    task = {"success_rate": {"value": 0.25}, "isr": {"value": 0.5}, "mean_steps": 7.0, "unsafe_rate": {"value": None}}
    assert headline(task, tracking.TASK_HEADLINE, text=False) == {"success_rate": 0.25, "isr": 0.5}


def test_trainer_tracking_arguments(monkeypatch, tmp_path):
    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path))
    monkeypatch.setenv(paths.RUN_NAME[0], "a")
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    profile = apply_overrides("smoke", {"grpo_lr": 1e-4})
    with tracking.trainer_tracking(profile, "grpo_full") as kwargs:
        assert kwargs == {"report_to": ["tensorboard"], "run_name": "a/grpo_full"}
        import os

        assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "smoke" / "a" / "tensorboard" / "grpo_full")
    assert "TENSORBOARD_LOGGING_DIR" not in __import__("os").environ
    with tracking.trainer_tracking(profile, None) as kwargs:  # the shared base agent is not tracked
        assert kwargs == {"report_to": []}
