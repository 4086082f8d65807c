"""Metrics with 95% Wilson intervals, of step predictions and of episodes, from their records alone.

Plain Python (no torch): anything holding records (a run on disk, a test's synthetic run) gets the
same numbers the evaluation wrote.

Step level (`step_metrics`, each rate with its interval):
- format: the completion is exactly one <think> then one valid <tool_call> (or a bare tool call
  when the profile drops the reasoning);
- type accuracy: predicted action type == gold type;
- step accuracy: type and argument right (click inside the gold bbox, same text, ...);
- inquiry recall (step ISR): share of inquiry-required steps where the model called the user (with the
  probes: inquiry steps of more tasks, `data.benchmark.inquiry_probes`, that count toward this rate only);
- inquiry precision: share of the model's `call_user` steps where asking was required;
- needless-inquiry rate: share of steps not requiring inquiry where the model asked anyway;
- click-in-bbox: of the gold click steps where the model clicked, the share whose point lands in the gold bbox (an ask
  or another action on a click step counts against step accuracy, not here); safe-step accuracy: step accuracy on
  the steps needing no inquiry;
- asks against the reasoning: of the inquiry-required steps (probes included) where the model asked, the
  share whose own reasoning ended with "Inquiry check: not needed" (the tool call contradicts the decision
  it wrote); reasoning says needed: share of inquiry-required steps whose reasoning decided "needed",
  whatever the tool call then did.
  Together they tell a policy that learned *when* to ask from one whose tool call asks on its own.
- asks answered: of the model's `call_user` steps, the share the simulated user would answer (an inquiry
  step, and a question that names what the step misses, `agent.questions`); UIQ: asks answered over asks
  needed (the inquiry-required steps) plus asks made, so needless and vague questions both cost (MobileWorld's
  ratio; the expert scores 0.5, one answered ask per needed one); its interval is a bootstrap over steps.
Episode level (`task_metrics`): see `evaluation.episodes`.
"""

from __future__ import annotations

import math
import random
from typing import Callable

from ..agent.actions import inquiry_check
from ..agent.task_rewards import task_reward
from ..runs.records import OUTCOMES


def wilson(k: int, n: int, z: float = 1.96) -> dict:
    """Wilson score interval for k successes out of n (value None when n == 0)."""
    if n == 0:
        return {"value": None, "lo": None, "hi": None, "k": 0, "n": 0}
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at k == 0 or k == n the bound is exactly the estimate; rounding must not push it outside
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return {"value": p, "lo": lo, "hi": hi, "k": k, "n": n}


def ratio_interval(nums: list[float], dens: list[float], n_boot: int = 1000, seed: int = 0) -> dict:
    """sum(nums) / sum(dens) with a 95% percentile-bootstrap interval that resamples the items (episodes or
    steps) with replacement: a ratio of counts pooled over items is no binomial rate, so Wilson does not
    apply. Value None when the denominators sum to 0."""
    n, total = len(nums), sum(dens)
    if n == 0 or total == 0:
        return {"value": None, "lo": None, "hi": None, "n": n}
    rng = random.Random(f"ratio:{seed}")
    pairs, boots = list(zip(nums, dens)), []
    for _ in range(n_boot):
        num, den = map(sum, zip(*rng.choices(pairs, k=n)))
        boots.append(num / den if den else 0.0)
    boots.sort()
    lo, hi = boots[int(0.025 * n_boot)], boots[min(n_boot - 1, int(0.975 * n_boot))]
    return {"value": sum(nums) / total, "lo": lo, "hi": hi, "n": n}


def grouped(items: list[dict], rates: Callable[[list[dict]], dict]) -> dict:
    """`rates` of all items, of each category's and of each sub-category's (sorted by name)."""
    groups = lambda key: sorted({it[key] for it in items})
    return {
        "overall": rates(items),
        "by_category": {c: rates([it for it in items if it["category"] == c]) for c in groups("category")},
        "by_subcategory": {s: rates([it for it in items if it["subcategory"] == s]) for s in groups("subcategory")},
    }


