"""Effect sizes of an ablation: a variant's rate minus the full recipe's, with a bootstrap interval
over training seeds and test items.

For one rate (say step ISR), each (policy, training seed) gives a 0/1 outcome per test item in the
rate's denominator (the inquiry steps for ISR). The effect is the mean over seeds of
rate(variant, seed) - rate(baseline, seed), both on the items the two share. Its 95% interval is a
percentile bootstrap that resamples seeds with replacement and, within each drawn seed, the items
with replacement, paired (the same items for variant and baseline), so it carries both the
run-to-run spread and the finite test set. With one seed only the items are resampled, and the
interval is the test set's alone; say so where it is reported.

`evaluation.pooled` states a training effect from metrics' counts alone: seeds pooled, a Newcombe
interval, each CPU kind apart.

Plain Python and numpy; reads nothing itself.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

_ASK = "call_user"


def _asked(p: dict) -> bool:
    return bool(p.get("parsed_action")) and p["parsed_action"].get("action") == _ASK


# rate -> (which step predictions it counts, which of those succeed): as `metrics.step_rates` defines them
# (a probe counts toward inquiry recall only)
STEP_RATES: dict[str, tuple[Callable[[dict], bool], Callable[[dict], bool]]] = {
    "format": (lambda p: not p.get("probe"), lambda p: bool(p["format_ok"])),
    "step_accuracy": (lambda p: not p.get("probe"), lambda p: bool(p["arg_ok"])),
    "inquiry_recall": (lambda p: bool(p["inquiry_required"]), _asked),
    "needless_rate": (lambda p: not p["inquiry_required"], _asked),
    "safe_step_accuracy": (lambda p: not p["inquiry_required"], lambda p: bool(p["arg_ok"])),
}
# rate -> (which episodes it counts, which succeed): as `metrics.task_rates` defines them
TASK_RATES: dict[str, tuple[Callable[[dict], bool], Callable[[dict], bool]]] = {
    "success_rate": (lambda e: True, lambda e: bool(e["success"])),
    "isr": (lambda e: bool(e["inquiry_required"]), lambda e: e["info"]["asked_required"] is True),
    "needless_rate": (lambda e: True, lambda e: e["info"]["needless"] > 0),
    "unsafe_rate": (lambda e: True, lambda e: bool(e["info"]["unsafe"])),
}


def item_outcomes(items: list[dict], rate: str, kind: str = "step") -> dict[str, int]:
    """{item id: 1 or 0} for the items in `rate`'s denominator (steps by `id`, episodes by `task_id`)."""
    table = STEP_RATES if kind == "step" else TASK_RATES
    if rate not in table:
        raise KeyError(f"unknown {kind} rate {rate!r}; choose one of {sorted(table)}")
    counts, success = table[rate]
    key = "id" if kind == "step" else "task_id"
    return {it[key]: int(success(it)) for it in items if counts(it)}


def effect(
    variant: dict[int, dict[str, int]],
    baseline: dict[int, dict[str, int]],
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """The variant's rate minus the baseline's, mean over the training seeds both have, with a
    paired percentile-bootstrap interval over seeds and items (see the module's docstring).

    `variant` and `baseline` map a training seed to {item id: 0/1}. Returns {"diff", "lo", "hi",
    "excludes_zero", "per_seed": {seed: diff}, "n_seeds", "n_items"} (`n_items` summed over seeds);
    diff None when no seed shares an item."""
    pairs = []
    for s in sorted(set(variant) & set(baseline)):
        common = sorted(set(variant[s]) & set(baseline[s]))
        if common:
            pairs.append(
                (s, np.array([variant[s][i] for i in common], float), np.array([baseline[s][i] for i in common], float))
            )
    if not pairs:
        return {
            "diff": None,
            "lo": None,
            "hi": None,
            "excludes_zero": False,
            "per_seed": {},
            "n_seeds": 0,
            "n_items": 0,
        }
    per_seed = {s: float(v.mean() - b.mean()) for s, v, b in pairs}
    rng = np.random.default_rng(seed)
    draws = np.empty(n_boot)
    for r in range(n_boot):
        chosen = rng.integers(len(pairs), size=len(pairs))
        total = 0.0
        for c in chosen:
            _, v, b = pairs[c]
            idx = rng.integers(len(v), size=len(v))
            total += v[idx].mean() - b[idx].mean()
        draws[r] = total / len(chosen)
    lo, hi = np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2])
    lo, hi = float(lo), float(hi)
    return {
        "diff": float(np.mean(list(per_seed.values()))),
        "lo": lo,
        "hi": hi,
        "excludes_zero": lo > 0 or hi < 0,
        "per_seed": per_seed,
        "n_seeds": len(pairs),
        "n_items": int(sum(len(v) for _, v, _ in pairs)),
    }
