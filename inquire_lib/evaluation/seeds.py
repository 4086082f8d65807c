"""A training run repeated over seeds: each seed's change from the start, and their mean and spread.

One GRPO run of the tiny model is partly luck (its validation ISR wanders, and equal settings have
ended 0.30, 0.33 and 0.42 apart), so a stage's effect is stated over training seeds: for every rate
the start's value, each seed's value with its Wilson interval and its change from the start, the mean
change, the smallest and largest, and the standard deviation across seeds. The interval of one seed
is the test set's; the spread across seeds is the run-to-run part. Plain Python, reads nothing itself.
"""

from __future__ import annotations

import statistics

KEYS = ("inquiry_recall", "needless_rate", "safe_step_accuracy", "step_accuracy")


def seed_changes(start: dict, seeds: dict[str, dict], keys=KEYS) -> dict:
    """Per rate: `start` (its value), `seeds` ({name: value, lo, hi, k, n, change}), `mean_change`,
    `min_change`, `max_change`, `sd_change` (0 with one seed). `start` and each of `seeds` are the
    `overall` part of step metrics (`evaluation.metrics.step_metrics`); a rate without a value counts as 0."""
    if not seeds:
        raise ValueError("no seeds to summarise")
    out = {}
    for key in keys:
        before = start[key]["value"] or 0.0
        per = {
            name: {
                **{f: m[key][f] for f in ("value", "lo", "hi", "k", "n")},
                "change": (m[key]["value"] or 0.0) - before,
            }
            for name, m in seeds.items()
        }
        changes = [p["change"] for p in per.values()]
        out[key] = {
            "start": start[key]["value"],
            "seeds": per,
            "mean_change": statistics.fmean(changes),
            "min_change": min(changes),
            "max_change": max(changes),
            "sd_change": statistics.stdev(changes) if len(changes) > 1 else 0.0,
        }
    return out


def meets_gain_aim(
    changes: dict,
    min_mean: float = 0.40,
    min_each: float = 0.30,
    max_needless: float = 0.10,
    max_safe_drop: float = 0.02,
) -> dict:
    """Whether a GRPO stage reached the workbench's aim for the weak inquirer: step ISR up by at least
    `min_mean` on average and `min_each` for every seed, while every seed keeps the needless-inquiry rate
    at most `max_needless` and safe-step accuracy at most `max_safe_drop` below the start's. Returns each
    condition and `met` (all of them). `changes`: a `seed_changes` table with those three rates."""
    isr, safe = changes["inquiry_recall"], changes["safe_step_accuracy"]
    eps = 1e-9  # a rate exactly at a bound meets it, whatever the float rounding of k/n
    checks = {
        "mean_isr_gain": isr["mean_change"] >= min_mean - eps,
        "every_seed_isr_gain": isr["min_change"] >= min_each - eps,
        "every_seed_needless": all(
            (m["value"] or 0.0) <= max_needless + eps for m in changes["needless_rate"]["seeds"].values()
        ),
        "every_seed_safe_step": safe["min_change"] >= -max_safe_drop - eps,
    }
    return {**checks, "met": all(checks.values())}
