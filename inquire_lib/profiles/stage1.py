"""Stage 1's settings: SFT of the full and the weak inquirer, and stage 1b, DAgger rounds from full SFT (roll out, label the visited states with the expert, continue SFT)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .shared import StageSettings


@dataclass(frozen=True)
class SFTSettings(StageSettings):
    """Stage 1 (sft_weak, sft_full) and its DAgger rounds."""

    sft_steps: int = field(
        default=600, metadata={"trl": {"sft_config": "max_steps"}, "help": "stage 1's SFT steps", "affects": ("sft",)}
    )
    sft_batch: int = field(
        default=16,
        metadata={
            "help": "sequences in an SFT optimizer step (global), for stage 0, stage 1 and DAgger's rounds",
            "affects": ("base_agent", "sft", "dagger"),
        },
    )
    sft_lr: float = field(
        default=2e-3,
        metadata={"trl": {"sft_config": "learning_rate"}, "help": "stage 1's learning rate", "affects": ("sft",)},
    )
    sft_warmup_steps: int = field(
        default=30,
        metadata={
            "trl": {"sft_config": "warmup_steps"},
            "help": "stage 1's learning-rate warm-up steps",
            "affects": ("sft",),
        },
    )
    sft_inquiry_share: float = field(
        default=1.0, metadata={"help": "the share of inquiry steps full SFT keeps (sft_full)", "affects": ("sft",)}
    )
    sft_inquiry_oversample: int = field(
        default=4,
        metadata={
            "help": "repeats of each inquiry step in SFT data (stage 1 and DAgger's expert data)",
            "affects": ("sft", "dagger"),
        },
    )
    weak_inquiry_share: float = field(
        default=0.15,
        metadata={
            "help": "the share of inquiry steps weak SFT keeps (sft_weak, the weak inquirer GRPO starts from)",
            "affects": ("sft",),
        },
    )
    sft_save_steps: int = field(
        default=200,
        metadata={
            "trl": {"sft_config": "save_steps"},
            "help": "stage 1 keeps a checkpoint every this many steps (to resume from)",
            "affects": ("run",),
        },
    )
    # The batch of an optimizer step (sft_batch sequences; GRPO prompts x generations) is the global one,
    # split over processes and then over this many micro-batches, so a forward pass holds
    # global / (processes x accumulation) sequences
    sft_grad_accum: int = field(
        default=1,
        metadata={
            "help": "gradient accumulation of SFT (stages 0, 1, DAgger): micro-batches per process",
            "affects": ("run",),
        },
    )
    # --- stage 1b: DAgger rounds from full SFT (roll out, label visited states with the expert, continue SFT) ---
    dagger_rounds: int = field(default=2, metadata={"help": "DAgger rounds from full SFT", "affects": ("dagger",)})
    dagger_tasks: int = field(
        default=64, metadata={"help": "training tasks rolled out per DAgger round", "affects": ("dagger",)}
    )
    dagger_steps: int = field(
        default=50, metadata={"help": "SFT steps per DAgger round on the aggregate", "affects": ("dagger",)}
    )
    dagger_beta: float = field(
        default=0.0,
        metadata={
            "help": "chance per turn that the expert acts instead during DAgger's roll-outs",
            "affects": ("dagger",),
        },
    )
    # 0: the plain union, where a few hundred states are a small share of each batch among the expert's steps;
    # a large share repeats each state until its values are recalled (docs/lab/log.md, DAgger)
    dagger_mix: float = field(
        default=0.0,
        metadata={
            "help": "the share of a DAgger round's examples drawn from the labelled states (repeated to reach it)",
            "affects": ("dagger",),
        },
    )
    dagger_lr: float = field(default=5e-4, metadata={"help": "DAgger rounds' learning rate", "affects": ("dagger",)})