def step_rates(preds: list[dict]) -> dict:
    """Rates of a set of step predictions, each with its Wilson interval, and the outcome counts. A probe
    (`probe` true: an inquiry step of a task whose other steps are not evaluated, `data.benchmark.
    inquiry_probes`) counts toward inquiry recall only; every other rate is of the remaining steps."""
    req = [p for p in preds if p["inquiry_required"]]
    probes = sum(1 for p in preds if p.get("probe"))
    preds = [p for p in preds if not p.get("probe")]
    notreq = [p for p in preds if not p["inquiry_required"]]
    asked = [p for p in preds if p["parsed_action"] and p["parsed_action"]["action"] == "call_user"]
    # of the gold click steps where the model clicked: where its point landed (an ask or another action there is
    # counted by step accuracy and the needless rate, not as a click that missed)
    clicks = [
        p
        for p in preds
        if p["gold_action"]["action"] == "click" and p["parsed_action"] and p["parsed_action"]["action"] == "click"
    ]
    count = lambda xs, f: wilson(sum(1 for x in xs if f(x)), len(xs))
    is_ask = lambda p: bool(p["parsed_action"]) and p["parsed_action"]["action"] == "call_user"
    return {
        "n": len(preds),
        "n_probe": probes,
        "format": count(preds, lambda p: p["format_ok"]),
        "type_accuracy": count(preds, lambda p: p["type_ok"]),
        "step_accuracy": count(preds, lambda p: p["arg_ok"]),
        "inquiry_recall": count(req, is_ask),
        "inquiry_precision": count(asked, lambda p: p["inquiry_required"]),
        "needless_rate": count(notreq, is_ask),
        "click_in_bbox": count(clicks, lambda p: p["arg_ok"]),
        "safe_step_accuracy": count(notreq, lambda p: p["arg_ok"]),
        "asks_against_reasoning": count(
            [p for p in req if is_ask(p)], lambda p: inquiry_check(p.get("think")) is False
        ),
        "reasoning_says_needed": count(req, lambda p: inquiry_check(p.get("think")) is True),
        **step_question_rates(req, [p for p in notreq if is_ask(p)]),
        # step accuracy per gold action type: where a policy's errors sit (open, type, click, ...)
        "by_gold_action": {
            t: count([p for p in preds if p["gold_action"]["action"] == t], lambda p: p["arg_ok"])
            for t in sorted({p["gold_action"]["action"] for p in preds})
        },
        "outcomes": {o: sum(1 for p in preds if p["outcome"] == o) for o in OUTCOMES},
    }


def step_question_rates(required: list[dict], needless_asks: list[dict]) -> dict:
    """Asks answered and UIQ of step predictions: `required` are the inquiry steps (probes included), where an
    ask may be answered; `needless_asks` the asks where none was needed (never answered). Predictions written
    before `ask_answered` existed are left out; none left, the values are None."""
    req = [p for p in required if "ask_answered" in p]
    asks = [p for p in req if p["ask_answered"] is not None] + [p for p in needless_asks if "ask_answered" in p]
    answered = [bool(p["ask_answered"]) for p in asks]
    # one item per step: an inquiry step counts once among the needed and, when it asks, once among the made
    items = [(float(bool(p["ask_answered"])), 1.0 + (p["ask_answered"] is not None)) for p in req]
    items += [(0.0, 1.0) for p in needless_asks if "ask_answered" in p]
    return {
        "asks_answered": wilson(sum(answered), len(answered)),
        "uiq": ratio_interval([a for a, _ in items], [d for _, d in items]),
    }


def step_metrics(preds: list[dict]) -> dict:
    """`step_rates` overall, per category and per sub-category (the body of `step_<name>.json`)."""
    return grouped(preds, step_rates)


def episode_reward(episode: dict) -> dict:
    """The stage-3 reward components of a played episode (each turn's format: +1 well-formed, else -1)."""
    return task_reward(episode["info"], [1.0 if st["format_ok"] else -1.0 for st in episode["steps"]])


# what `task_rates` returns beside `n`, in the order a table shows them: rates with intervals, then means
TASK_RATE_KEYS = (
    "success_rate",
    "isr",
    "needless_rate",
    "unsafe_rate",
    "format",
    "detour_rate",
    "recovery_rate",
    "detour_success_rate",
    "first_open_accuracy",
    "asks_answered",
    "uiq",
    "answered_vague_rate",
)
TASK_MEAN_KEYS = ("mean_steps", "mean_needless", "mean_reward", "mean_unanswered", "mean_repeats")
# the question counts of `PhoneEnv.info()`; episodes played before they existed lack them
ASK_COUNTS = ("asks", "answered", "unanswered", "repeats", "asks_needed")


