"""Ablation effect sizes: the paired bootstrap over seeds and items gives 0 for a copy of the
baseline and an interval away from 0 for a clearly better variant."""

from __future__ import annotations

import json

import pytest

from inquire_lib.evaluation.effects import effect, item_outcomes


def _pred(i, required, asked, right):
    return {
        "id": f"s{i}",
        "inquiry_required": required,
        "format_ok": True,
        "arg_ok": right,
        "parsed_action": {"action": "call_user" if asked else "click"},
    }


def test_item_outcomes_count_only_the_rates_denominator():
    preds = [
        _pred(0, True, True, True),
        _pred(1, True, False, False),
        _pred(2, False, True, False),
        _pred(3, False, False, True),
    ]
    assert item_outcomes(preds, "inquiry_recall") == {"s0": 1, "s1": 0}
    assert item_outcomes(preds, "needless_rate") == {"s2": 1, "s3": 0}
    assert item_outcomes(preds, "step_accuracy") == {"s0": 1, "s1": 0, "s2": 0, "s3": 1}
    eps = [{"task_id": "t0", "success": True, "inquiry_required": True, "info": {"asked_required": None}}]
    assert item_outcomes(eps, "isr", kind="task") == {"t0": 0} and item_outcomes(eps, "success_rate", "task") == {
        "t0": 1
    }
    with pytest.raises(KeyError, match="unknown step rate 'recall'"):
        item_outcomes(preds, "recall")


def test_a_probe_counts_toward_inquiry_recall_only():
    preds = [_pred(0, True, True, True), {**_pred(1, True, False, False), "probe": True}, _pred(2, False, False, True)]
    assert item_outcomes(preds, "inquiry_recall") == {"s0": 1, "s1": 0}
    assert item_outcomes(preds, "step_accuracy") == {"s0": 1, "s2": 1}
    assert item_outcomes(preds, "format") == {"s0": 1, "s2": 1}


def test_a_copy_of_the_baseline_has_no_effect():
    base = {s: {f"i{j}": (j * 7 + s) % 3 == 0 for j in range(60)} for s in range(3)}
    out = effect(base, base)
    assert out["diff"] == 0.0 and out["lo"] == 0.0 and out["hi"] == 0.0 and not out["excludes_zero"]
    assert out["n_seeds"] == 3 and out["n_items"] == 180


def test_a_clearly_better_variant_excludes_zero_and_a_noisy_one_does_not():
    base = {s: {f"i{j}": int(j % 10 < 3) for j in range(80)} for s in range(3)}  # 0.30
    better = {s: {f"i{j}": int(j % 10 < 7) for j in range(80)} for s in range(3)}  # 0.70
    out = effect(better, base)
    assert out["diff"] == pytest.approx(0.4) and out["excludes_zero"] and 0.2 < out["lo"] < 0.4 < out["hi"] < 0.6
    assert out["per_seed"] == {0: pytest.approx(0.4), 1: pytest.approx(0.4), 2: pytest.approx(0.4)}
    # seeds that disagree (+0.2, -0.2, 0): the mean is 0 and the interval spans it
    mixed = {
        0: {f"i{j}": int(j % 10 < 5) for j in range(80)},
        1: {f"i{j}": int(j % 10 < 1) for j in range(80)},
        2: base[2],
    }
    out = effect(mixed, base)
    assert out["diff"] == pytest.approx(0.0, abs=1e-12) and out["lo"] < 0 < out["hi"] and not out["excludes_zero"]


def test_only_shared_seeds_and_items_are_compared():
    v = {0: {"a": 1, "b": 1, "c": 1}, 5: {"a": 1}}
    b = {0: {"a": 0, "b": 0, "z": 1}, 1: {"a": 0}}
    out = effect(v, b)
    assert out["n_seeds"] == 1 and out["n_items"] == 2 and out["diff"] == 1.0
    assert effect({0: {"a": 1}}, {1: {"a": 0}})["diff"] is None


