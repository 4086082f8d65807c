"""The scripted expert: acts as the gold path says, with its pre-action reasoning.

It reads the environment's position on the task's path (it is the one policy allowed to), so its
trajectories are the gold data; that it reaches 100% success with no unsafe action is a check on
the environment's judge, not on the expert.
"""

from __future__ import annotations

import random

from ..agent.actions import Action
from .apps import APPS, centre
from .env import PhoneEnv


def back_think(screen) -> str:
    """Why the expert goes back from a detour, naming what it sees: a wrong app, or a wrong screen."""
    if screen.app == screen.title:  # a wrongly opened app
        why = f"This is {screen.app}, not the app the task needs; going back."
    else:
        why = f"This {screen.title} screen of {screen.app} has nothing for the task; going back."
    return f"{why} Target: Back <back>. Inquiry check: not needed, because going back is safe."


def expert_act(env: PhoneEnv) -> tuple[str, Action]:
    """(think, action) for the environment's current state. On a detour (a state the expert's own
    path never visits, reached only by another policy's mistake) it says why and goes back."""
    step = env.current_step
    if step is None:
        return back_think(env.screen), Action("system_button", button="Back")
    return step.think, step.action


def run_expert(env: PhoneEnv, task, mistakes_at: int | None = None, mistakes: list[Action] = ()) -> list[dict]:
    """Play one episode; each record holds what the agent saw and what the expert did. With
    `mistakes`, they are played in turn instead of the expert's action while the path stands at step
    `mistakes_at` (each leads to a detour, which the expert leaves with Back); every later record that is
    not itself a mistake is marked `after_slip`."""
    obs = env.reset(task)
    records, prev, started, done = [], None, False, False
    pending = list(mistakes)
    while not done:
        step = env.current_step
        think, action = expert_act(env)
        mistake = bool(pending) and step is not None and env.state.idx == mistakes_at
        if mistake:
            action, started = pending.pop(0), True
        records.append(
            {
                "step": len(records),
                "screen": obs.screen,
                "prev_screen": prev,
                "history": obs.history,
                "think": think,
                "action": action,
                "gold": step,
                "after_slip": started and not mistake,
            }
        )
        prev = obs.screen
        obs, done, info = env.step(action)
    records and records[-1].update(info=info)
    return records


def _detour_elements(step) -> list:
    """Elements whose click at `step` opens a detour that Back undoes: not the target or Back, nor an
    element whose click at this step would cause harm (none while a dialog is open)."""
    if step.screen.dialog:
        return []
    return [
        e
        for e in step.screen.elements
        if e.clickable and e.id not in ("back", step.target) and e.id not in step.candidates
    ]


def _can_slip(step) -> bool:
    return step.inquiry is None and (
        step.action.type == "open" or (step.action.type == "click" and bool(_detour_elements(step)))
    )


def _words(text: str) -> set[str]:
    return {w.lower() for w in text.split()}


def slips(step, rng: random.Random, n: int) -> list[Action]:
    """Up to `n` distinct plausible mistakes at a gold `step`, each one a Back undoes: at an `open`,
    other apps; at a click, other elements that lead to a detour, half the time one whose text shares
    a word with the target's ("Zoe Patel" for "Mia Patel"), the confusion a policy that copies names
    badly makes. [] where the step offers no such mistake."""
    if not _can_slip(step):
        return []
    if step.action.type == "open":
        return [Action("open", text=a) for a in rng.sample([a for a in APPS if a != step.action.text], n)]
    others = _detour_elements(step)
    target = _words(step.screen.element(step.target).text) if step.target else set()
    out = []
    while others and len(out) < n:
        near = [e for e in others if _words(e.text) & target]
        pick = rng.choice(near if near and rng.random() < 0.5 else others)
        others.remove(pick)
        out.append(Action("click", coordinate=tuple(centre(pick.bbox))))
    return out


def run_with_slip(env: PhoneEnv, task, rng: random.Random, max_slips: int = 1) -> list[dict]:
    """`run_expert` with 1 to `max_slips` mistakes (`slips`) at one step chosen at random among those
    that allow one: the records marked `after_slip` are states the expert's own path never shows, a
    detour and a history that holds the mistakes. [] if no step allows one."""
    at = [i for i, st in enumerate(task.steps) if _can_slip(st)]
    if not at:
        return []
    k = rng.choice(at)
    return run_expert(env, task, k, slips(task.steps[k], rng, rng.randint(1, max_slips)))
