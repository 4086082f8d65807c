"""What every stage's trainer shares: the result it returns and how it is run and saved."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from .models import disable_bnb_cpu_repack

# TRL 1.16 reads `model.is_gradient_checkpointing`, which transformers 5.23 deprecated in favour of
# `is_activation_checkpointing` (a FutureWarning at every train and generation call: 13 blocks in a
# smoke run's notebooks). Nothing for us to change until TRL does; the configs already use the new name.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)


@dataclass
class TrainResult:
    path: str  # a full model dir, or an adapter dir when `adapter` is True
    adapter: bool
    log_history: list
    n_examples: int
    seconds: float
    samples: list | None = None  # GRPO: the last generation batch with its rewards


def fit(trainer, out_dir: Path, resume: bool) -> tuple[Path, float]:
    """Train (from the last checkpoint in `out_dir` when resuming), save to `out_dir/final`;
    returns that path and the training seconds."""
    import time

    disable_bnb_cpu_repack(trainer.model)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=last_checkpoint(out_dir) if resume else None)
    seconds = time.time() - t0
    final = out_dir / "final"
    trainer.save_model(str(final))
    return final, seconds


def last_checkpoint(out_dir: Path) -> str | None:
    """The newest `checkpoint-*` folder of a run, or None."""
    from transformers.trainer_utils import get_last_checkpoint
    return get_last_checkpoint(str(out_dir)) if out_dir.exists() else None
