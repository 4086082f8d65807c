"""Stage 1b, DAgger: learn to recover from one's own mistakes, labelled by the simulator's expert.

Every SFT example comes from the expert's own path, so a policy trained on them has never seen a
wrong screen, a Back, or a history that shows its own mistake; at test time one error leads to a
state it has no data for, and errors compound. DAgger (Ross et al., 2011) closes that gap:

    for round r = 1..R (`stages.dagger_rounds` runs them):
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

import io
import json
import random
from dataclasses import dataclass, field

import datasets

from ..agent.actions import format_completion
from ..agent.prompts import frame_for
from ..data.benchmark import FEATURES, SFT_FIRST, screen_png, task_at
from ..profiles import DataSettings, Profile
from ..world.env import PhoneEnv
from ..world.expert import expert_act


@dataclass
class Round:
    index: int
    path: str  # the checkpoint trained at the end of this round
    states: int  # states labelled in this round
    off_path: int  # of those, states the expert's own data never holds (see `off_path`)
    rollout_success: float  # share of this round's roll-outs that succeeded (before training on them)
    seconds: float
    examples: list = field(default_factory=list, repr=False)  # this round's off-path states, labelled


def off_path(env: PhoneEnv, turns: int) -> bool:
    """True for a state the expert's own data never holds: a detour, or any state after a turn that
    did not advance the path (each right action advances it by one) or that was unsafe, unreadable
    or a needless inquiry."""
    s = env.state
    return s.detour is not None or s.idx != turns or bool(s.unsafe) or s.invalid > 0 or s.needless > 0


def _png(image) -> dict:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def label_state(env: PhoneEnv, record: dict, round_index: int, turn: int, id_prefix: str | None = None) -> dict:
    """The state an episode is in (its prompt `record`), as a step record of the benchmark's schema
    labelled with the expert's action and reasoning; its id `<id_prefix>/<task>/<turn>` (default
    `dagger-r<round_index>`)."""
    task = env.task
    think, action = expert_act(env)
    step = env.current_step
    bbox = list(step.screen.element(step.target).bbox) if step is not None and step.target else [-1, -1, -1, -1]
    prev = record["prev_screenshot"]
    return {
        "id": f"{id_prefix or f'dagger-r{round_index}'}/{task.task_id}/{turn}",
        "task_id": task.task_id,
        "step": turn,
        "num_steps": len(task.steps),
        "app": task.app,
        "template": task.template,
        "category": task.category,
        "subcategory": task.subcategory,
        "instruction": task.instruction,
        "history": list(record["history"]),
        "screenshot": screen_png(env.screen),
        "prev_screenshot": None if prev is None else _png(prev),
        "a11y": record["a11y"],
        "gold_action": json.dumps(action.to_arguments()),
        "gold_bbox": bbox,
        "gold_think": think,
        "inquiry_required": bool(step is not None and step.inquiry),
        "inquiry_reason": step.inquiry.reason if step is not None and step.inquiry else "",
        "user_reply": step.inquiry.reply if step is not None and step.inquiry else "",
        "_off_path": off_path(env, turn),
    }


class Labeller:
    """Wraps a policy (see `evaluation.episodes.Policy`): every state it is asked to act in is
    labelled by the expert (`states`); with probability `beta` per turn the expert's own action is played
    instead of the policy's (the state is labelled all the same)."""

    def __init__(
        self, profile: Profile, round_index: int, beta: float = 0.0, seed: int = 0, id_prefix: str | None = None
    ):
        self.profile, self.round_index, self.beta, self.id_prefix = profile, round_index, beta, id_prefix
        self.rng = random.Random(f"dagger:{seed}:{round_index}")
        self.states: list[dict] = []
        self._turns: dict[str, int] = {}

    def wrap(self, policy):
        frame = frame_for(self.profile)

        def act(records: list[dict], envs: list[PhoneEnv]) -> list[str]:
            outs = list(policy(records, envs))
            for i, (rec, env) in enumerate(zip(records, envs)):
                turn = self._turns.get(env.task.task_id, 0)
                self._turns[env.task.task_id] = turn + 1
                self.states.append(label_state(env, rec, self.round_index, turn, self.id_prefix))
                if self.beta > 0 and self.rng.random() < self.beta:
                    think, action = expert_act(env)
                    outs[i] = format_completion(
                        think if self.profile.use_think else None, frame.action_to_model(action)
                    )
            return outs

        return act


def labelled_rollout(
    profile: Profile, path: str, round_index: int, tasks: list, beta: float = 0.0, id_prefix: str | None = None
) -> tuple[Labeller, list[dict]]:
    """Play the checkpoint at `path` greedily on `tasks`, every visited state labelled by the expert
    (`Labeller`); returns (the labeller, which holds the states, and the episodes) and frees the model."""
    from ..evaluation.episodes import model_policy, run_episodes
    from .models import loaded

    labeller = Labeller(profile, round_index, beta, profile.seed, id_prefix)
    with loaded(profile, path) as m:
        played = run_episodes(labeller.wrap(model_policy(m.model, m.processor, profile)), tasks, profile)
    return labeller, played


def round_tasks(profile: DataSettings, round_index: int, per_round: int) -> list:
    """The training tasks rolled out in round `round_index` (1-based): consecutive blocks of the
    training split, a new block each round; with `sft_tasks` set, blocks of fresh tasks right after
    stage 1's (so the roll-outs, like stage 1, never meet a value stage 0 memorised)."""
    if profile.sft_tasks > 0:
        first = SFT_FIRST + profile.sft_tasks + (round_index - 1) * per_round
    else:
        first = ((round_index - 1) * per_round) % max(1, profile.train_split_tasks - per_round)
    return [task_at(profile.seed, "train", i, profile.train_values) for i in range(first, first + per_round)]


def to_dataset(states: list[dict]) -> datasets.Dataset:
    rows = [{k: v for k, v in s.items() if not k.startswith("_")} for s in states]
    return datasets.Dataset.from_list(rows, features=FEATURES)


def aggregate(expert: datasets.Dataset, labelled: datasets.Dataset, mix: float = 0.0) -> datasets.Dataset:
    """DAgger's data set: the expert's records plus the labelled states; with `mix` in (0, 1) the states
    are repeated (whole passes, then the first ones) until they are that share of the union, so that a
    few hundred of them are not drowned by thousands of expert steps."""
    if not 0.0 < mix < 1.0 or len(labelled) == 0:
        return datasets.concatenate_datasets([expert, labelled])
    want = max(len(labelled), round(mix * len(expert) / (1.0 - mix)))
    return datasets.concatenate_datasets([expert, labelled.select([i % len(labelled) for i in range(want)])])


def continue_sft(profile: Profile, start: str, states: list[dict], out_dir, steps: int, callbacks=None):
    """One round's training: SFT from `start` for `steps` steps on the expert's data (inquiries
    oversampled as in stage 1) plus every state labelled so far (`dagger_mix` of the examples)."""
    from .sft import _run_sft, training_records
    from ..data.benchmark import sft_split

    expert = training_records(sft_split(profile), profile, 1.0, profile.sft_inquiry_oversample)
    train = aggregate(expert, training_records(to_dataset(states), profile, 1.0, 1), profile.dagger_mix)
    return _run_sft(
        profile,
        start=start,
        out_dir=out_dir,
        inquiry_share=1.0,
        steps=steps,
        lr=profile.dagger_lr,
        warmup=max(1, steps // 20),
        train=train,
        callbacks=callbacks,
    )
