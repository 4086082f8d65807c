"""A run's plan: what it does with each stage before it does it, and a run that would train past its short runs
stops first, in one line, unless asked to train."""

from __future__ import annotations

import pytest

from inquire_lib import cli
from inquire_lib.profiles import apply_overrides
from inquire_lib.stages import plan as run_plan
from inquire_lib.training import openvino


def _by_stage(steps):
    return {s.stage: s for s in steps}


@pytest.mark.parametrize("profile", ["quick", "small"])
def test_the_default_and_small_install_every_stage_they_ship(profile, tmp_path):
    steps = _by_stage(run_plan.plan(apply_overrides(profile, {})))
    assert steps["base_agent"].action in (run_plan.INSTALL, run_plan.HERE)
    assert steps["base_agent"].key == "162ff4abfc0b"
    shipped = {"sft_full": "b23065a3de9a", "sft_weak": "91cf0d417d62", "grpo_full": "dfea9eda587e"}
    shipped |= {"grpo_weak": "e6be643e459a", "grpo_task": "cdaa73aa0a4b"}
    for stage, key in shipped.items():
        assert (steps[stage].action, steps[stage].key, steps[stage].nearest) == ("install", key, f"{stage}-{key}")
    shorts = {s: steps[s].steps for s in steps if steps[s].action == run_plan.SHORT}
    assert shorts == ({"sft_full_short": 4, "grpo_weak_short": 2} if profile == "quick" else {})
    assert run_plan.trains_long(apply_overrides(profile, {}), list(steps.values())) == []


def test_an_edited_sft_setting_trains_every_stage_after_it_and_says_what_differs():
    profile = apply_overrides("small", {"sft_lr": 1e-4})
    steps = _by_stage(run_plan.plan(profile))
    sft = steps["sft_full"]
    assert (sft.action, sft.steps, sft.nearest, sft.differs) == (
        "train",
        600,
        "sft_full-b23065a3de9a",
        ("sft_lr 0.0002 -> 0.0001",),
    )
    assert sft.key != "b23065a3de9a"
    # the shipped sft_full's sittings took 24-36 s a step on 2 cores, by CPU kind: 600 steps are hours
    assert 3.5 < sft.hours < 6.5 and sft.hours_on
    grpo = steps["grpo_full"]
    assert grpo.action == "train" and grpo.differs == (f"its start b23065a3de9a -> {sft.key}",)
    assert steps["grpo_task"].action == "train"
    assert {s.stage for s in run_plan.trains_long(profile, list(steps.values()))} == {
        "sft_full",
        "sft_weak",
        "grpo_full",
        "grpo_weak",
        "grpo_task",
    }
    line = sft.line()
    assert line.startswith("sft_full") and "train 600 steps" in line and "sft_lr 0.0002 -> 0.0001" in line


def test_smoke_trains_by_design_and_its_time_is_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))  # no smoke base agent another test built
    smoke = apply_overrides("smoke", {})
    steps = run_plan.plan(smoke)
    assert all(s.action == "train" for s in steps) and smoke.trains_in_run
    assert run_plan.trains_long(smoke, steps) == []
    assert all(s.hours is None and "unmeasured" in s.line() for s in steps)
    assert "grpo_weak_s1" in {s.stage for s in steps}  # smoke trains two GRPO seeds


def test_a_plan_installs_nothing(tmp_path, private_folders):
    from pathlib import Path

    run_plan.plan(apply_overrides("quick", {}))
    assert not any(Path(private_folders["artifacts"]).iterdir())


def test_a_run_that_would_train_stops_before_any_notebook(monkeypatch, capsys):
    from inquire_lib.runs import notebooks

    started = []

    def run_notebooks(*a, preflight=None, **k):  # as the runner does: preflight with the lock held, then notebooks
        preflight()
        started.append(a)

    monkeypatch.setattr(notebooks, "run_notebooks", run_notebooks)
    monkeypatch.setattr(openvino, "engine_missing", lambda _p: None)
    assert cli.main(["run", "--profile", "small", "--set", "sft_lr=1e-4"]) == 2
    err = capsys.readouterr()
    assert not started
    assert "sft_full       train 600 steps" in err.out
    (line,) = err.err.strip().splitlines()
    assert "would train sft_full, sft_weak, grpo_full, grpo_weak, grpo_task" in line and "--train" in line


def test_a_run_whose_engine_is_missing_stops_in_one_line(monkeypatch, capsys, tmp_path):
    from inquire_lib.runs import notebooks

    started = []
    monkeypatch.setattr(notebooks, "run_notebooks", lambda *a, **k: started.append(a))
    monkeypatch.setenv("INQUIRE_EXPORT_VENV", str(tmp_path / "no-venv"))
    assert cli.main(["run", "--profile", "quick"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert not started
    assert line.startswith("inquire run: profile 'quick': eval_engine openvino needs the exporter's environment")
    assert line.endswith("run `make install`")
    assert openvino.engine_missing(apply_overrides("smoke", {})) is None  # smoke evaluates on HF


def test_inquire_plan_prints_a_line_a_stage(capsys):
    assert cli.main(["plan", "--profile", "small", "--set", "sft_lr=1e-4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("plan for profile 'small' on this machine (")
    assert [ln.split()[0] for ln in out[1:7]] == [
        "base_agent",
        "sft_full",
        "sft_weak",
        "grpo_full",
        "grpo_weak",
        "grpo_task",
    ]
    assert out[-1].startswith("a run stops before it trains sft_full")
