"""Stage 3's settings: task-level, multi-turn GRPO in PhoneEnv."""

from __future__ import annotations

from dataclasses import dataclass, field

from .stage2 import GRPOSettings


@dataclass(frozen=True)
class TaskGRPOSettings(GRPOSettings):
    """Stage 3: task-level GRPO, on stage 2's optimiser settings and the episodes it plays (`EvalSettings`)."""

    task_grad_accum: int = field(
        default=1, metadata={"help": "gradient accumulation of stage 3: micro-batches per process", "affects": ("run",)}
    )
    task_grpo_steps: int = field(
        default=20,
        metadata={"trl": {"task_grpo_config": "max_steps"}, "help": "stage 3's GRPO steps", "affects": ("task_grpo",)},
    )
    task_num_generations: int = field(
        default=4,
        metadata={
            "trl": {"task_grpo_config": "num_generations"},
            "help": "episodes per task in a stage 3 group",
            "affects": ("task_grpo",),
        },
    )
    task_max_completion_length: int | None = field(
        default=None,
        metadata={
            "help": "stage 3's token budget of a whole episode, answers and tool results (TRL's max_completion_length "
            "there); unset: every turn at max_completion_length with its tool result",
            "affects": ("task_grpo",),
        },
    )
    task_rollout: str = field(
        default="conversation",
        metadata={
            "help": "how stage 3 plays an episode: 'conversation', TRL's tool-calling rollout (the shipped grpo_task's); "
            "'reprompt', the evaluation's episode (`training.task_starts`)",
            "affects": ("task_grpo",),
        },
    )
    task_start_shares: dict[str, float] = field(
        default_factory=lambda: {"start": 1.0},
        metadata={
            "help": "with task_rollout 'reprompt', stage 3's start states as shares: 'start' (the first screen), "
            "'path' (along the expert's path), 'slip' (right after a mistake a Back undoes)",
            "affects": ("task_grpo",),
        },
    )
