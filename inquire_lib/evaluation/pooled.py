"""A training effect stated over seeds and per machine kind: the change in one rate (say step ISR) from
a start checkpoint to the checkpoints trained from it (say GRPO from the weak inquirer, one per seed),
with the seeds' counts pooled and a 95% interval for the difference.

The interval is Newcombe's hybrid score interval for a difference of two proportions (Newcombe 1998,
method 10), built from each side's Wilson interval (`metrics.wilson`): with p1 the pooled rate of the
trained runs, p2 the start's, (l, u) their Wilson bounds,

    lo = p1 - p2 - sqrt((p1 - l1)^2 + (u2 - p2)^2),   hi = p1 - p2 + sqrt((u1 - p1)^2 + (p2 - l2)^2).

Pooling adds every seed's successes and items into one proportion per side (the start's runs likewise,
one run when every seed starts from the same checkpoint). It treats the seeds' items as independent
draws: seed-to-seed spread counts only as far as it shows in the pooled counts, so each run's own rate
is reported beside it, and `effects.effect` (a bootstrap over seeds and items) is the check where seeds
disagree. The two sides are taken as independent; on shared test items, whose outcomes go together,
that makes the interval wider than a paired one, not narrower.

Runs group by the CPU kind their metrics name (`device.cpu_kind`, else `manifest.device.cpu_kind`,
"unknown" where absent): a start trained on one kind is compared only with the runs of that kind, each
kind reported on its own, because the same code and seed train other starts on other kinds.

Plain Python; reads nothing itself.
"""

from __future__ import annotations

import math

from .metrics import wilson

UNKNOWN_KIND = "unknown"
INTERVAL = "Newcombe hybrid score (method 10) on seed-pooled counts, 95%"


def cpu_kind_of(metrics: dict) -> str:
    """The CPU kind a run's metrics name (their `device`, as every step and task metrics file carries it, or
    their manifest's), "unknown" where they name none."""
    device = metrics.get("device") or (metrics.get("manifest") or {}).get("device") or {}
    kind = device.get("cpu_kind") if isinstance(device, dict) else None
    return str(kind) if kind else UNKNOWN_KIND


def run_counts(metrics: dict, rate: str) -> dict:
    """One run's successes and items for `rate` (its overall {k, n}, as `metrics.step_rates` and
    `task_rates` write them), with its checkpoint and CPU kind."""
    counts = (metrics.get("overall") or {}).get(rate)
    if not isinstance(counts, dict) or "k" not in counts or "n" not in counts:
        raise KeyError(f"metrics of {metrics.get('checkpoint')!r} have no counts for {rate!r}")
    return {
        "checkpoint": metrics.get("checkpoint"),
        "cpu_kind": cpu_kind_of(metrics),
        "k": int(counts["k"]),
        "n": int(counts["n"]),
        "value": counts["k"] / counts["n"] if counts["n"] else None,
    }


def newcombe(k1: int, n1: int, k2: int, n2: int, z: float = 1.96) -> dict:
    """k1/n1 - k2/n2 with Newcombe's hybrid score interval (see the module's docstring); None where
    either side has no items."""
    a, b = wilson(k1, n1, z), wilson(k2, n2, z)
    if a["value"] is None or b["value"] is None:
        return {"diff": None, "lo": None, "hi": None, "excludes_zero": False}
    p1, p2 = a["value"], b["value"]
    diff = p1 - p2
    lo = diff - math.sqrt((p1 - a["lo"]) ** 2 + (b["hi"] - p2) ** 2)
    hi = diff + math.sqrt((a["hi"] - p1) ** 2 + (p2 - b["lo"]) ** 2)
    return {"diff": diff, "lo": lo, "hi": hi, "excludes_zero": lo > 0 or hi < 0}


def pooled_effect(starts: list[dict], trained: list[dict], rate: str = "inquiry_recall") -> dict:
    """The effect of training on `rate`: the pooled rate of the `trained` runs' metrics minus the pooled
    rate of the `starts`', per CPU kind, with Newcombe's interval (see the module's docstring).

    Returns {"rate", "interval", "by_cpu_kind": {kind: {"diff", "lo", "hi", "excludes_zero", "start",
    "trained" (each pooled, with its Wilson interval), "runs" (each run's counts)}}}; a kind with runs on
    one side only has diff None."""
    runs = {"start": [run_counts(m, rate) for m in starts], "trained": [run_counts(m, rate) for m in trained]}
    kinds = sorted({r["cpu_kind"] for side in runs.values() for r in side})
    out = {}
    for kind in kinds:
        mine = {side: [r for r in rs if r["cpu_kind"] == kind] for side, rs in runs.items()}
        pooled = {side: (sum(r["k"] for r in rs), sum(r["n"] for r in rs)) for side, rs in mine.items()}
        (k1, n1), (k2, n2) = pooled["trained"], pooled["start"]
        out[kind] = {**newcombe(k1, n1, k2, n2), "trained": wilson(k1, n1), "start": wilson(k2, n2), "runs": mine}
    return {"rate": rate, "interval": INTERVAL, "by_cpu_kind": out}


def change_text(effect: dict, unit: str = "") -> str:
    """A difference in points with its interval, "+22.5 (+15.2 to +29.0)" (`unit` " points": "+22.5 points
    (+15.2 to +29.0)"); "n/a" without one."""
    if effect.get("diff") is None:
        return "n/a"
    return f"{100 * effect['diff']:+.1f}{unit} ({100 * effect['lo']:+.1f} to {100 * effect['hi']:+.1f})"


# the step rates a GRPO stage's effect is stated on: does it ask more where it must, less where it need not,
# and act as well where nothing calls for asking
STAGE_RATES = ("inquiry_recall", "needless_rate", "safe_step_accuracy")


def stage_effects(start: dict, trained: list[dict], rates=STAGE_RATES) -> dict[str, dict]:
    """`pooled_effect` of one stage on each of `rates`: the start's step metrics against those of the runs
    trained from it, one per seed."""
    return {rate: pooled_effect([start], trained, rate) for rate in rates}
