"""The task splits an online evaluation plays: in distribution (the held-out test tasks), and the splits that step
past the generator, each used by no training, selection or tuning, each rebuilt bit for bit from its seed.

| split               | what it holds (one line: its purpose)                                                     |
|---------------------|-------------------------------------------------------------------------------------------|
| `test`              | the held-out test tasks: held-out values, every phrasing (3 of the 4 seen in training)   |
| `held_out_phrasing` | test tasks whose instruction is the one phrasing of its builder that training never sees |
| `written`           | instructions written apart from the generator, on the builders' flows (`data.written`)   |
"""

from __future__ import annotations

from ..profiles import EvalSettings
from ..world.flow import Task
from ..world.tasks import PHRASINGS
from .benchmark import held_out_tasks, task_at
from .written import fingerprint, written_tasks

SPLITS = {
    "test": "the held-out test tasks: held-out values, every phrasing (3 of the 4 seen in training)",
    "held_out_phrasing": "test tasks whose instruction is the phrasing of its builder that training never sees",
    "written": "instructions written apart from the generator, played on the builders' own flows",
}
HELD_OUT_PHRASING = PHRASINGS - 1  # `world.tasks.generate_task`: training draws the others only


def held_out_phrasing_tasks(seed: int, n: int) -> list[Task]:
    """The first `n` tasks of the test split (in index order, past the evaluated ones where needed) whose template
    is its builder's held-out phrasing."""
    out, i = [], 0
    while len(out) < n:
        task = task_at(seed, "test", i)
        if task.template.endswith(f":{HELD_OUT_PHRASING}"):
            out.append(task)
        i += 1
    return out


def split_tasks(profile: EvalSettings, split: str) -> list[Task]:
    """The tasks an online evaluation of `split` plays (as many as the test split's for the first two)."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")
    if split == "test":
        return held_out_tasks(profile)
    if split == "held_out_phrasing":
        # as many as the test split plays (`held_out_tasks`), counted without generating them
        return held_out_phrasing_tasks(profile.seed, profile.task_eval_tasks or profile.eval_tasks)
    return written_tasks(profile.seed)


def split_fingerprint(tasks: list[Task]) -> str:
    """A split's fingerprint: 16 hex digits of a sha256 over each task's id, template, instruction, app,
    sub-category and expert path (`data.written.fingerprint`, which serves every split)."""
    return fingerprint(tasks)