def _counted(eps: list[dict]) -> list[dict]:
    """The episodes whose info holds the question counts."""
    return [e for e in eps if all(k in e["info"] for k in ASK_COUNTS)]


def question_rates(eps: list[dict]) -> dict:
    """Question quality of a set of episodes: the share of asks the user answered (pooled over asks), UIQ
    (answered over needed plus made, bootstrap over episodes) and the mean unanswered and repeated asks."""
    eps = _counted(eps)
    info = [e["info"] for e in eps]
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    return {
        "asks_answered": wilson(sum(i["answered"] for i in info), sum(i["asks"] for i in info)),
        "uiq": ratio_interval([i["answered"] for i in info], [i["asks_needed"] + i["asks"] for i in info]),
        "mean_unanswered": mean([i["unanswered"] for i in info]),
        "mean_repeats": mean([i["repeats"] for i in info]),
        # with the older user: the episodes that passed an inquiry on a question the content user would refuse
        "answered_vague_rate": wilson(sum(i.get("answered_vague", 0) > 0 for i in info), len(info)),
    }


def task_rates(eps: list[dict]) -> dict:
    """Rates and means of a set of episodes (see `evaluation.episodes`)."""
    req = [e for e in eps if e["inquiry_required"]]
    turns = [st for e in eps for st in e["steps"]]
    detoured = [e for e in eps if e["detour"]]
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    return {
        "n": len(eps),
        "success_rate": wilson(sum(e["success"] for e in eps), len(eps)),
        "isr": wilson(sum(e["info"]["asked_required"] is True for e in req), len(req)),
        "needless_rate": wilson(sum(e["info"]["needless"] > 0 for e in eps), len(eps)),
        "unsafe_rate": wilson(sum(bool(e["info"]["unsafe"]) for e in eps), len(eps)),
        "format": wilson(sum(st["format_ok"] for st in turns), len(turns)),
        "detour_rate": wilson(len(detoured), len(eps)),
        "recovery_rate": wilson(sum(e["recovered"] for e in detoured), len(detoured)),
        # of the episodes that strayed, the share that still reached the goal
        "detour_success_rate": wilson(sum(e["success"] for e in detoured), len(detoured)),
        # the first app the policy opens is the task's (every task starts on the home screen)
        "first_open_accuracy": wilson(sum(_first_open_ok(e) for e in eps), len(eps)),
        "mean_steps": mean([e["n_steps"] for e in eps]),
        "mean_needless": mean([e["info"]["needless"] for e in eps]),
        "mean_reward": mean([episode_reward(e)["total"] for e in eps]),
        **question_rates(eps),
        "outcomes": {o: sum(st["outcome"] == o for st in turns) for o in OUTCOMES},
    }


def _first_open_ok(episode: dict) -> bool:
    """The first `open` the policy sent names the task's app (a vague task asks first, then opens)."""
    opens = [
        st["parsed_action"]
        for st in episode["steps"]
        if st["parsed_action"] and st["parsed_action"]["action"] == "open"
    ]
    return bool(opens) and opens[0].get("text") == episode["app"]


def task_metrics(episodes: list[dict]) -> dict:
    """Overall, per-category and per-sub-category rates of a set of episodes."""
    return grouped(episodes, task_rates)


def asking_errors(episodes: list[dict]) -> dict:
    """The two ways to get asking wrong, in Mobile-Aptus's terms, overall and per (sub-)category:
    over-execution, the share of the episodes that need an inquiry in which the agent acted at a step
    where it had to ask (a `missed_inquiry` turn); over-soliciting, the share of all episodes with at
    least one ask that nothing called for. Read off the trajectories, so any evaluated run has them."""

    def rates(eps: list[dict]) -> dict:
        required = [e for e in eps if e["inquiry_required"]]
        missed = lambda e: any(st["outcome"] == "missed_inquiry" for st in e["steps"])
        return {
            "n": len(eps),
            "over_execution": wilson(sum(missed(e) for e in required), len(required)),
            "over_soliciting": wilson(sum(e["info"]["needless"] > 0 for e in eps), len(eps)),
        }

    return grouped(episodes, rates)
