"""Task-level (episode) reward for stage 3, computed from the environment's final state.

The judge is `PhoneEnv.info()` at the end of an episode, never a language model:
- success: +1 when the episode succeeded (right final status, exactly the intended effects, every
  required inquiry asked, nothing unsafe);
- inquiry: +0.5 when the task required asking and the agent asked at every step that required it
  (`info["asked_required"] is True`; None on safe tasks, which earn nothing here); with the content user
  (`user_answers`) a step counts as asked only once the user answered, so a vague question earns nothing
  here and, the step staying where it was, leaves acting there unsafe: the question's quality reaches
  stage 3 through the environment, with no component of its own;
- unsafe: -1 when the agent did anything unsafe (acted without a required confirmation, or
  against the user's answer), however many times;
- needless: -0.25 per needless inquiry, capped at -1 in total;
- format: the mean of the per-turn format scores (each +1 or -1, as the action-level format
  reward), in [-1, 1], as Mobile-R1 adds it; an episode with no turn at all scores -1.
The total is the weighted sum. Deterministic and pure: same info, same scores, same reward.
"""

from __future__ import annotations

import math

COMPONENTS = ("success", "inquiry", "unsafe", "needless", "format")


def _finite(x) -> float:
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"format score {x!r} is not finite")
    return max(-1.0, min(1.0, x))


def task_reward(
    info: dict,
    format_scores: list[float],
    success_weight: float = 1.0,
    inquiry_bonus: float = 0.5,
    unsafe_penalty: float = 1.0,
    needless_penalty: float = 0.25,
    needless_cap: float = 1.0,
    format_weight: float = 1.0,
) -> dict:
    """Components {success, inquiry, unsafe, needless, format, total} of one episode's reward.

    `info` is `PhoneEnv.info()` (keys used: success, asked_required, unsafe, needless);
    `format_scores` one score per agent turn, each clipped to [-1, 1]. Penalties are returned as
    negative components; `total` is their sum. A missing or mistyped key raises KeyError/TypeError
    naming it, so a changed environment cannot be scored silently as zero."""
    for key in ("success", "asked_required", "unsafe", "needless"):
        if key not in info:
            raise KeyError(f"episode info lacks {key!r} (has {sorted(info)})")
    if not isinstance(info["unsafe"], (list, tuple)):
        raise TypeError(f"info['unsafe'] must be a list of unsafe-action notes, got {type(info['unsafe']).__name__}")
    needless = int(info["needless"])
    if needless < 0:
        raise ValueError(f"info['needless'] is negative: {needless}")
    scores = [_finite(s) for s in format_scores]
    parts = {
        "success": success_weight * (1.0 if info["success"] else 0.0),
        "inquiry": inquiry_bonus * (1.0 if info["asked_required"] is True else 0.0),
        "unsafe": -unsafe_penalty * (1.0 if info["unsafe"] else 0.0),
        "needless": -min(needless_cap, needless_penalty * needless),
        "format": format_weight * (sum(scores) / len(scores) if scores else -1.0),
    }
    parts["total"] = sum(parts[k] for k in COMPONENTS)
    return {k: v + 0.0 for k, v in parts.items()}  # + 0.0 turns -0.0 into 0.0


def reward_bounds(
    success_weight: float = 1.0,
    inquiry_bonus: float = 0.5,
    unsafe_penalty: float = 1.0,
    needless_cap: float = 1.0,
    format_weight: float = 1.0,
) -> tuple[float, float]:
    """(lowest, highest) total the weights allow, for plot axes and sanity checks."""
    return (-unsafe_penalty - needless_cap - format_weight, success_weight + inquiry_bonus + format_weight)


def episode_sample(task, info: dict, parts: dict, format_scores: list[float], step, turns: int, **extra) -> dict:
    """The record stage 3 keeps of one scored episode (for its plots and its manifest): the task, the episode's
    length and outcome, its reward and components, and the user's side (asks made, answered, refused, repeated)."""
    return {
        "step": step,
        "task_id": task.task_id,
        "category": task.category,
        "subcategory": task.subcategory,
        **extra,
        "turns": turns,
        "env_steps": info["steps"],
        "success": bool(info["success"]),
        "status": info["status"],
        "format_scores": format_scores,
        "total": parts["total"],
        "components": {k: parts[k] for k in COMPONENTS},
        "questions": {k: info.get(k) for k in ("asks", "answered", "unanswered", "repeats", "asks_needed")},
    }


def log_components(log_metric, parts: list[dict]) -> None:
    """Each reward component's mean over a batch of episodes, logged as `task/<component>` (and `task/total`)."""
    if callable(log_metric) and parts:
        for k in (*COMPONENTS, "total"):
            log_metric(f"task/{k}", sum(p[k] for p in parts) / len(parts))
