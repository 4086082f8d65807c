"""A notebook's closing summary (`viz.closing`): numbers with intervals read from the run's own files, and
sentences that follow those numbers (apart, not resolved, all zero) rather than prose written ahead."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from inquire_lib.evaluation.metrics import wilson
from inquire_lib.viz import closing

sys.path.insert(0, str(Path(__file__).parent))
from notebook_cells import NOTEBOOKS_DIR, closing_subject  # noqa: E402

SETTINGS = {
    "name": "quick",
    "model": "tiny:cpu",
    "eval_tasks": 40,
    "seed": 0,
    "sft_steps": 40,
    "grpo_steps": 20,
    "grpo_seeds": 1,
    "dagger_rounds": 1,
    "dagger_steps": 10,
    "task_grpo_steps": 2,
    "task_num_generations": 4,
    "ablation_sft_steps": 5,
    "ablation_grpo_steps": 2,
    "benchmark_tasks": 2120,
    "eval_inquiry_steps": 0,
}


def _overall(isr, needless=(0, 100), safe=(70, 100), acc=(70, 120)) -> dict:
    return {
        "inquiry_recall": wilson(*isr),
        "needless_rate": wilson(*needless),
        "safe_step_accuracy": wilson(*safe),
        "step_accuracy": wilson(*acc),
    }


def _summary(path: Path) -> str:
    """The summary the notebook named like `path` closes on (the subject its last cell names)."""
    return closing.summary(path, closing_subject(NOTEBOOKS_DIR / f"{path.stem}.ipynb"))


def _write(run: Path, notebook: str, body: dict, settings=SETTINGS) -> Path:
    path = run / "metrics" / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"notebook": notebook, **body, "manifest": {"settings": settings}}))
    return path


def _task(run: Path, name: str, sr: tuple[int, int]) -> None:
    (run / "metrics" / f"task_{name}.json").write_text(
        json.dumps(
            {"checkpoint": name, "overall": {"success_rate": wilson(*sr), "isr": wilson(sr[0] // 2, sr[1] // 2)}}
        )
    )


def test_sft_gain_with_intervals_apart_is_called_shown(tmp_path):
    path = _write(
        tmp_path,
        "02_sft_qlora",
        {
            "overall": {"base_agent": _overall((0, 20)), "sft_weak": _overall((2, 20)), "sft_full": _overall((12, 20))},
            "dagger": [{"checkpoint": "sft_full"}, {"checkpoint": "sft_dagger_r1"}, {"checkpoint": "sft_more"}],
        },
    )
    for name, sr in (("sft_full", (5, 40)), ("sft_dagger_r1", (6, 40)), ("sft_more", (9, 40))):
        _task(tmp_path, name, sr)
    text = _summary(path)
    assert "sft_full: step ISR 0.60 (0.39-0.78) 12/20" in text
    assert "base_agent: step ISR 0.00 (0.00-0.16) 0/20" in text
    assert "Step ISR of sft_full lies above base_agent's with intervals apart (+60.0 points)" in text
    # DAgger against its control: 6/40 against 9/40 overlap, so no claim
    assert "sft_dagger_r1 (task level, online): task SR 0.15 (0.07-0.29) 6/40" in text
    assert (
        "sft_dagger_r1 against the equal-compute control sft_more is -7.5 points; their intervals (0.12-0.38 and "
        "0.07-0.29) overlap: not resolved at this size." in text
    )


def test_overlapping_grpo_change_is_not_resolved_and_one_seed_is_named(tmp_path):
    path = _write(
        tmp_path,
        "03_grpo_action_level",
        {
            "stages": {
                "sft_weak": _overall((2, 20)),
                "grpo_weak": _overall((4, 20)),
                "sft_full": _overall((12, 20)),
                "grpo_full": _overall((11, 20)),
            }
        },
    )
    text = _summary(path)
    assert "grpo_weak: step ISR 0.20 (0.08-0.42) 4/20" in text
    assert (
        "Step ISR: grpo_weak against sft_weak is +10.0 points; their intervals (0.03-0.30 and 0.08-0.42) overlap"
        in text
    )
    assert "never asks" not in text
    assert "GRPO ran 20 steps with 1 training seed(s) and its step ISR stands on 20 inquiry steps" in text
    assert "with one seed an interval covers the test items, not the run-to-run spread." in text


def test_smoke_all_zero_says_why(tmp_path):
    smoke = {**SETTINGS, "name": "smoke", "sft_steps": 6, "grpo_steps": 2}
    zero = _overall((0, 6), acc=(0, 30))
    path = _write(
        tmp_path,
        "03_grpo_action_level",
        {"stages": {n: zero for n in ("sft_weak", "grpo_weak", "sft_full", "grpo_full")}},
        settings=smoke,
    )
    text = _summary(path)
    assert "about 0 because the smoke profile trains a ~0.4M-parameter model for a few steps (6 SFT, 2 GRPO)" in text
    assert "check the plumbing" in text


def test_a_start_that_never_asks_is_named():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(
            Path(tmp),
            "03_grpo_action_level",
            {
                "stages": {
                    "sft_weak": _overall((0, 40)),
                    "grpo_weak": _overall((0, 40)),
                    "sft_full": _overall((7, 40)),
                    "grpo_full": _overall((6, 40)),
                }
            },
        )
        text = _summary(path)
    assert "sft_weak never asks on the test split, so its groups seldom sample an ask for GRPO to reinforce" in text


def test_ablation_effects_listed_with_intervals_and_seed_caveat(tmp_path):
    effects = [
        {
            "variant": "sft_no_a11y",
            "reference": "sft_baseline",
            "level": "step",
            "rate": "safe_step_accuracy",
            "effect": -0.304,
            "lo": -0.338,
            "hi": -0.271,
            "excludes_zero": True,
        },
        {
            "variant": "sft_lora",
            "reference": "sft_baseline",
            "level": "task",
            "rate": "success_rate",
            "effect": -0.021,
            "lo": -0.079,
            "hi": 0.035,
            "excludes_zero": False,
        },
    ]
    path = _write(
        tmp_path, "07_ablations", {"seeds": [0], "points": [{}, {}, {}], "counts": {"ok": 3}, "effects": effects}
    )
    text = _summary(path)
    assert "1 of 2 effects exclude 0" in text
    assert "sft_no_a11y against sft_baseline, step safe-step acc: -30.4 points (-33.8 to -27.1) *" in text
    assert "sft_lora against sft_baseline, task task SR: -2.1 points (-7.9 to +3.5)" in text
    assert "with one seed it covers the test items only" in text


def test_report_counts_are_explained_by_probes(tmp_path):
    preds = [
        {"inquiry_required": True, "outcome": "correct", "probe": True},
        {"inquiry_required": True, "outcome": "missed_inquiry"},
        {"inquiry_required": False, "outcome": "correct"},
    ]
    folder = tmp_path / "eval" / "sft_full"
    folder.mkdir(parents=True)
    (folder / "step_predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    path = _write(
        tmp_path,
        "06_inspect_trajectories",
        {
            "pair": ["sft_full", None],
            "n_steps": {"sft_full": 3},
            "outcomes": {"sft_full": {"correct": 2, "missed_inquiry": 1}},
        },
    )
    text = _summary(path)
    assert "sft_full: 3 step predictions = 2 test steps + 1 inquiry probes" in text
    assert "asked where due (step ISR) 0.50 (0.09-0.91) 1/2" in text


def test_a_subject_without_a_summary_fails_loudly(tmp_path):
    with pytest.raises(KeyError, match="no closing summary about 'weather'"):
        closing.summary(_write(tmp_path, "99_other", {}), "weather")


def test_the_pooled_grpo_effect_is_stated_per_cpu_kind(tmp_path):
    from inquire_lib.evaluation.pooled import stage_effects

    def step(name, k, n, kind):
        return {"checkpoint": name, "device": {"cpu_kind": kind}, "overall": _overall((k, n))}

    start = step("sft_weak", 9, 40, "avx512_bf16")
    seeds = [step("grpo_weak", 30, 40, "avx512_bf16"), step("grpo_weak_s1", 28, 40, "avx512_bf16")]
    stages = {"sft_weak": _overall((9, 40)), "grpo_weak": _overall((30, 40))}
    path = _write(
        tmp_path,
        "03_grpo_action_level",
        {"stages": stages, "pooled_effects": {"grpo_weak": stage_effects(start, seeds)}},
    )
    text = _summary(path)
    assert "grpo_weak, seeds pooled (2 runs, avx512_bf16): step ISR changes by +50.0 points (" in text
    assert "an interval that excludes 0." in text


def test_the_asking_comparison_is_read_out_per_agent(tmp_path):
    learned = {"success_rate": wilson(3, 20), "isr": wilson(4, 10), "needless_episodes": wilson(1, 20)}
    path = _write(
        tmp_path,
        "05_evaluate",
        {
            "checkpoints": [],
            "asking": {
                "sft_full": {
                    "verdict": "sft_full: AUC learned 0.82 (0.73-0.90), confidence 0.73 (0.64-0.82): neither.",
                    "tasks": [{"asker": "learned", **learned}],
                }
            },
        },
    )
    text = _summary(path)
    assert "**When to ask, learned against a confidence threshold**" in text
    assert (
        "- sft_full: AUC learned 0.82 (0.73-0.90), confidence 0.73 (0.64-0.82): neither. Online at each family's "
        "validation point: learned task SR 3/20, task ISR 4/10, needless episodes 1/20." in text
    )


def test_a_change_that_cannot_part_says_how_many_items_it_would_need(tmp_path):
    path = _write(
        tmp_path,
        "03_grpo_action_level",
        {
            "stages": {"sft_weak": _overall((21, 40)), "grpo_weak": _overall((27, 40))},
            "provenance": {"grpo_weak": "shipped result grpo_weak-x: `inquire train grpo`, 60 examples"},
            "short_run": {
                "name": "grpo_weak_short",
                "seconds": 90.0,
                "provenance": "trained here: 2 steps, 90 s on avx2",
            },
        },
    )
    text = _summary(path)
    need = closing.parts_at(21 / 40, 27 / 40)
    assert 100 < need < 200  # a 15-point change near the middle of the scale
    assert f"the step ISR intervals part from about {need} items each; this run has 40" in text
    assert "- grpo_weak: shipped result grpo_weak-x: `inquire train grpo`, 60 examples" in text
    assert "- grpo_weak_short: trained here: 2 steps, 90 s on avx2; a short run to watch training, not scored" in text


def test_parts_at_is_the_first_size_whose_intervals_part():
    n = closing.parts_at(0.0, 0.9)
    assert wilson(0, n)["hi"] < wilson(round(0.9 * n), n)["lo"]
    assert not wilson(0, n - 1)["hi"] < wilson(round(0.9 * (n - 1)), n - 1)["lo"]
    assert closing.parts_at(0.5, 0.5) is None


def test_stage_3_and_the_chain_are_read_against_always_act(tmp_path):
    settings = {**SETTINGS, "task_eval_tasks": 40, "eval_tasks": 10, "task_checkpoints": ["grpo_task"]}
    _write(tmp_path, "placeholder", {})
    _task(tmp_path, "always_act", (20, 40))
    _task(tmp_path, "grpo_task", (34, 40))
    path = _write(
        tmp_path, "04_grpo_task_level", {"task_level": {"grpo_task": {"success_rate": wilson(34, 40)}}}, settings
    )
    text = _summary(path)
    assert "always_act (reference): task SR 0.50 (0.35-0.65) 20/40" in text
    assert "Task SR of grpo_task lies above always_act's with intervals apart (+35.0 points)" in text
    assert "only grpo_task is played online on this profile (`task_checkpoints`)" in text
    (tmp_path / "metrics" / "step_grpo_task.json").write_text(
        json.dumps({"checkpoint": "grpo_task", "overall": _overall((36, 40))})
    )
    path = _write(
        tmp_path, "05_evaluate", {"checkpoints": ["grpo_task"], "asking": {}}, {**settings, "logit_passes": False}
    )
    text = _summary(path)
    assert "Task SR of grpo_task lies above always_act's with intervals apart" in text
    assert "Learned asking against a confidence threshold is not compared on this profile" in text
    assert "`inquire evaluate sft_full grpo_weak grpo_full --level asking` runs its curves apart." in text
    assert "10 held-out tasks step by step and 40 online" in text
