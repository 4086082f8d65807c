"""Stage 2's prompts from the start's own mistakes: the states where the checkpoint GRPO starts from,
played greedily on fresh training tasks, did not do what the simulator's expert would.

GRPO's other prompts are the expert's own steps (and the expert's own detours): states the start
may never reach, while the states it does reach after its own errors (its needless ask answered with
"nothing to clarify", the screen after a wrong type or click) go untrained. Here

    play `start` greedily on `grpo_mistake_tasks` fresh training tasks (`data.benchmark.GRPO_MISTAKES_FIRST`
        onwards), every visited state labelled by the expert (`training.dagger.Labeller`);
    keep the states whose step outcome (`evaluation.episodes`) is one of `grpo_mistake_outcomes`: by
        default a needless or missed inquiry (of sft_full's 1,525 mistakes on 400 tasks, 1,019 are a
        wrong argument, mostly one wrong value typed again and again; 157 are inquiries).

Each kept state is a prompt with the expert's label, scored by the same rewards as any other, so
GRPO prices exactly the choices the start gets wrong where it meets them. The states depend on the
start's weights: they are cached under the start's content digest (`training.models.model_digest`)
and the settings that shape the play.
"""

from __future__ import annotations

import hashlib
import json

import datasets

from ..data.benchmark import DATA_VERSION, GRPO_MISTAKES_FIRST, cached_dataset, task_at
from ..profiles import Profile, fields_affecting
from ..runs.paths import cache_dir
from .dagger import labelled_rollout, to_dataset
from .models import model_digest

# the profile's fields that change the start's mistakes, as their metadata says (`profiles.AFFECTS`): an
# evaluation's, how tasks are drawn, how many are played and which outcomes count
_PLAY_FIELDS = fields_affecting("mistakes")
# the names the key has always given two of them, so that a cache keeps its name
_KEY_NAMES = {"grpo_mistake_tasks": "tasks", "grpo_mistake_outcomes": "outcomes"}


def mistake_tasks(profile: Profile) -> list:
    return [
        task_at(profile.seed, "train", GRPO_MISTAKES_FIRST + i, profile.train_values)
        for i in range(profile.grpo_mistake_tasks)
    ]


def mistakes_of(labelled: list[dict], played: list[dict], outcomes=None) -> list[dict]:
    """The labelled states (`dagger.label_state`: task_id, step) whose step in the played episodes has one
    of the `outcomes` (None: any outcome other than "correct")."""
    outcome = {(ep["task_id"], st["step"]): st["outcome"] for ep in played for st in ep["steps"]}
    missing = [(s["task_id"], s["step"]) for s in labelled if (s["task_id"], s["step"]) not in outcome]
    if missing:
        raise ValueError(f"labelled states with no played step: {missing[:3]}")
    wrong = (lambda o: o != "correct") if outcomes is None else (lambda o: o in outcomes)
    return [s for s in labelled if wrong(outcome[(s["task_id"], s["step"])])]


def play_key(profile: Profile, start_digest: str) -> str:
    fields = {_KEY_NAMES.get(k, k): getattr(profile, k) for k in _PLAY_FIELDS}
    fields["outcomes"] = sorted(fields["outcomes"])
    blob = json.dumps({"start": start_digest, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def mistake_states(profile: Profile, start: str) -> datasets.Dataset:
    """The start's mistakes as step records of the benchmark's schema (ids `mistake/<task>/<turn>`),
    played once per start and settings, then read from the cache."""
    key = play_key(profile, model_digest(start, profile))
    path = cache_dir() / "data" / f"inquirebench-v{DATA_VERSION}-s{profile.seed}-grpo-mistakes-{key}"

    def build() -> datasets.Dataset:
        labeller, played = labelled_rollout(profile, start, 0, mistake_tasks(profile), id_prefix="mistake")
        return to_dataset(mistakes_of(labeller.states, played, profile.grpo_mistake_outcomes))

    return cached_dataset(path, build)
