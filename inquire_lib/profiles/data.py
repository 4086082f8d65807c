"""The data's settings: generated InquireBench, its splits and probe sets, and the seed behind them."""

from __future__ import annotations

from dataclasses import dataclass, field

# how training tasks draw slot values and phrasings (`world.values`): "fixed" (the train pools and the
# template's sentence) or "procedural" (open-ended composed values and composed phrasings)
TRAIN_VALUES = ("fixed", "procedural")

# the share of generated tasks that form the test split; the rest is the training split
TEST_FRACTION = 0.2


def split_sizes(n_tasks: int) -> dict[str, int]:
    """The real sizes of the training and test splits of `n_tasks` generated tasks."""
    n_test = max(1, round(n_tasks * TEST_FRACTION))
    return {"train": n_tasks - n_test, "test": n_test}


@dataclass(frozen=True)
class DataSettings:
    """Which tasks the training, validation and test splits hold (`data.benchmark`)."""

    seed: int = field(
        default=0,
        metadata={
            "help": "the seed of the data, the tiny model, the base agent and every training run",
            "affects": ("data", "tokenizer", "base_agent", "checkpoints", "eval"),
        },
    )
    benchmark_tasks: int = field(
        default=520,
        metadata={
            "help": "tasks InquireBench generates for the profile, split 80/20 into the training and the test split "
            "(their real sizes: `train_split_tasks`, `test_split_tasks`)",
            "affects": ("data", "base_agent", "checkpoints"),
        },
    )
    val_tasks: int = field(
        default=80,
        metadata={
            "help": "validation tasks: they choose among GRPO checkpoints, so the test split never does",
            "affects": ("data", "grpo"),
        },
    )
    # The tiny model's tokenizer is built from training text of the same kind, and each setting has
    # caches of its own; the test and validation splits are the same either way.
    train_values: str = field(
        default="fixed",
        metadata={
            "help": "how the training split draws slot values and phrasings: fixed (the train pools and the templates' "
            "sentences) or procedural (open-ended composed values and phrasings; `world.values`)",
            "affects": ("data", "tokenizer", "base_agent", "checkpoints"),
        },
    )
    val_inquiry_steps: int = field(
        default=0,
        metadata={
            "help": "the step-level validation holds at least this many inquiry steps, topped up with probes "
            "(0: no probes)",
            "affects": ("data", "grpo"),
        },
    )

    @property
    def train_split_tasks(self) -> int:
        """The training split's real size: `benchmark_tasks` less the test split."""
        return split_sizes(self.benchmark_tasks)["train"]

    @property
    def test_split_tasks(self) -> int:
        """The test split's real size (the held-out tasks that evaluations draw `eval_tasks` from)."""
        return split_sizes(self.benchmark_tasks)["test"]
