"""Task-level (online) evaluation: whole episodes in PhoneEnv, judged by the environment's state.

At every turn the agent sees the prompt of stages 1-2 (`prompts.prompt_messages`) built from the
live observation: instruction, action history (with the user's replies, which PhoneEnv writes),
the current and previous screenshots and the accessibility list. Its raw text is parsed with
`actions.parse_completion`, taken from the model's frame to the screen's (`prompts.frame_for`), and
handed to `PhoneEnv.step` (None when unreadable). Reference policies produce the same kind of raw
text in the model frame, so they cross the very same parse and frame path as a model.

Metrics per episode set (overall, per category, per sub-category; rates with Wilson 95% intervals):
- success_rate (SR): `env.success()` -- right final status, exactly the intended effects, every
  required inquiry asked, nothing unsafe;
- isr: among tasks requiring inquiry, the share where the agent asked at every step that required it;
- needless_rate: share of episodes with at least one needless inquiry; mean_needless per episode;
- unsafe_rate: share of episodes with at least one unsafe action;
- mean_steps; format (share of turns with a well-formed completion);
- detour_rate: share of episodes that strayed off the task's path onto a detour screen;
  recovery_rate: among those, the share that came back to the path (self-correction);
  detour_success_rate: among those, the share that still succeeded;
- first_open_accuracy: share of episodes whose first `open` names the task's app;
- asks_answered: of the `call_user` turns, the share the simulated user answered (`world.env`; with
  `user_answers="content"`, only questions that name what the step misses); uiq: asks answered over asks
  needed plus asks made (bootstrap interval over episodes; the expert's is 0.5); mean_unanswered and
  mean_repeats per episode; answered_vague_rate: with the older user (`user_answers="any"`), the share of
  episodes that passed an inquiry on a question the content user would not have answered;
- mean_reward: the stage-3 training reward (`task_rewards.task_reward`) of the episodes, each
  turn's format scored +1/-1, so evaluation and training speak of the same number.
Files: `papermill_runs/<profile>/metrics/task_<name>.json` and
`papermill_runs/<profile>/eval/<name>/trajectories.jsonl` (one episode per line), screenshots as
`eval/screens/traj_<name>_<task_id>_<k>.png` (the checkpoint is in the name because two policies
see different screens at the same step of the same task).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from ..agent.actions import Action, action_match, format_completion, parse_completion
from .metrics import task_metrics
from ..agent.actions import random_action
from .steps import ACT_THINK, ASK_TEXT, ASK_THINK, RANDOM_POLICY, RANDOM_THINK, generate
from ..profiles import EvalSettings, ModelSettings, Named, Profile
from ..agent.prompts import frame_for
from ..data.benchmark import held_out_tasks
from ..agent.prompts import observation_record
from ..runs.records import REFERENCES, load_metrics
from ..runs.paths import atomic_path, run_dir, write_json_atomic, write_jsonl_atomic
from ..runs.hardware import device_stamp
from ..runs.tracking import log_metrics
from ..world.apps import centre
from ..world.env import PhoneEnv
from ..world.expert import expert_act
from ..world.flow import Task
from ..world.render import render  # cached per screen


# A policy maps the records of the episodes still running (and their environments, which only the
# scripted references may read) to one raw completion each, in the model's frame.
Policy = Callable[[list[dict], list[PhoneEnv]], list[str]]


# ------------------------------------------------------------------------------ policies
def model_policy(
    model, processor, profile: EvalSettings, batch_size: int | None = None, ask_bias: float = 0.0
) -> Policy:
    """Greedy generation over the running episodes' prompts (batched by `evaluation.steps.generate`),
    with `ask_bias` on the tool call's ask decision."""

    def act(records: list[dict], envs: list[PhoneEnv]) -> list[str]:
        return generate(model, processor, records, profile, batch_size=batch_size, progress=False, ask_bias=ask_bias)

    return act


def _text(profile: ModelSettings, think: str, action: Action) -> str:
    """A reference policy's screen-frame action as model output: model frame, reasoning if the profile has it."""
    return format_completion(think if profile.use_think else None, frame_for(profile).action_to_model(action))


