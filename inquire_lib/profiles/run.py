"""How a run executes and what it writes beside its results: its name, the ablation points' budgets, the short
runs, figures, time limits, and the overrides it was made with."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Named:
    """The profile's name, first of every field."""

    name: str = field(
        metadata={
            "help": "the profile's name: names its runs, artifacts and base agent folder; chosen, never overridden",
            "affects": ("run",),
        }
    )


@dataclass(frozen=True)
class RunSettings:
    """How a run executes and what it records."""

    # --- ablations: training budget of each variant, same for all ---
    ablation_sft_steps: int = field(
        default=60, metadata={"help": "SFT steps of each ablation variant", "affects": ("ablations",)}
    )
    ablation_grpo_steps: int = field(
        default=30, metadata={"help": "GRPO steps of each ablation variant", "affects": ("ablations",)}
    )
    ablation_seeds: int = field(
        default=1,
        metadata={"help": "training seeds per ablation variant (train_seed 0, 1, ...)", "affects": ("ablations",)},
    )
    # --- short runs: a stage trained here for a few steps from its start, beside its shipped full-budget result ---
    short_sft_steps: int = field(
        default=0,
        metadata={
            "help": "SFT steps of the short run `sft_full_short`, trained from the base agent beside the shipped sft_full "
            "(0: none)",
            "affects": ("run",),
        },
    )
    short_grpo_steps: int = field(
        default=0,
        metadata={
            "help": "GRPO steps of the short run `grpo_weak_short`, trained from the shipped sft_weak beside the "
            "shipped grpo_weak (0: none)",
            "affects": ("run",),
        },
    )
    trains_in_run: bool = field(
        default=False,
        metadata={
            "help": "whether a run trains this profile's stages by design (smoke: minutes in all); otherwise a run "
            "whose plan trains past the short runs stops first and asks for --train",
            "affects": ("run",),
        },
    )
    export_png: bool = field(
        default=True, metadata={"help": "figures as PNG too (needs a Chrome), not only HTML", "affects": ("run",)}
    )
    cell_timeout_s: int | None = field(
        default=None,
        metadata={
            "help": "seconds one notebook cell may run before papermill stops it as hung (None: no limit)",
            "affects": ("run",),
        },
    )
    # set by `apply_overrides` only, so an internal `replace` (ablation variants) keeps sharing the run's base agent
    overrides: tuple = field(
        default=(),
        metadata={
            "help": "the overrides this profile was made with, sorted (key, value) pairs; recorded, never overridden",
            "affects": ("run",),
        },
    )
