"""The stages of the recipe and the loops between them, one call each: train a stage, choose its
checkpoint, evaluate a named checkpoint (once: an evaluation with the same key is read back), DAgger's
rounds and their equal-compute control, a GRPO stage over several training seeds.

Below both `pipeline` (the notebooks' front door, which hands these on) and `ablations` (which trains
and evaluates its points through them); above `training`, `evaluation` and `data`. Each call that trains
or evaluates one checkpoint records its wall time in the run's timings (`stages.timed`).
"""

from .compare_asking import AGENTS as ASKING_AGENTS, asker_names, asking_curves, compare_agents, compare_asking
from .dagger_rounds import dagger, dagger_examples, dagger_table, sft_control
from .evaluate import (
    choose_on_validation,
    evaluate_all_tasks,
    evaluate_checkpoint,
    evaluate_checkpoint_tasks,
    evaluate_once,
    evaluate_references,
    operating_curves,
    played_digest,
    scored_names,
)
from .grpo_seeds import grpo_seeds, seed_names
from .train import base_agent, grpo, select_checkpoint, sft, short_run

__all__ = [
    "ASKING_AGENTS",
    "asker_names",
    "asking_curves",
    "compare_agents",
    "compare_asking",
    "dagger",
    "dagger_examples",
    "dagger_table",
    "sft_control",
    "choose_on_validation",
    "evaluate_all_tasks",
    "evaluate_checkpoint",
    "evaluate_checkpoint_tasks",
    "evaluate_once",
    "evaluate_references",
    "operating_curves",
    "played_digest",
    "scored_names",
    "grpo_seeds",
    "seed_names",
    "base_agent",
    "grpo",
    "select_checkpoint",
    "sft",
    "short_run",
]