def expert_policy(profile: ModelSettings) -> Policy:
    """The scripted expert (reads the environment's position on the gold path)."""

    def act(records, envs):
        return [_text(profile, *expert_act(env)) for env in envs]

    return act


def always_act_policy(profile: ModelSettings) -> Policy:
    """The expert, except where asking is required: there it acts as if the user had said yes --
    clicks the first committing element (or takes the next gold action when the step has none) --
    and, should that land on a detour, declares the task done."""
    acted: set[tuple[int, str]] = set()

    def one(env: PhoneEnv) -> str:
        key = (id(env), env.task.task_id)
        step = env.current_step
        if step is None:
            if key in acted:
                return _text(profile, ACT_THINK, Action("terminate", status="success"))
            return _text(profile, *expert_act(env))
        if step.inquiry is None:
            return _text(profile, step.think, step.action)
        acted.add(key)
        nxt = env.task.steps[env.state.idx + 1] if env.state.idx + 1 < len(env.task.steps) else None
        if step.candidates:
            action = Action("click", coordinate=centre(step.screen.element(step.candidates[0]).bbox))
        elif nxt is not None and nxt.action.type != "terminate":
            action = nxt.action
        else:
            action = Action("terminate", status="success")
        return _text(profile, ACT_THINK, action)

    return lambda records, envs: [one(env) for env in envs]


def always_ask_policy(profile: ModelSettings) -> Policy:
    """`call_user` at every turn."""
    return lambda records, envs: [_text(profile, ASK_THINK, Action("call_user", text=ASK_TEXT)) for _ in envs]


def random_policy(profile: ModelSettings, seed: int = 0) -> Policy:
    """A random action type with random arguments (model-frame coordinates); one RNG per task, so
    an episode does not depend on which others run beside it."""
    frame = frame_for(profile)
    rngs: dict[str, random.Random] = {}

    def one(env: PhoneEnv) -> str:
        rng = rngs.setdefault(env.task.task_id, random.Random(f"random-policy:{seed}:{env.task.task_id}"))
        action = random_action(rng, frame.model_w, frame.model_h, **RANDOM_POLICY)
        # already in the model frame: format directly
        return format_completion(RANDOM_THINK if profile.use_think else None, action)

    return lambda records, envs: [one(env) for env in envs]


def reference_policy(name: str, profile: Profile, seed: int = 0) -> Policy:
    makers = {
        "expert": expert_policy,
        "always_act": always_act_policy,
        "always_ask": always_ask_policy,
        "random": lambda p: random_policy(p, seed),
    }
    if name not in makers:
        raise ValueError(f"unknown reference policy {name!r}; choose one of {list(makers)}")
    return makers[name](profile)


# ------------------------------------------------------------------------------ episodes
def _gold_here(env: PhoneEnv) -> tuple[Action, list[int] | None]:
    """What the expert would do in the environment's current state, and its target's bbox."""
    step = env.current_step
    _, action = expert_act(env)
    bbox = list(step.screen.element(step.target).bbox) if step is not None and step.target else None
    return action, bbox


def _outcome(action: Action | None, gold: Action, bbox, unsafe: bool, needless: bool) -> str:
    """The step-level outcome rule, against the expert's action in the state the agent was in."""
    if action is None:
        return "unparseable"
    if (gold.type == "call_user" and action.type != "call_user") or unsafe:
        return "missed_inquiry"
    if (action.type == "call_user" and gold.type != "call_user") or needless:
        return "needless_inquiry"
    type_ok, arg_ok = action_match(action, gold, bbox)
    return "correct" if type_ok and arg_ok else ("wrong_argument" if type_ok else "wrong_type")


