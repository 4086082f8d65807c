"""A stage over training seeds: each seed's change, the mean and spread, and the gain aim."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inquire_lib.evaluation.metrics import wilson
from inquire_lib.evaluation.seeds import meets_gain_aim, seed_changes
from inquire_lib.viz.plots import seed_table


def overall(isr_k, needless_k, safe_k, n_inq=200, n_safe=776):
    return {
        "inquiry_recall": wilson(isr_k, n_inq),
        "needless_rate": wilson(needless_k, n_safe),
        "safe_step_accuracy": wilson(safe_k, n_safe),
        "step_accuracy": wilson(safe_k, n_safe),
    }


START = overall(20, 2, 600)  # ISR 0.10


def test_each_seeds_change_and_the_mean_and_spread():
    seeds = {
        "grpo_weak": overall(120, 10, 600),
        "grpo_weak_s1": overall(100, 5, 596),
        "grpo_weak_s2": overall(80, 2, 604),
    }
    t = seed_changes(START, seeds)
    isr = t["inquiry_recall"]
    assert isr["start"] == pytest.approx(0.10)
    assert [round(s["change"], 3) for s in isr["seeds"].values()] == [0.5, 0.4, 0.3]
    assert isr["mean_change"] == pytest.approx(0.4) and isr["min_change"] == pytest.approx(0.3)
    assert isr["max_change"] == pytest.approx(0.5) and isr["sd_change"] == pytest.approx(0.1)
    # each seed keeps its own interval on the test set
    assert isr["seeds"]["grpo_weak_s1"]["lo"] < 0.5 < isr["seeds"]["grpo_weak_s1"]["hi"]
    assert isr["seeds"]["grpo_weak_s1"]["k"] == 100 and isr["seeds"]["grpo_weak_s1"]["n"] == 200
    assert t["safe_step_accuracy"]["min_change"] == pytest.approx(-4 / 776)
    assert seed_changes(START, {"only": overall(40, 2, 600)})["inquiry_recall"]["sd_change"] == 0.0
    with pytest.raises(ValueError, match="no seeds"):
        seed_changes(START, {})


def test_the_gain_aim_needs_the_mean_every_seed_and_no_cost():
    good = {"a": overall(110, 10, 600), "b": overall(100, 10, 592), "c": overall(90, 10, 600)}  # +45, +40, +35
    assert meets_gain_aim(seed_changes(START, good))["met"] is True
    # one seed at +25: the mean is +40 but not every seed reaches +30
    uneven = {"a": overall(130, 10, 600), "b": overall(100, 10, 600), "c": overall(70, 10, 600)}
    aim = meets_gain_aim(seed_changes(START, uneven))
    assert aim["mean_isr_gain"] and not aim["every_seed_isr_gain"] and not aim["met"]
    # asking everywhere: the ISR gain is there, the needless rate is not kept
    loud = {"a": overall(200, 300, 600)}
    aim = meets_gain_aim(seed_changes(START, loud))
    assert aim["mean_isr_gain"] and not aim["every_seed_needless"] and not aim["met"]
    # safe steps lost: 3 points below the start
    costly = {"a": overall(120, 10, 577)}
    aim = meets_gain_aim(seed_changes(START, costly))
    assert not aim["every_seed_safe_step"] and not aim["met"]


def test_the_seed_table_has_a_row_per_seed_and_a_mean_row():
    seeds = {"grpo_weak": overall(120, 10, 600), "grpo_weak_s1": overall(100, 5, 596)}
    df = seed_table({"grpo_weak": seed_changes(START, seeds)})
    assert list(df.index) == [
        ("grpo_weak", "grpo_weak"),
        ("grpo_weak", "grpo_weak_s1"),
        ("grpo_weak", "mean (min / max, sd)"),
    ]
    assert df.loc[("grpo_weak", "grpo_weak"), "inquiry_recall change"] == "+50.0"
    assert df.loc[("grpo_weak", "mean (min / max, sd)"), "inquiry_recall change"] == "+45.0 (+40.0 / +50.0, 7.1)"
    assert df.loc[("grpo_weak", "grpo_weak_s1"), "inquiry_recall"].startswith("0.50 (")


def test_a_seed_worker_writes_to_the_run_log_not_to_the_console(tmp_path):
    """What a GRPO seed worker prints (TRL's metric lines) lands in the run's log file; the console that
    runs the notebook sees none of it."""
    log = tmp_path / "logs" / "grpo_seeds.log"
    code = (
        "import sys; from inquire_lib.stages.grpo_seeds import _quiet_worker; "
        f"_quiet_worker({str(log)!r}); print({{'loss': '0.5'}}); print('bar', file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert sorted(log.read_text().splitlines()) == ["bar", "{'loss': '0.5'}"]
