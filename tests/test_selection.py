"""The rule that chooses a GRPO checkpoint on the validation split."""
from __future__ import annotations

import pytest

from inquire_lib.training.selection import choose, choose_online, ranked


def row(step, isr, safe, needless=0.0):
    return {"step": step, "inquiry_recall": isr, "safe_step_accuracy": safe, "needless_rate": needless,
            "step_accuracy": safe, "format": 1.0}


START = row(0, 0.05, 0.57)


def test_highest_isr_that_keeps_safe_accuracy_and_few_needless_inquiries():
    rows = [row(25, 0.20, 0.57), row(50, 0.55, 0.54), row(75, 0.45, 0.56), row(100, 0.60, 0.57, needless=0.12)]
    chosen, met = choose(START, rows, max_needless=0.10, max_safe_drop=0.02)
    # step 50 drops 3 points, step 100 asks needlessly too often
    assert (chosen["step"], met) == (75, True)


def test_the_floor_is_inclusive_and_relative_to_the_start():
    rows = [row(10, 0.30, 0.55), row(20, 0.40, 0.549)]
    chosen, met = choose(START, rows, max_needless=0.10, max_safe_drop=0.02)
    assert (chosen["step"], met) == (10, True)
    chosen, _ = choose(START, rows, max_needless=0.10, max_safe_drop=0.03)
    assert chosen["step"] == 20


def test_ties_go_to_safer_then_earlier():
    rows = [row(10, 0.40, 0.56), row(20, 0.40, 0.58), row(30, 0.40, 0.58)]
    assert choose(START, rows, 0.10, 0.02)[0]["step"] == 20


def test_none_qualifies_keeps_the_last_and_says_so():
    rows = [row(10, 0.30, 0.40), row(20, 0.50, 0.45)]
    chosen, met = choose(START, rows, 0.10, 0.02)
    assert (chosen["step"], met) == (20, False)


def test_undefined_rates_count_as_zero():
    start = row(0, None, None)
    rows = [row(10, None, 0.5, needless=None), row(20, 0.1, 0.5)]
    assert choose(start, rows, 0.10, 0.02)[0]["step"] == 20


def test_no_rows_is_an_error():
    with pytest.raises(ValueError, match="no checkpoints"):
        choose(START, [], 0.10, 0.02)


def test_ranked_lists_the_qualifying_rows_best_first():
    rows = [row(25, 0.20, 0.57), row(50, 0.55, 0.54), row(75, 0.45, 0.56), row(100, 0.45, 0.57)]
    assert [r["step"] for r in ranked(START, rows, 0.10, 0.02)] == [100, 75, 25]


def test_online_takes_the_best_that_keeps_needless_episodes_down_and_plays_no_further():
    candidates = [row(100, 0.6, 0.57), row(75, 0.5, 0.57), row(25, 0.2, 0.57)]
    shares = {100: 0.15, 75: 0.10, 25: 0.0}
    played = []

    def share(r):
        played.append(r["step"])
        return shares[r["step"]]

    chosen, met, seen = choose_online(candidates, share, 0.10)
    assert (chosen["step"], met) == (75, True) and played == [100, 75]  # bound inclusive; 25 never played
    assert seen == [{"step": 100, "needless_episodes": 0.15}, {"step": 75, "needless_episodes": 0.10}]


def test_online_keeps_the_lowest_share_when_none_meets_the_bound():
    candidates = [row(100, 0.6, 0.57), row(75, 0.5, 0.57), row(25, 0.2, 0.57)]
    shares = {100: 0.30, 75: 0.125, 25: 0.125}
    chosen, met, seen = choose_online(candidates, lambda r: shares[r["step"]], 0.10)
    assert (chosen["step"], met, len(seen)) == (75, False, 3)  # the tie goes to the better candidate
    with pytest.raises(ValueError, match="no checkpoints"):
        choose_online([], lambda r: 0.0, 0.10)