def run_episodes(
    policy: Policy,
    tasks: list[Task],
    profile: EvalSettings,
    max_steps: int | None = None,
    progress: bool = False,
    prefixes: list[list[Action]] | None = None,
) -> list[dict]:
    """Play every task to its end (terminate, or `max_steps` turns), the running episodes batched
    into one policy call per turn. Returns one episode dict per task (see `evaluate_tasks`), with
    each step's `screen` object (for screenshots) still attached. `prefixes`: per task, screen-frame actions
    played before the policy's first turn (stage 3's start states: a state along the expert's path, or right
    after a slip); they count toward `max_steps` and the episode's outcome, and are not among its steps."""
    max_steps = max_steps or profile.max_episode_steps
    frame = frame_for(profile)
    envs = [PhoneEnv(max_steps=max_steps, user_answers=profile.user_answers) for _ in tasks]
    obs = [env.reset(t) for env, t in zip(envs, tasks)]
    prev = [None] * len(tasks)
    for i, prefix in enumerate(prefixes or []):
        for action in prefix:
            prev[i] = obs[i].screen
            obs[i], done, _ = envs[i].step(action)
            if done:
                raise ValueError(f"{tasks[i].task_id}: its start prefix ends the episode ({action.to_arguments()})")
        prev[i] = render(prev[i]) if prev[i] is not None else None
    shots = [render(o.screen) for o in obs]
    steps: list[list[dict]] = [[] for _ in tasks]
    finals: list[dict | None] = [None] * len(tasks)
    running = list(range(len(tasks)))
    bar = tqdm(total=max_steps, desc="turns", disable=not progress)
    while running:
        records = [observation_record(tasks[i], obs[i], shots[i], prev[i]) for i in running]
        raws = policy(records, [envs[i] for i in running])
        if len(raws) != len(running):
            raise ValueError(f"policy returned {len(raws)} outputs for {len(running)} running episodes")
        still = []
        for i, raw in zip(running, raws):
            env, s = envs[i], envs[i].state
            parsed = parse_completion(raw, require_think=profile.use_think)
            action = frame.action_to_screen(parsed.action) if parsed.action is not None else None
            gold, bbox = _gold_here(env)
            before = (len(s.unsafe), s.needless, s.detour is None, s.idx)
            new_obs, done, info = env.step(action)
            unsafe, needless = len(s.unsafe) > before[0], s.needless > before[1]
            steps[i].append(
                {
                    "step": len(steps[i]),
                    "screen": obs[i].screen,
                    "on_path": before[2],
                    "path_index": before[3],
                    "history": list(obs[i].history),
                    "raw_output": raw,
                    "think": parsed.think,
                    "parsed_action": action.to_arguments() if action is not None else None,
                    "parse_error": parsed.error,
                    "format_ok": bool(parsed.format_ok and parsed.action is not None),
                    "gold_action": gold.to_arguments(),
                    "gold_bbox": bbox,  # the gold element's box on the screen (None for an action without one)
                    "outcome": _outcome(action, gold, bbox, unsafe, needless),
                    "unsafe": unsafe,
                    "needless": needless,
                    "user_reply": new_obs.user_reply,
                }
            )
            prev[i], obs[i] = shots[i], new_obs
            shots[i] = render(new_obs.screen)
            if done:
                finals[i] = info
            else:
                still.append(i)
        running = still
        bar.update(1)
    bar.close()
    starts = [len(p) for p in prefixes] if prefixes else [0] * len(tasks)
    return [
        {**_episode(t, env, st, info, frame), "start_step": k}
        for t, env, st, info, k in zip(tasks, envs, steps, finals, starts)
    ]


def _episode(task: Task, env: PhoneEnv, steps: list[dict], info: dict, frame) -> dict:
    on = [st["on_path"] for st in steps] + [env.state.detour is None]
    strayed = [k for k, ok in enumerate(on) if not ok]
    return {
        "task_id": task.task_id,
        "app": task.app,
        "template": task.template,
        "category": task.category,
        "subcategory": task.subcategory,
        "instruction": task.instruction,
        "intent": task.intent,
        "inquiry_required": task.inquiry_required,
        "gold_steps": len(task.steps),
        "success": bool(info["success"]),
        "info": info,
        "n_steps": len(steps),
        "detour": bool(strayed),
        "recovered": bool(strayed) and any(on[k] for k in range(strayed[0], len(on))),
        "frame": frame.to_dict(),
        "steps": steps,
    }


def run_episode(policy: Policy, task: Task, profile: EvalSettings, max_steps: int | None = None) -> dict:
    """One task played to its end by `policy` (see `run_episodes`)."""
    return run_episodes(policy, [task], profile, max_steps)[0]


# ------------------------------------------------------------------------------- metrics
# --------------------------------------------------------------------------------- files
def _screen_file(name: str, task_id: str, k: int) -> str:
    return f"screens/traj_{name}_{task_id}_{k}.png"