def _write_point(root, name, asks, successes):
    folder = root / "smoke" / "default" / "eval" / name
    folder.mkdir(parents=True)
    preds = [{**_pred(i, i < 10, a, not a), "id": f"s{i}"} for i, a in enumerate(asks)]
    (folder / "step_predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    eps = [
        {
            "task_id": f"t{i}",
            "success": s,
            "inquiry_required": i % 2 == 0,
            "info": {"asked_required": s if i % 2 == 0 else None, "needless": 0, "unsafe": []},
        }
        for i, s in enumerate(successes)
    ]
    (folder / "trajectories.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))


def test_the_ablation_table_compares_each_variant_with_its_reference_on_disk(tmp_path, monkeypatch):
    from inquire_lib import ablations
    from inquire_lib.profiles import get_profile
    from inquire_lib.viz.plots import ablation_effects

    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path))
    prof = get_profile("smoke")
    for s in (0, 1):
        _write_point(tmp_path, f"abl_sft_baseline_s{s}", [False] * 20, [False] * 10)
        _write_point(tmp_path, f"abl_sft_no_think_s{s}", [True] * 10 + [False] * 10, [True] * 10)
    _write_point(tmp_path, "abl_sft_no_a11y_s0", [False] * 20, [False] * 10)  # seed 1 missing
    table = ablations.effects_table(prof, ["sft_baseline", "sft_no_think", "sft_no_a11y"], [0, 1], n_boot=200)
    row = lambda v, rate: table[(table["variant"] == v) & (table["rate"] == rate)].iloc[0]
    isr = row("sft_no_think", "inquiry_recall")
    assert (isr["effect"], isr["lo"], isr["hi"], isr["n_seeds"], isr["n_items"]) == (1.0, 1.0, 1.0, 2, 20)
    assert isr["excludes_zero"] and isr["variant_rate"] == 1.0 and isr["reference_rate"] == 0.0
    assert row("sft_no_think", "needless_rate")["effect"] == 0.0
    assert row("sft_no_think", "success_rate")["effect"] == 1.0
    a11y = row("sft_no_a11y", "step_accuracy")
    assert a11y["n_seeds"] == 1 and a11y["effect"] == 0.0 and not a11y["excludes_zero"]
    assert set(table["variant"]) == {"sft_no_think", "sft_no_a11y"}  # the reference is not compared with itself
    assert len(table) == 2 * (len(ablations.STEP_KEYS) + len(ablations.TASK_KEYS))
    figs = ablation_effects(table)
    assert list(figs) == ["sft_baseline"] and len(figs["sft_baseline"].data) == 8


def test_chain_and_dagger_points_of_one_seed_share_a_sweep_lane():
    from inquire_lib import ablations

    def lane(variant, seed):
        return ablations.lane({"SEED": 0, "VARIANT": variant, "TRAIN_SEED": seed})

    chain = {lane(v, 0) for v in ("chain_sft", "dagger_off", "dagger_on", "chain_grpo", "chain_task")}
    assert len(chain) == 1 and lane("chain_sft", 0) != lane("chain_sft", 1)
    # every other point starts from a checkpoint made before the sweep: a lane of its own
    others = [lane(v, s) for v in ("sft_baseline", "sft_no_think", "grpo_shaped", "grpo_papers_reward") for s in (0, 1)]
    assert len(set(others)) == 8 and not chain & set(others)


def test_chain_sft_runs_before_the_points_that_start_from_it():
    from inquire_lib import ablations

    order = list(ablations.RUN_ORDER)
    assert sorted(order) == sorted(ablations.VARIANTS)
    later = [v for v in order if ablations.VARIANTS[v].group in ("dagger", "chain") and v != "chain_sft"]
    assert later and all(order.index("chain_sft") < order.index(v) for v in later)
    assert order.index("chain_grpo") < order.index("chain_task")
