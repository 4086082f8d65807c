"""Action-level reward functions with TRL's reward-function signature, and a registry by name.

Every reward takes `completions` (each a str or `[{"role": "assistant", "content": str}]`) plus the
dataset columns as keyword lists (one entry per completion), and returns one float per completion.
All coordinates are in the MODEL frame (the training rows carry model-frame `gold_action` and
`gold_bbox`). No reward raises: a malformed completion or a malformed gold entry scores what an
unreadable answer scores.

- format: +1 for one <think> block then one valid <tool_call> and nothing else, else -1.
- action: type (0 or 1) + argument (in [0, 1]); components logged through TRL's `log_metric`.
- inquiry: -missed_penalty for acting where asking was required, -needless_penalty for asking
  where acting was right; both 0 gives the papers' reward. Where the rows carry the inquiry's Need
  (`inquiry_need`) and the profile's user answers by content, an ask whose question names nothing the
  step misses scores as acting did (-missed_penalty): the simulated user would not answer it.
- consistency: -1 where the tool call contradicts the reasoning's own inquiry check (asks after
  "Inquiry check: not needed", or acts after "needed"), else 0; off by default.
- reasoned_ask: -1 for an ask after "Inquiry check: not needed", else 0: consistency's one-sided half,
  which leaves a "needed" followed by an action to the inquiry reward; off by default.

Task-level (episode) rewards register in REWARDS the same way, as factories of a profile.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import lru_cache

from ..profiles import GRPOSettings, ModelSettings, Profile, get_profile
from .questions import Need, answerable
from .actions import (
    POINT_ACTIONS,
    Action,
    ActionError,
    action_match,
    distance_to_bbox,
    has_bbox,
    inquiry_check,
    normalize_text,
    parse_completion,
)

# penalties and switches when no profile is given: the Profile defaults, defined there only
_DEFAULTS = Profile(name="default")
# Model frame of the CPU profiles (a 360x720 screen resized by the processor), used to scale the
# graded click reward when the rows do not say which frame the model saw.
DEFAULT_MODEL_WH = (112, 224)
# A click outside the gold box earns at most this much, fading to 0 at CLICK_FADE x frame diagonal.
CLICK_NEAR_MAX = 0.5
CLICK_FADE = 0.25

# Words, with CJK characters taken one by one (a Chinese question has no spaces to split on).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")


class NamedReward:
    """A picklable reward callable whose `__name__` (what TRL logs it by) is `name`.

    Calls `func(completions, **kwargs, **params)`; `params` win over same-named kwargs."""

    def __init__(self, name: str, func, **params):
        self.__name__ = name
        self.func = func
        self.params = params

    def __call__(self, completions, **kwargs):
        kwargs.update(self.params)
        return self.func(completions, **kwargs)

    def __repr__(self) -> str:
        return f"NamedReward({self.__name__!r}, {self.func.__name__}, {self.params})"


# ---------------------------------------------------------------- helpers


def completion_text(completion) -> str:
    """The text of one completion: the str itself, or the content of the last assistant message
    (text parts joined) of a message list; "" for anything else."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)) or not completion:
        return ""
    msgs = [m for m in completion if isinstance(m, dict)]
    if not msgs:
        return ""
    assistant = [m for m in msgs if m.get("role") == "assistant"]
    content = (assistant or msgs)[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _as_list(completions) -> list:
    if isinstance(completions, list):
        return completions
    if completions is None or isinstance(completions, (str, bytes, dict)):
        return [] if completions is None else [completions]
    try:
        return list(completions)
    except Exception:
        return []


def _item(column, i: int):
    """Entry i of a per-completion column; a scalar applies to every completion; None if missing."""
    if isinstance(column, (list, tuple)):
        return column[i] if i < len(column) else None
    return column


def _reject_constant(name: str):
    raise ValueError(name)


@lru_cache(maxsize=4096)
def _gold_from_json(text: str) -> Action | None:
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except Exception:
        return None
    return _gold_from_obj(obj)


def _gold_from_obj(obj) -> Action | None:
    # A whole tool call is accepted as well as its arguments.
    if isinstance(obj, dict) and isinstance(obj.get("arguments"), dict) and "action" not in obj:
        obj = obj["arguments"]
    try:
        return Action.from_arguments(obj)
    except ActionError:
        return None


def gold_action_of(gold) -> Action | None:
    """The gold Action from a JSON string of its arguments, a dict, or an Action; None if invalid."""
    if isinstance(gold, Action):
        return gold
    if isinstance(gold, str):
        return _gold_from_json(gold)
    if isinstance(gold, dict):
        return _gold_from_obj(gold)
    return None


def tokens(s: str | None) -> list[str]:
    """Casefolded word tokens (CJK characters one by one)."""
    return _TOKEN_RE.findall(s.casefold()) if isinstance(s, str) else []


def token_f1(pred: str | None, gold: str | None) -> float:
    """SQuAD-style token-overlap F1 in [0, 1]; 0 when either side has no tokens."""
    p, g = tokens(pred), tokens(gold)
    if not p or not g:
        return 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def _frame_wh(frame_w, frame_h) -> tuple[float, float]:
    try:
        w, h = float(frame_w), float(frame_h)
        if math.isfinite(w) and math.isfinite(h) and w > 0 and h > 0:
            return (w, h)
    except (TypeError, ValueError, OverflowError):
        pass
    return DEFAULT_MODEL_WH


def argument_score(pred: Action, gold: Action, gold_bbox, frame_wh=DEFAULT_MODEL_WH) -> float:
    """Argument score in [0, 1] of a prediction of the gold's type (0 for another type).

    click/long_press: 1 if `action_match` accepts the point (inside the bbox, or within 5% of the
    frame diagonal of the gold point without a bbox), else 0.5 * max(0, 1 - d / (0.25 * diagonal))
    with d the distance to the bbox (or to the gold point). swipe, system_button, terminate: 1 if
    `action_match` accepts, else 0. type/open/key: 1 if normalised equal, else token F1. wait: 1.
    call_user: token F1 of the question with the gold question (0 for an empty question; 1 for any
    non-empty question when the gold has no words).
    """
    type_ok, arg_ok = action_match(pred, gold, gold_bbox, frame_wh=frame_wh)
    if not type_ok:
        return 0.0
    if arg_ok and gold.type != "call_user":
        return 1.0
    kind = gold.type
    if kind in POINT_ACTIONS:
        if pred.coordinate is None:
            return 0.0
        if has_bbox(gold_bbox):
            d = distance_to_bbox(pred.coordinate, gold_bbox)
        elif gold.coordinate is not None:
            d = math.dist(pred.coordinate, gold.coordinate)
        else:
            return 0.0
        return CLICK_NEAR_MAX * max(0.0, 1.0 - d / (CLICK_FADE * math.hypot(*frame_wh)))
    if kind in ("type", "open", "key"):
        return token_f1(pred.text, gold.text)
    if kind == "call_user":
        if not normalize_text(pred.text):
            return 0.0
        if not tokens(gold.text):
            return 1.0
        return token_f1(pred.text, gold.text)
    return 0.0


# ---------------------------------------------------------------- format


def _format_rewards(completions, require_think: bool = True, **kwargs) -> list[float]:
    out = []
    for c in _as_list(completions):
        try:
            p = parse_completion(completion_text(c), require_think=require_think)
            out.append(1.0 if p.format_ok and p.action is not None else -1.0)
        except Exception:
            out.append(-1.0)
    return out


def format_reward(completions, **kwargs) -> list[float]:
    """+1.0 per completion with exactly one non-empty <think> block, then exactly one <tool_call>
    holding a valid action, and nothing else but whitespace; -1.0 otherwise."""
    return _format_rewards(completions, require_think=True)


def make_format_reward(require_think: bool = True) -> NamedReward:
    """The format reward named "format"; require_think=False (the no-think ablation) makes the
    <think> block optional."""
    return NamedReward("format", _format_rewards, require_think=bool(require_think))


# ---------------------------------------------------------------- action


def action_reward_components(completion, gold_action, gold_bbox, frame_w=None, frame_h=None) -> dict:
    """{"type": 0.0 or 1.0, "argument": [0, 1]} for one completion against its gold (model frame).

    An unreadable completion or gold scores {"type": 0.0, "argument": 0.0}."""
    zero = {"type": 0.0, "argument": 0.0}
    try:
        gold = gold_action_of(gold_action)
        if gold is None:
            return zero
        pred = parse_completion(completion_text(completion), require_think=False).action
        if pred is None or pred.type != gold.type:
            return zero
        bbox = list(gold_bbox) if has_bbox(gold_bbox) else None
        arg = argument_score(pred, gold, bbox, _frame_wh(frame_w, frame_h))
        return {"type": 1.0, "argument": float(min(1.0, max(0.0, arg)))}
    except Exception:
        return zero


def _log(log_metric, name: str, values: list[float]) -> None:
    # TRL (>= 1.x) passes `log_metric(name, value)`; anything else is skipped silently.
    if not callable(log_metric) or not values:
        return
    try:
        log_metric(name, sum(values) / len(values))
    except Exception:
        pass


def action_reward(completions, gold_action=None, gold_bbox=None, **kwargs) -> list[float]:
    """type (1 if the predicted type is the gold's) + argument score in [0, 1] (see
    `argument_score`); 0.0 for an unreadable completion. The frame diagonal comes from the
    `frame_w`/`frame_h` columns when present, else 112x224. Logs the batch means of both
    components as "rewards/action/type" and "rewards/action/argument" through `log_metric`."""
    items = _as_list(completions)
    frame_w, frame_h = kwargs.get("frame_w"), kwargs.get("frame_h")
    types, args = [], []
    for i, c in enumerate(items):
        comp = action_reward_components(
            c, _item(gold_action, i), _item(gold_bbox, i), _item(frame_w, i), _item(frame_h, i)
        )
        types.append(comp["type"])
        args.append(comp["argument"])
    _log(kwargs.get("log_metric"), "rewards/action/type", types)
    _log(kwargs.get("log_metric"), "rewards/action/argument", args)
    return [t + a for t, a in zip(types, args)]


# ---------------------------------------------------------------- inquiry


def _as_bool(v) -> bool | None:
    if type(v).__module__ == "numpy" and hasattr(v, "item"):  # numpy.bool_ and friends
        v = v.item()
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return None


def predicted_type(completion) -> str | None:
    """The action type of a completion, None if unreadable."""
    try:
        a = parse_completion(completion_text(completion), require_think=False).action
        return a.type if a is not None else None
    except Exception:
        return None


def predicted_question(completion) -> str | None:
    """The question of a completion's `call_user`, None for any other action or an unreadable one."""
    try:
        a = parse_completion(completion_text(completion), require_think=False).action
        return (a.text or "") if a is not None and a.type == "call_user" else None
    except Exception:
        return None


def vague_ask(question: str | None, subcategory, need_json) -> bool:
    """An ask the simulated user would not answer: its question names nothing the inquiry step misses. False
    without a readable Need or sub-category (rows built before needs existed: any ask counts)."""
    need = Need.from_json(need_json)
    if need is None or not isinstance(subcategory, str):
        return False
    try:
        return not answerable(subcategory, question, need)
    except KeyError:  # a sub-category without a check
        return False


def _inquiry_rewards(
    completions,
    inquiry_required=None,
    *,
    missed_penalty: float,
    needless_penalty: float,
    judge_questions: bool = False,
    **kwargs,
) -> list[float]:
    out, missed, needless, asked_required, vague = [], [], [], [], []
    needs, subs = kwargs.get("inquiry_need"), kwargs.get("subcategory")
    for i, c in enumerate(_as_list(completions)):
        required = _as_bool(_item(inquiry_required, i))
        question = predicted_question(c)
        asked = question is not None
        v = judge_questions and required is True and asked and vague_ask(question, _item(subs, i), _item(needs, i))
        m = required is True and (not asked or v)
        n = required is False and asked
        missed.append(float(m))
        needless.append(float(n))
        if required is True:
            asked_required.append(float(asked))
            if asked:
                vague.append(float(v))
        out.append(-missed_penalty if m else -needless_penalty if n else 0.0)
    _log(kwargs.get("log_metric"), "rewards/inquiry/missed", missed)
    _log(kwargs.get("log_metric"), "rewards/inquiry/needless", needless)
    # the sampled ask rate where asking is due: what exploration of the rare action has to find
    _log(kwargs.get("log_metric"), "rewards/inquiry/asked_when_required", asked_required)
    if judge_questions and needs is not None:  # of those asks, the share whose question the user would not answer
        _log(kwargs.get("log_metric"), "rewards/inquiry/vague_when_required", vague)
    # -0.0 reads oddly in logs
    return [v + 0.0 for v in out]


def make_inquiry_reward(
    missed_penalty: float = _DEFAULTS.missed_penalty,
    needless_penalty: float = _DEFAULTS.needless_penalty,
    judge_questions: bool = False,
) -> NamedReward:
    """`inquiry_reward(completions, inquiry_required, **kw)`, named "inquiry": -missed_penalty where
    inquiry was required and the predicted type is not call_user (unreadable included),
    -needless_penalty where it was not required and the prediction is call_user, else 0. A row
    whose inquiry_required is missing or not a bool scores 0. Logs the batch's missed and needless
    fractions as "rewards/inquiry/missed" and "rewards/inquiry/needless", and the share of the completions
    of inquiry-required rows that asked as "rewards/inquiry/asked_when_required" (none without such rows).
    With `judge_questions`, an ask at an inquiry-required row whose question fails the row's Need (the
    `inquiry_need` and `subcategory` columns; `agent.questions`) scores -missed_penalty, as acting does, so
    an answerable question pays more than a vague one and a vague one no more than acting; the share of such
    asks among the required rows' asks is logged as "rewards/inquiry/vague_when_required"."""
    for name, v in (("missed_penalty", missed_penalty), ("needless_penalty", needless_penalty)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return NamedReward(
        "inquiry",
        _inquiry_rewards,
        missed_penalty=float(missed_penalty),
        needless_penalty=float(needless_penalty),
        judge_questions=bool(judge_questions),
    )


# ---------------------------------------------------------------- consistency


def _decisions(completions) -> list[tuple[bool, bool] | None]:
    """(the tool call asks, the reasoning's inquiry check says "needed") per completion; None where the
    completion has no readable action or no check."""
    out = []
    for c in _as_list(completions):
        p = parse_completion(completion_text(c), require_think=False)  # never raises
        verdict = inquiry_check(p.think)
        out.append(None if p.action is None or verdict is None else (p.action.type == "call_user", verdict))
    return out


def consistency_reward(completions, **kwargs) -> list[float]:
    """-1.0 where the tool call contradicts the reasoning's inquiry check (a `call_user` after
    "Inquiry check: not needed", any other action after "needed"), else 0.0; a completion without
    a readable action or without the check scores 0.0 (the format reward judges those). GRPO from the
    weak inquirer otherwise learns to ask in the tool call while the reasoning still says "not
    needed": the reasoning stops deciding. Logs the contradicting share as
    "rewards/consistency/contradicted"."""
    out = [-1.0 if d is not None and d[0] != d[1] else 0.0 for d in _decisions(completions)]
    _log(kwargs.get("log_metric"), "rewards/consistency/contradicted", [-v for v in out])
    return out


def reasoned_ask_reward(completions, **kwargs) -> list[float]:
    """-1.0 for a `call_user` after the reasoning's "Inquiry check: not needed", else 0.0; a completion
    without a readable action or without the check scores 0.0. The one-sided half of `consistency`:
    `consistency` also punishes "needed" followed by an action, the common sample early in GRPO, which
    taught all three seeds of the weak inquirer to stop writing "needed" and to stop asking (sampled ask
    rate where due 0.05-0.08 over steps 1-50, 0.004-0.02 over 51-75, at weight 5). Here "needed" is never
    punished, so an ask pays most after a reasoning that called for it. Logs the share as
    "rewards/reasoned_ask/unreasoned"."""
    out = [-1.0 if d is not None and d[0] and not d[1] else 0.0 for d in _decisions(completions)]
    _log(kwargs.get("log_metric"), "rewards/reasoned_ask/unreasoned", [-v for v in out])
    return out


# ---------------------------------------------------------------- registry


def _format_factory(profile: ModelSettings) -> NamedReward:
    return make_format_reward(require_think=profile.use_think)


def _action_factory(profile: Profile) -> NamedReward:
    return NamedReward("action", action_reward)


def _inquiry_factory(profile: GRPOSettings) -> NamedReward:
    return make_inquiry_reward(
        profile.missed_penalty, profile.needless_penalty, judge_questions=profile.user_answers == "content"
    )


def _consistency_factory(profile: Profile) -> NamedReward:
    return NamedReward("consistency", consistency_reward)


def _reasoned_ask_factory(profile: Profile) -> NamedReward:
    return NamedReward("reasoned_ask", reasoned_ask_reward)


# name -> factory(profile) -> reward callable named `name`
REWARDS: dict = {
    "format": _format_factory,
    "action": _action_factory,
    "inquiry": _inquiry_factory,
    "consistency": _consistency_factory,
    "reasoned_ask": _reasoned_ask_factory,
}


def build_reward_funcs(names=("format", "action", "inquiry"), profile=None) -> list:
    """The reward callables for `names`, in order, configured from `profile` (a Profile, a profile
    name, or None for `Profile`'s defaults). Raises KeyError on an unknown name."""
    profile = _DEFAULTS if profile is None else get_profile(profile)
    if isinstance(names, str):
        names = [names]
    funcs = []
    for name in names:
        if name not in REWARDS:
            raise KeyError(f"unknown reward {name!r}; choose from {sorted(REWARDS)}")
        funcs.append(REWARDS[name](profile))
    return funcs
