"""Stage 0's settings: a base agent that acts but never asks (the analogue of a pretrained GUI model), trained once by `training.sft.base_agent` and cached; 0 steps means the checkpoint is the base."""

from __future__ import annotations

from dataclasses import dataclass, field

from .shared import StageSettings


@dataclass(frozen=True)
class BaseAgentSettings(StageSettings):
    """Stage 0: the base agent's data, budget and start."""

    base_agent_steps: int = field(
        default=0,
        metadata={
            "help": "stage 0's training steps (0: no stage 0, the model itself is the base)",
            "affects": ("base_agent",),
        },
    )
    # same model, tokenizer and prompt, so a short profile reuses the long stage 0 (shipped or cached)
    base_agent_from: str = field(
        default="",
        metadata={
            "help": "start from another profile's base agent (its name, e.g. cpu) instead of training one ('': own)",
            "affects": ("checkpoints",),
        },
    )
    base_agent_lr: float = field(default=2e-3, metadata={"help": "stage 0's learning rate", "affects": ("base_agent",)})
    base_agent_init: str = field(
        default="",
        metadata={
            "help": "stage 0 continues this base agent (a cache folder name, e.g. a shipped one): its weights, or "
            "for a pretrained model its adapter ('': from random weights, or a new adapter)",
            "affects": ("base_agent",),
        },
    )
    base_agent_threads: int = field(
        default=0, metadata={"help": "torch threads for stage 0 (0: torch_threads)", "affects": ("run",)}
    )
    # The app is one decision a task, about a fifth of stage 0's rows, and the small agent's wrong apps are stable
    # pairs that more of the same mix teaches slowly (docs/lab/small.md)
    open_oversample: int = field(
        default=1,
        metadata={
            "help": "repeats of each `open` step (the app choice) in stage 0's data of fresh tasks (1: as played)",
            "affects": ("base_agent",),
        },
    )
