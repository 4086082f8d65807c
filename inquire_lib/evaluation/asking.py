"""When to ask, compared: learned asking (the bias on the ask decision, `evaluation.operating_curve`)
against the confidence-threshold asker (`evaluation.confidence`) on one checkpoint, read off their two
curves on the same axes.

The AUCs say which family ranks inquiry steps above safe ones better overall, and their bootstrap
intervals whether that difference stands above the test set's noise. *Where* one beats the other is read
at fixed needless-inquiry budgets: the highest step ISR each curve reaches while at most that share of
the safe steps ask (the operating point a user who tolerates that many needless questions would pick).
"""

from __future__ import annotations

# needless-inquiry budgets at which the two curves are read side by side
NEEDLESS_BUDGETS: tuple[float, ...] = (0.02, 0.05, 0.10, 0.20)
# an ISR difference at a budget smaller than this is called even (a few inquiry steps on the test split)
EVEN_WITHIN = 0.05


def isr_within(points: list[dict], budget: float) -> float:
    """The highest step ISR among `points` whose needless-inquiry rate is at most `budget` (0 when none
    is: the never-ask corner is always within any budget)."""
    return max(
        (p["isr"] or 0.0 for p in points if p["needless"] is not None and p["needless"] <= budget + 1e-12),
        default=0.0,
    )


def compare_curves(learned: dict, confidence: dict, budgets=NEEDLESS_BUDGETS) -> dict:
    """Both AUCs with their intervals, whether the intervals lie apart (and who is above), and the ISR of
    each family at each needless budget (`isr_within`)."""
    la, ca = learned["auc"], confidence["auc"]
    known = la.get("value") is not None and ca.get("value") is not None
    if known and la["lo"] > ca["hi"]:
        winner = "learned"
    elif known and ca["lo"] > la["hi"]:
        winner = "confidence"
    else:
        winner = None if known else "n/a"
    return {
        "auc": {"learned": la, "confidence": ca},
        "auc_apart": winner in ("learned", "confidence"),
        "auc_winner": winner,
        "at_budget": [
            {
                "needless_at_most": b,
                "learned_isr": isr_within(learned["points"], b),
                "confidence_isr": isr_within(confidence["points"], b),
            }
            for b in budgets
        ],
    }


def auc_text(a: dict) -> str:
    """An AUC record as "0.92 (0.90-0.95)", "n/a" without a value."""
    return "n/a" if a.get("value") is None else f"{a['value']:.2f} ({a['lo']:.2f}-{a['hi']:.2f})"


def verdict(agent: str, compared: dict) -> str:
    """One sentence read off the comparison: does learned asking beat the free threshold, and where."""
    auc = compared["auc"]
    head = f"{agent}: AUC learned {auc_text(auc['learned'])}, confidence {auc_text(auc['confidence'])}"
    winner = compared["auc_winner"]
    if winner == "n/a":
        return f"{head}: no comparison (a class of steps is empty)."
    if winner == "learned":
        overall = "learned asking beats the free threshold overall (the intervals lie apart)"
    elif winner == "confidence":
        overall = "the free threshold beats learned asking overall (the intervals lie apart)"
    else:
        overall = "neither family is better overall (the intervals overlap)"
    ahead = lambda who: [
        r["needless_at_most"]
        for r in compared["at_budget"]
        if (r["learned_isr"] - r["confidence_isr"]) * (1 if who == "learned" else -1) > EVEN_WITHIN
    ]
    where = []
    for who, label in (("learned", "learned asking"), ("confidence", "the threshold")):
        budgets = ahead(who)
        if budgets:
            listed = ", ".join(f"{b:.2f}" for b in budgets)
            where.append(f"{label} asks at more inquiry steps with at most {listed} of the safe steps asking")
    return f"{head}: {overall}; " + ("; ".join(where) if where else "at every budget the two are within 5 points") + "."


def task_row(asker: str, metrics: dict, errors: dict) -> dict:
    """One row of the task-level table: an asker's online rates (`evaluation.metrics.task_rates`) with
    its over-execution and over-soliciting (`evaluation.metrics.asking_errors`), overall."""
    o, e = metrics["overall"], errors["overall"]
    return {
        "asker": asker,
        "n": o["n"],
        "success_rate": o["success_rate"],
        "isr": o["isr"],
        "needless_episodes": o["needless_rate"],
        "unsafe": o["unsafe_rate"],
        "over_execution": e["over_execution"],
        "over_soliciting": e["over_soliciting"],
    }
