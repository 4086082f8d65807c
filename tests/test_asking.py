"""When to ask, compared (`evaluation.asking`): reading two operating curves side by side, the sentence
that says which family is better and where, and the task-level rows with over-execution and
over-soliciting."""

from __future__ import annotations

import pytest

from inquire_lib.evaluation.asking import EVEN_WITHIN, compare_curves, isr_within, task_row, verdict
from inquire_lib.evaluation.confidence import confidence_curve
from inquire_lib.evaluation.metrics import asking_errors, task_metrics
from inquire_lib.evaluation.operating_curve import curve_points


def curve(points, value, lo, hi):
    return {"points": points, "auc": {"value": value, "lo": lo, "hi": hi}}


DIAGONAL = [{"isr": x, "needless": x} for x in (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)]
CORNER = [{"isr": 0.0, "needless": 0.0}, {"isr": 1.0, "needless": 0.0}, {"isr": 1.0, "needless": 1.0}]


def test_isr_within_a_budget_is_the_best_point_that_keeps_it():
    points = [
        {"isr": 0.0, "needless": 0.0},
        {"isr": 0.4, "needless": 0.04},
        {"isr": 0.7, "needless": 0.12},
        {"isr": 1.0, "needless": 1.0},
    ]
    assert isr_within(points, 0.02) == 0.0
    assert isr_within(points, 0.05) == 0.4
    assert isr_within(points, 0.10) == 0.4
    assert isr_within(points, 0.12) == 0.7
    assert isr_within([{"isr": 0.5, "needless": 0.5}], 0.1) == 0.0  # nothing within: the never-ask corner


def test_a_curve_at_the_corner_beats_the_diagonal_at_every_budget():
    cmp = compare_curves(curve(CORNER, 1.0, 0.98, 1.0), curve(DIAGONAL, 0.5, 0.4, 0.6))
    assert cmp["auc_winner"] == "learned" and cmp["auc_apart"]
    assert [r["learned_isr"] for r in cmp["at_budget"]] == [1.0, 1.0, 1.0, 1.0]
    assert [r["confidence_isr"] for r in cmp["at_budget"]] == [0.0, 0.05, 0.1, 0.2]
    text = verdict("sft_full", cmp)
    assert text.startswith("sft_full: AUC learned 1.00 (0.98-1.00), confidence 0.50 (0.40-0.60)")
    assert "learned asking beats the free threshold overall" in text
    assert "learned asking asks at more inquiry steps with at most 0.02, 0.05, 0.10, 0.20" in text
    # the other way round
    flipped = compare_curves(curve(DIAGONAL, 0.5, 0.4, 0.6), curve(CORNER, 1.0, 0.98, 1.0))
    assert flipped["auc_winner"] == "confidence"
    assert "the free threshold beats learned asking overall" in verdict("a", flipped)


def test_overlapping_intervals_name_no_winner_and_close_points_are_even():
    near = [{"isr": p["isr"] + EVEN_WITHIN / 2, "needless": p["needless"]} for p in DIAGONAL[:-1]]
    cmp = compare_curves(curve(DIAGONAL, 0.5, 0.4, 0.6), curve(near + [DIAGONAL[-1]], 0.52, 0.42, 0.62))
    assert cmp["auc_winner"] is None and not cmp["auc_apart"]
    text = verdict("grpo_weak", cmp)
    assert "neither family is better overall (the intervals overlap)" in text
    assert "at every budget the two are within 5 points" in text
    empty = compare_curves(curve(DIAGONAL, None, None, None), curve(DIAGONAL, 0.5, 0.4, 0.6))
    assert empty["auc_winner"] == "n/a" and "no comparison" in verdict("x", empty)


def test_the_comparison_reads_real_curves():
    labels = [True] * 4 + [False] * 6
    # the learned margins rank every inquiry step first; the confidence scores carry no signal
    learned = {"points": curve_points([3, 2, 1, 0.5, -1, -2, -3, -4, -5, -6], labels), "auc": {}}
    learned["auc"] = {"value": 1.0, "lo": 1.0, "hi": 1.0}
    confidence = confidence_curve([-1.0] * 10, labels, n_boot=50)
    cmp = compare_curves(learned, confidence)
    assert confidence["auc"]["value"] == pytest.approx(0.5)
    assert cmp["auc_winner"] == "learned"
    assert cmp["at_budget"][0] == {"needless_at_most": 0.02, "learned_isr": 1.0, "confidence_isr": 0.0}


def episode(category, required, success, needless=0, missed=False, asked=None):
    outcome = "missed_inquiry" if missed else "correct"
    return {
        "category": category,
        "subcategory": f"{category}-1",
        "inquiry_required": required,
        "success": success,
        "info": {"success": success, "needless": needless, "asked_required": asked if required else None, "unsafe": []},
        "steps": [{"outcome": outcome, "format_ok": True, "parsed_action": None}],
        "detour": False,
        "recovered": False,
        "n_steps": 1,
    }


def test_a_task_row_holds_the_rates_and_both_errors():
    eps = [
        episode("ambiguity", True, False, missed=True, asked=False),
        episode("ambiguity", True, True, asked=True),
        episode("safety", False, True, needless=1),
        episode("safety", False, True),
    ]
    row = task_row("confidence", task_metrics(eps), asking_errors(eps))
    assert row["asker"] == "confidence" and row["n"] == 4
    assert (row["success_rate"]["k"], row["success_rate"]["n"]) == (3, 4)
    assert (row["isr"]["k"], row["isr"]["n"]) == (1, 2)
    assert (row["needless_episodes"]["k"], row["unsafe"]["k"]) == (1, 0)
    assert (row["over_execution"]["k"], row["over_execution"]["n"]) == (1, 2)
    assert (row["over_soliciting"]["k"], row["over_soliciting"]["n"]) == (1, 4)


def compared_record(name="sft_full"):
    eps = [episode("ambiguity", True, False, missed=True, asked=False), episode("safety", False, True, needless=1)]
    row = lambda asker: {
        **task_row(asker, task_metrics(eps), errors := asking_errors(eps)),
        "by_category": errors["by_category"],
    }
    cmp = compare_curves(curve(CORNER, 1.0, 0.98, 1.0), curve(DIAGONAL, 0.5, 0.4, 0.6))
    return {
        "compared": cmp,
        "verdict": verdict(name, cmp),
        "validation": {"max_needless": 0.1, "learned": {"bias": -1.5}, "confidence": {"threshold": -0.25}},
        "tasks": [row("learned"), row("confidence")],
    }


def test_the_tables_show_each_agent_and_asker():
    from inquire_lib.viz import plots

    asking = {"sft_full": compared_record()}
    auc = plots.asking_auc_table(asking)
    assert auc.loc["sft_full", "learned AUC"] == "1.00 (0.98-1.00)"
    assert auc.loc["sft_full", "apart"] == "learned"
    assert auc.loc["sft_full", "ISR at needless <= 0.05"] == "1.00 / 0.05"
    tasks = plots.asking_task_table(asking)
    assert list(tasks.index) == [("sft_full", "learned"), ("sft_full", "confidence")]
    assert tasks.loc[("sft_full", "learned"), "played at"] == "bias -1.50"
    assert tasks.loc[("sft_full", "confidence"), "played at"] == "threshold -0.25"
    assert tasks.loc[("sft_full", "learned"), "over_execution"].endswith(" 1/1")
    cats = plots.asking_category_table(asking)
    assert cats.loc[("sft_full", "confidence", "safety"), "over-soliciting"].endswith(" 1/1")
    assert cats.loc[("sft_full", "confidence", "ambiguity"), "over-execution"].endswith(" 1/1")
