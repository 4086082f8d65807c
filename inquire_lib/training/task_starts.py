"""Stage 3 on the episodes the evaluation plays (`task_rollout` "reprompt"): start states, and a return per episode.

A row is a start state of a training task: its first screen, a state along the expert's path, or the screen right
after a slip (`task_start_shares`). Its prompt is the stage 1-2 prompt of that state, in the stage 1-2 template,
built as `evaluation.episodes.run_episodes` builds each turn's. TRL's GRPOTrainer samples the group's first actions
there as it samples any prompt's completions; `EpisodeReturn` then plays each one's episode to the environment's
end with `run_episodes` itself, every later turn prompted afresh and answered greedily by the policy being
trained, and scores it with `task_rewards.task_reward`, as the evaluation's `mean_reward` does. So the episode a
trainer scores is the episode the evaluation plays, from its start state on; at temperature 0 from the first screen
it is that episode exactly (`training_rollouts`). The return lands on the first action: a start after a slip
teaches repairing it, a start along the path the step there.
"""

from __future__ import annotations

import json
import random
from contextlib import contextmanager

import datasets

from ..agent.actions import Action
from ..agent.prompts import frame_for, images_of, observation_record, prompt_messages
from ..agent.task_rewards import episode_sample, log_components, task_reward
from ..data.benchmark import screen_png, task_at
from ..evaluation.episodes import run_episodes
from ..evaluation.steps import generate
from ..profiles import EvalSettings, Profile, TaskGRPOSettings
from ..world.env import PhoneEnv
from ..world.expert import expert_act, slips
from ..world.flow import Task

START_KINDS = ("start", "path", "slip")


def start_prefix(task: Task, kind: str, rng: random.Random, max_steps: int) -> list[Action]:
    """The screen-frame actions that bring `task` to a start state of `kind`: none ("start"); the expert's first
    k steps, k >= 1, leaving at least one ("path"); the expert's first k steps then one mistake at step k that a
    Back undoes ("slip", `world.expert.slips`; a "path" start where no step allows one). Within `max_steps`."""
    last = min(len(task.steps), max_steps) - 1
    if kind == "start" or last < 1:
        return []
    env = PhoneEnv(max_steps=max_steps)
    env.reset(task)
    slippable = [k for k in range(last) if slips(task.steps[k], random.Random(0), 1)]
    if kind == "slip" and slippable:
        k = rng.choice(slippable)
        mistake = slips(task.steps[k], rng, 1)[0]
    else:
        k, mistake = rng.randrange(1, last + 1), None
    prefix = []
    for _ in range(k):
        prefix.append(expert_act(env)[1])
        env.step(prefix[-1])
    return prefix + ([mistake] if mistake is not None else [])


def start_kinds(profile: TaskGRPOSettings, n: int, seed: int) -> list[str]:
    """`n` start kinds in the proportions of `task_start_shares`, in a seeded order."""
    shares = {k: float(profile.task_start_shares.get(k, 0.0)) for k in START_KINDS}
    total = sum(shares.values())
    counts = {k: int(n * v / total) for k, v in shares.items()}
    for k in sorted(shares, key=lambda k: -(n * shares[k] / total - counts[k]))[: n - sum(counts.values())]:
        counts[k] += 1  # the largest remainders take what rounding left
    kinds = [k for k in START_KINDS for _ in range(counts[k])]
    random.Random(f"task-starts:{seed}").shuffle(kinds)
    return kinds


