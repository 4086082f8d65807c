"""The inquiry operating curve: step ISR against the needless-inquiry rate as a bias on the ask
decision sweeps from strongly negative to strongly positive, like an ROC curve.

The ask-or-act decision is one forking token. With pre-action reasoning it is the word after
"Inquiry check:" ("needed" against "not"); without it, the action name in the tool call
("call_user" against the rest). Greedy decoding picks the ask token exactly when its margin

    d = logit(ask token) - max over every other token of its logit

plus the bias is positive. So one greedy pass that records d at the fork gives the whole curve:
at bias b a step asks iff d + b > 0. ISR(b) is the share of inquiry steps that ask, needless(b)
the share of safe steps that ask, and the area under the curve is the probability that an inquiry
step has a larger margin than a safe step (Mann-Whitney). The curve moving up means the model
learned *when* to ask; a point sliding along the same curve means it only asks more or less often.

A step whose completion never reaches the fork (it wrote something else) gets d = -inf: it does
not ask at any finite bias. `verify_points` re-generates with the bias applied for real, to check
that the decision at the fork carries through to the tool call.

Both passes run on HF whatever `eval_engine` says: they read the logits at the fork and bias them, and the
OpenVINO engine (`evaluation.engine`) has no logits processor.
"""

from __future__ import annotations

from ..profiles import EvalSettings, ModelSettings
import math

import numpy as np

from ..agent.actions import parse_completion
from .fork import ForkBias, find_fork


