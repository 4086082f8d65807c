"""The scripted expert: acts as the gold path says, with its pre-action reasoning.

It reads the environment's position on the task's path (it is the one policy allowed to), so its
trajectories are the gold data; that it reaches 100% success with no unsafe action is a check on
the environment's judge, not on the expert.
"""
from __future__ import annotations

from ..agent.actions import Action
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


def run_expert(env: PhoneEnv, task) -> list[dict]:
    """Play one episode; each record holds what the agent saw and what the expert did."""
    obs = env.reset(task)
    records, prev = [], None
    done = False
    while not done:
        step = env.current_step
        think, action = expert_act(env)
        records.append({"step": len(records), "screen": obs.screen, "prev_screen": prev, "history": obs.history,
                        "think": think, "action": action, "gold": step})
        prev = obs.screen
        obs, done, info = env.step(action)
    records and records[-1].update(info=info)
    return records
