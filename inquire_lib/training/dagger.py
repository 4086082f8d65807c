"""Stage 1b, DAgger: learn to recover from one's own mistakes, labelled by the simulator's expert.

Every SFT example comes from the expert's own path, so a policy trained on them has never seen a
wrong screen, a Back, or a history that shows its own mistake; at test time one error leads to a
state it has no data for, and errors compound. DAgger (Ross et al., 2011) closes that gap:

    for round r = 1..R:
        roll the current policy out in PhoneEnv on training tasks (all episodes batched, one greedy
            generate per turn); with probability `dagger_beta` the expert acts instead at a turn;
        label every visited state with the expert's action and reasoning (`world.expert.expert_act`:
            Back on a detour, the right `open` after a wrong app, the inquiry where it is due);
        aggregate: the expert's own data plus every state labelled so far;
        continue SFT (TRL `SFTTrainer`, completion-only cross-entropy) from the current policy
            for `dagger_steps` steps on the aggregate.

The objective of each round is exactly SFT's, on a data set whose states come from the policy's own
distribution. The expert reads the environment's position on the gold path, which only it may.
"""
from __future__ import annotations

import gc
import json
import random
from dataclasses import dataclass
from pathlib import Path

import datasets

from ..data.benchmark import FEATURES, screen_png
from ..evaluation.episodes import observation_record, run_episodes, task_at
from ..profiles import Profile, get_profile
from ..world.env import PhoneEnv
from ..world.expert import expert_act
from .models import load_checkpoint


@dataclass
class Round:
    index: int
    path: str  # the checkpoint trained at the end of this round
    states: int  # states labelled in this round
    off_path: int  # of those, states off the expert's path (detours) or after a mistake
    rollout_success: float  # share of this round's rollouts that succeeded (before training on them)
    seconds: float


def _label(task, env: PhoneEnv, obs_record: dict, round_index: int, k: int) -> dict:
    """One visited state as a step record of the benchmark's schema, labelled by the expert."""
    think, action = expert_act(env)
    step = env.current_step
    bbox = list(step.screen.element(step.target).bbox) if step is not None and step.target else [-1, -1, -1, -1]
    prev = obs_record["prev_screenshot"]
    return {
        "id": f"dagger-r{round_index}/{task.task_id}/{k}", "task_id": task.task_id, "step": k,
        "num_steps": len(task.steps), "app": task.app, "template": task.template, "category": task.category,
        "subcategory": task.subcategory, "instruction": task.instruction, "history": list(obs_record["history"]),
        "screenshot": screen_png(env.screen),
        "prev_screenshot": None if prev is None else _png_of(prev),
        "a11y": obs_record["a11y"], "gold_action": json.dumps(action.to_arguments()), "gold_bbox": bbox,
        "gold_think": think, "inquiry_required": bool(step is not None and step.inquiry),
        "inquiry_reason": step.inquiry.reason if step is not None and step.inquiry else "",
        "user_reply": step.inquiry.reply if step is not None and step.inquiry else "",
    }


def _png_of(image) -> dict:
    import io
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def rollout_states(policy, profile: Profile, task_indices: list[int], round_index: int, beta: float = 0.0,
                   seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Play `policy` (see `evaluation.episodes.Policy`) on training tasks and label every state it
    visits with the expert. With probability `beta` per turn the expert's own action is played
    instead (the state is labelled all the same). Returns (state records, episodes)."""
    from ..agent.prompts import frame_for
    from ..evaluation.episodes import _text

    tasks = [task_at(profile.seed, "train", i) for i in task_indices]
    rng = random.Random(f"dagger:{seed}:{round_index}")
    labelled: list[dict] = []
    count: dict[str, int] = {}

    def act(records: list[dict], envs: list[PhoneEnv]) -> list[str]:
        outs = policy(records, envs)
        for i, (rec, env) in enumerate(zip(records, envs)):
            task = env.task
            k = count.get(task.task_id, 0)
            count[task.task_id] = k + 1
            labelled.append(_label(task, env, rec, round_index, k) | {"_off_path": off_path(env, k)})
            if beta > 0 and rng.random() < beta:
                outs[i] = _text(profile, *expert_act(env))
        return outs

    frame_for(profile)  # fail early on a profile without a frame
    episodes = run_episodes(act, tasks, profile)
    return labelled, episodes


def off_path(env: PhoneEnv, turns: int) -> bool:
    """True for a state the expert's own data never holds: a detour, or any state after a turn that
    did not advance the path (each right action advances it by one) or that was unsafe, unreadable
    or a needless inquiry."""
    s = env.state
    return s.detour is not None or s.idx != turns or bool(s.unsafe) or s.invalid > 0 or s.needless > 0


def to_dataset(states: list[dict]) -> datasets.Dataset:
    rows = [{k: v for k, v in s.items() if not k.startswith("_")} for s in states]
    return datasets.Dataset.from_list(rows, features=FEATURES)


def dagger(profile: str | Profile, start: str, name: str = "dagger", rounds: int | None = None,
           steps: int | None = None, tasks_per_round: int | None = None, beta: float | None = None,
           callbacks=None) -> tuple[str, list[Round]]:
    """DAgger rounds from checkpoint `start`; each round's model is `artifacts/<p>/<name>/round<r>/final`.
    Returns the last round's path and one `Round` per round."""
    import time

    from ..evaluation.episodes import model_policy
    from ..data.benchmark import benchmark
    from ..runs.paths import artifacts_dir
    from .sft import _run_sft, training_records

    profile = get_profile(profile)
    rounds = profile.dagger_rounds if rounds is None else rounds
    steps = profile.dagger_steps if steps is None else steps
    per_round = profile.dagger_tasks if tasks_per_round is None else tasks_per_round
    beta = profile.dagger_beta if beta is None else beta
    expert = training_records(benchmark(profile)["train"], profile, 1.0, profile.sft_inquiry_oversample)
    current, aggregate, out = start, [], []
    for r in range(1, rounds + 1):
        t0 = time.time()
        model, processor = load_checkpoint(profile, current)
        try:
            first = ((r - 1) * per_round) % max(1, profile.train_tasks - per_round)
            states, episodes = rollout_states(model_policy(model, processor, profile), profile,
                                              list(range(first, first + per_round)), r, beta, profile.seed)
        finally:
            del model
            gc.collect()
        aggregate += states
        train = datasets.concatenate_datasets([expert, training_records(to_dataset(aggregate), profile, 1.0, 1)])
        res = _run_sft(profile, start=current, out_dir=artifacts_dir(profile) / name / f"round{r}",
                       inquiry_fraction=1.0, steps=steps, lr=profile.dagger_lr, warmup=max(1, steps // 20),
                       train=train, callbacks=callbacks)
        current = res.path
        out.append(Round(r, current, len(states), sum(s["_off_path"] for s in states),
                         sum(e["success"] for e in episodes) / max(1, len(episodes)), time.time() - t0))
    return current, out