def write_trajectories(name: str, episodes: list[dict], eval_dir: Path) -> Path:
    """Screenshots (PNG, screen frame) and `<eval_dir>/<name>/trajectories.jsonl`, atomically."""
    from ..data.benchmark import screen_png

    (eval_dir / "screens").mkdir(parents=True, exist_ok=True)
    rows = []
    for ep in episodes:
        steps = []
        for st in ep["steps"]:
            rel = _screen_file(name, ep["task_id"], st["step"])
            with atomic_path(eval_dir / rel) as tmp:
                tmp.write_bytes(screen_png(st["screen"])["bytes"])
            steps.append(
                {
                    "screenshot": rel,
                    "screen_title": f"{st['screen'].app} / {st['screen'].title}",
                    **{k: v for k, v in st.items() if k != "screen"},
                }
            )
        rows.append({"checkpoint": name, **ep, "steps": steps})
    return write_jsonl_atomic(eval_dir / name / "trajectories.jsonl", rows)


def evaluate_tasks(
    name: str,
    policy: Policy,
    tasks: list[Task],
    profile: Profile,
    out_root: str | Path | None = None,
    extra: dict | None = None,
    progress: bool = False,
) -> dict:
    """Run `policy` on `tasks`, write trajectories + `metrics/task_<name>.json`, return the metrics.

    Each trajectories.jsonl line: checkpoint, task fields (task_id, app, template, category,
    subcategory, instruction, intent, inquiry_required, gold_steps), success, info (PhoneEnv.info()),
    n_steps, detour, recovered, frame, steps: [{step, screenshot (relative to eval/), screen_title,
    on_path, path_index, history, raw_output, think, parsed_action (screen frame, or null),
    parse_error, format_ok, gold_action (the expert's action in that state, screen frame), outcome,
    unsafe, needless, user_reply}]."""
    t0 = time.time()
    episodes = run_episodes(policy, tasks, profile, progress=progress)
    seconds = time.time() - t0
    base = run_dir(profile.name, out_root)
    write_trajectories(name, episodes, base / "eval")
    metrics = {
        "checkpoint": name,
        "kind": "task",
        "profile": profile.name,
        "device": device_stamp(),
        "n_tasks": len(tasks),
        "max_steps": profile.max_episode_steps,
        "seconds": seconds,
        **(extra or {}),
        **task_metrics(episodes),
    }
    write_json_atomic(base / "metrics" / f"task_{name}.json", metrics)
    log_metrics(profile, name, metrics, "task", out_root)  # the run's tracker (`runs/tracking.py`)
    return metrics


def evaluate_reference_tasks(
    profile: Profile, tasks: list[Task] | None = None, out_root: str | Path | None = None
) -> list[dict]:
    """Task-level metrics of every reference policy on the same held-out tasks."""
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    return [
        evaluate_tasks(n, reference_policy(n, profile, seed=profile.seed), tasks, profile, out_root) for n in REFERENCES
    ]


def load_task_metrics(profile: Named, names=None, out_root: str | Path | None = None) -> list[dict]:
    """Saved task-level metrics of a run (`metrics/task_*.json`), in training order then references."""
    return load_metrics(run_dir(profile, out_root), "task", names)


def load_trajectories(profile: Named, name: str, out_root: str | Path | None = None) -> list[dict]:
    """Episodes of `eval/<name>/trajectories.jsonl`; a malformed line names the file and line."""
    path = run_dir(profile.name, out_root) / "eval" / name / "trajectories.jsonl"
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
    return out


# ------------------------------------------------------------------------ reading results
def self_corrections(episodes: list[dict]) -> list[dict]:
    """Episodes that strayed onto a detour and came back to the task's path, successes first."""
    return sorted((e for e in episodes if e.get("recovered")), key=lambda e: (not e["success"], e["task_id"]))


def find_self_corrections(profile: Named, names, out_root: str | Path | None = None) -> list[dict]:
    """Self-corrections in the saved trajectories of `names` (those evaluated), in the order of `names`."""
    found = []
    for name in names:
        if (run_dir(profile.name, out_root) / "eval" / name / "trajectories.jsonl").exists():
            found += self_corrections(load_trajectories(profile, name, out_root))
    return found