# ------------------------------------------------------------------------ pure curve maths
def curve_points(margins, labels, biases=None) -> list[dict]:
    """(bias, isr, needless) for each bias; `labels` True where asking was required.

    Default biases: every threshold between distinct finite margins, plus both ends, so the curve
    runs from (0, 0) to (1, 1) whenever all margins are finite."""
    d = np.asarray(margins, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if d.shape != y.shape:
        raise ValueError(f"margins and labels differ in length: {d.shape} vs {y.shape}")
    if biases is None:
        finite = np.unique(d[np.isfinite(d)])
        # asking needs d + b > 0, so b = -t asks exactly for the margins above t
        cuts = (
            np.concatenate([[finite[-1] if len(finite) else 0.0], finite[::-1] - 1e-9])
            if len(finite)
            else np.array([0.0])
        )
        biases = sorted({-float(c) for c in cuts} | ({-float(finite.min()) + 1.0} if len(finite) else set()))
    pos, neg = y.sum(), (~y).sum()
    out = []
    for b in biases:
        ask = d + b > 0
        out.append(
            {
                "bias": float(b),
                "isr": float(ask[y].sum() / pos) if pos else None,
                "needless": float(ask[~y].sum() / neg) if neg else None,
            }
        )
    return out


def auc(margins, labels) -> float | None:
    """Area under the ISR-vs-needless curve: P(margin of an inquiry step > margin of a safe step),
    ties counting one half. None when either class is empty."""
    d = np.asarray(margins, dtype=float)
    y = np.asarray(labels, dtype=bool)
    pos, neg = d[y], d[~y]
    if len(pos) == 0 or len(neg) == 0:
        return None
    # ranks over the pooled margins (average ranks for ties); -inf sorts first, as it should
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    pooled = np.concatenate([pos, neg])[order]
    ranks = np.empty(len(pooled))
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1] == pooled[i]:
            j += 1
        ranks[i : j + 1] = (i + j) / 2 + 1
        i = j + 1
    r = np.empty(len(pooled))
    r[order] = ranks
    u = r[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


def bootstrap_auc(margins, labels, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """AUC with a percentile bootstrap interval, resampling inquiry and safe steps separately."""
    d = np.asarray(margins, dtype=float)
    y = np.asarray(labels, dtype=bool)
    value = auc(d, y)
    if value is None:
        return {"value": None, "lo": None, "hi": None, "n_pos": int(y.sum()), "n_neg": int((~y).sum())}
    rng = np.random.default_rng(seed)
    pos, neg = d[y], d[~y]
    stats = []
    for _ in range(n_boot):
        p = pos[rng.integers(0, len(pos), len(pos))]
        n = neg[rng.integers(0, len(neg), len(neg))]
        stats.append(auc(np.concatenate([p, n]), np.concatenate([np.ones(len(p), bool), np.zeros(len(n), bool)])))
    lo, hi = np.quantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {
        "value": value,
        "lo": float(lo),
        "hi": float(hi),
        "n_pos": len(pos),
        "n_neg": len(neg),
        "n_boot": n_boot,
        "seed": seed,
    }


def choose_point(points: list[dict], max_needless: float) -> dict:
    """The operating point to play, chosen on validation: of the curve's `points`, the highest step ISR
    among those whose needless-inquiry rate is at most `max_needless`, ties to the lower needless rate
    (the point that asks less for the same recall). The same rule for learned asking's bias and the
    confidence asker's threshold, so the two are played at comparable points. Returns the point with
    `met`; when no point keeps the limit, the lowest needless rate and `met` False."""
    if not points:
        raise ValueError("no operating points to choose from")
    rate = lambda p, key: p[key] if p[key] is not None else 0.0
    within = [p for p in points if rate(p, "needless") <= max_needless + 1e-12]
    if within:
        best = max(within, key=lambda p: (rate(p, "isr"), -rate(p, "needless")))
        return {**best, "met": True}
    return {**min(points, key=lambda p: (rate(p, "needless"), -rate(p, "isr"))), "met": False}


# ------------------------------------------------------------------------ on a checkpoint
def ask_margins(
    model, processor, records: list[dict], profile: EvalSettings, bias: float = 0.0, progress: bool = False
) -> tuple[list[float], list[str]]:
    """Greedy completions with `bias` added to the ask token at the fork, and each step's margin
    there (-inf where the fork was never reached)."""
    from .steps import generate  # torch: the curve maths above stay importable without it

    fork = find_fork(processor.tokenizer, profile.use_think)
    made: list[ForkBias] = []

    def factory() -> ForkBias:
        made.append(ForkBias(processor.tokenizer, fork, bias))
        return made[-1]

    order: list[int] = []
    raw = generate(model, processor, records, profile, progress=progress, logits_processor=factory, order=order)
    margins = in_record_order([m for p in made for m in p.margins], order)
    return [-math.inf if math.isnan(m) else m for m in margins], raw


def learned_policy(model, processor, profile: EvalSettings, bias: float):
    """Learned asking played online at an operating point (an `evaluation.episodes.Policy`): greedy, with
    `bias` added to the ask token at the fork, as the curve's point at that bias predicts."""

    def act(records: list[dict], envs) -> list[str]:
        return ask_margins(model, processor, records, profile, bias=bias)[1]

    return act


def in_record_order(values: list, order: list[int]) -> list:
    """Per-row values of the processors `generate` made, batch after batch, put back in the records'
    order (`order`: the record index of each generated row, as `generate` fills it)."""
    if len(values) != len(order):
        raise RuntimeError(f"processor values for {len(values)} of {len(order)} steps")
    out: list = [None] * len(order)
    for k, v in zip(order, values):
        out[k] = v
    return out


def asks(raw: list[str], profile: ModelSettings) -> list[bool]:
    """Which completions' tool calls ask (`call_user`)."""
    out = []
    for text in raw:
        action = parse_completion(text, require_think=profile.use_think).action
        out.append(action is not None and action.type == "call_user")
    return out


def operating_curve(
    model,
    processor,
    records: list[dict],
    profile: EvalSettings,
    verify_biases=(-4.0, 4.0),
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """The curve of one checkpoint on `records`: points, AUC with a bootstrap interval, and checks
    that the fork decides the action (`agreement` at bias 0; predicted vs generated rates at
    `verify_biases`)."""
    labels = [bool(r["inquiry_required"]) for r in records]
    margins, raw = ask_margins(model, processor, records, profile)
    asked = asks(raw, profile)
    agreement = sum((m > 0) == a for m, a in zip(margins, asked)) / len(records) if records else None
    verified = []
    for b in verify_biases:
        _, raw_b = ask_margins(model, processor, records, profile, bias=b)
        asked_b = np.array(asks(raw_b, profile))
        y = np.array(labels)
        predicted = curve_points(margins, labels, biases=[b])[0]
        verified.append(
            {
                "bias": float(b),
                "predicted_isr": predicted["isr"],
                "predicted_needless": predicted["needless"],
                "isr": float(asked_b[y].mean()) if y.any() else None,
                "needless": float(asked_b[~y].mean()) if (~y).any() else None,
            }
        )
    return {
        **margin_curve(margins, labels, n_boot=n_boot, seed=seed),
        "at_zero": {
            "isr": float(np.mean([a for a, y in zip(asked, labels) if y])) if any(labels) else None,
            "needless": float(np.mean([a for a, y in zip(asked, labels) if not y])) if not all(labels) else None,
        },
        "agreement": agreement,
        "verified": verified,
    }


def margin_curve(margins, labels, n_boot: int = 1000, seed: int = 0) -> dict:
    """The curve that the fork's margins alone give (`labels` True where asking was required): its points,
    how many steps reached the fork, and the AUC with its bootstrap interval."""
    labels = [bool(y) for y in labels]
    return {
        "n": len(labels),
        "n_inquiry": sum(labels),
        "fork_reached": sum(math.isfinite(m) for m in margins),
        "margins": [m if math.isfinite(m) else None for m in margins],
        "labels": labels,
        "points": curve_points(margins, labels),
        "auc": bootstrap_auc(margins, labels, n_boot=n_boot, seed=seed),
    }