def start_rows(profile: TaskGRPOSettings, split: str = "train", n: int | None = None) -> datasets.Dataset:
    """One row per task of `split`: the prompt and images of its start state, as a turn of `run_episodes` shows
    it, with what rebuilds the state (the task's seed, split and index; the prefix's actions as JSON)."""
    n = profile.train_split_tasks if n is None else n
    frame = frame_for(profile)
    rows: dict[str, list] = {k: [] for k in ("prompt", "task_seed", "task_split", "task_index", "prefix")}
    rows |= {k: [] for k in ("start_kind", "start_step", "task_id", "category", "subcategory")}
    images = []
    for i, kind in enumerate(start_kinds(profile, n, profile.seed)):
        task = task_at(profile.seed, split, i, profile.train_values)
        rng = random.Random(f"task-start:{profile.seed}:{split}:{i}")
        prefix = start_prefix(task, kind, rng, profile.max_episode_steps)
        env = PhoneEnv(max_steps=profile.max_episode_steps, user_answers=profile.user_answers)
        obs, prev = env.reset(task), None
        for action in prefix:
            prev = obs.screen
            obs, _, _ = env.step(action)
        rec = observation_record(task, obs, obs.screen, prev)  # screens, stored as their PNG (`screen_png`)
        rows["prompt"].append(prompt_messages(rec, profile, frame))
        images.append([screen_png(screen) for screen in images_of(rec, profile)])
        rows["task_seed"].append(profile.seed)
        rows["task_split"].append(split)
        rows["task_index"].append(i)
        rows["prefix"].append(json.dumps([a.to_arguments() for a in prefix]))
        rows["start_kind"].append(kind if prefix or kind == "start" else "start")
        rows["start_step"].append(len(prefix))
        rows["task_id"].append(task.task_id)
        rows["category"].append(task.category)
        rows["subcategory"].append(task.subcategory)
    ds = datasets.Dataset.from_dict(rows)
    return ds.add_column("images", images, feature=datasets.List(datasets.Image()))


@contextmanager
def _generating(model):
    """The model in eval mode without gradients for the episode's later turns, back in its mode after."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def play(model, processor, profile: EvalSettings, tasks: list[Task], prefixes: list[list[Action]], first=None):
    """The episodes of `tasks` from their start states (`prefixes`), played by `run_episodes`: the first turn's
    answer is `first[i]` where given (the trainer's sampled completion), every other turn the model's greedy one."""
    turn = [0]

    def policy(records: list[dict], envs: list[PhoneEnv]) -> list[str]:
        if turn[0] == 0 and first is not None:
            turn[0] += 1
            return list(first)
        turn[0] += 1
        with _generating(model):
            return generate(model, processor, records, profile, progress=False)

    return run_episodes(policy, tasks, profile, prefixes=prefixes)


def training_rollouts(model, processor, profile: EvalSettings, tasks: list[Task], prefixes=None) -> list[dict]:
    """Stage 3's episodes at temperature 0: the first action greedy too. From the first screens (no prefixes) they
    are the evaluation's episodes, which the start checkpoint's task SR is measured on."""
    return play(model, processor, profile, tasks, prefixes or [[] for _ in tasks])


def completion_text(completion) -> str:
    """A TRL completion as text: a conversational one is [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, str):
        return completion
    content = completion[-1].get("content") if completion else ""
    if isinstance(content, list):
        content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content or ""


class EpisodeReturn:
    """TRL reward function: the return of the episode each sampled first action starts, played to its end by
    `play` with the trainer's own model (`bind` it after the trainer is built). Logs each component's batch
    mean as `task/<component>` and keeps one record per episode in `episodes`."""

    __name__ = "task"

    def __init__(self, profile: Profile):
        self.profile = profile
        self.episodes: list[dict] = []
        self.model = self.processor = None

    def bind(self, model, processor) -> EpisodeReturn:
        self.model, self.processor = model, processor
        return self

    def __call__(
        self,
        completions,
        task_seed,
        task_split,
        task_index,
        prefix,
        start_kind=None,
        trainer_state=None,
        log_metric=None,
        **_,
    ) -> list[float]:
        if self.model is None:
            raise ValueError("EpisodeReturn plays episodes with the trainer's model: bind(model, processor) first")
        tasks = [
            task_at(int(s), str(p), int(i), self.profile.train_values)
            for s, p, i in zip(task_seed, task_split, task_index)
        ]
        prefixes = [[Action.from_arguments(a) for a in json.loads(p)] for p in prefix]
        texts = [completion_text(c) for c in completions]
        played = play(self.model, self.processor, self.profile, tasks, prefixes, first=texts)
        step = getattr(trainer_state, "global_step", None)
        out, parts_all = [], []
        for k, (ep, task) in enumerate(zip(played, tasks)):
            scores = [1.0 if st["format_ok"] else -1.0 for st in ep["steps"]]
            parts = task_reward(ep["info"], scores)
            out.append(parts["total"])
            parts_all.append(parts)
            extra = {"start_kind": start_kind[k] if start_kind is not None else None, "start_step": ep["start_step"]}
            sample = episode_sample(task, ep["info"], parts, scores, step, ep["n_steps"], **extra)
            self.episodes.append({**sample, "recovered": ep["recovered"]})
        log_components(log_metric, parts_all)
        return out
