"""What every stage's trainer shares: the result it returns and how it is run and saved."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import devices
from .models import disable_bnb_cpu_repack


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
    returns that path and the training seconds. The trainer is first prepared for its devices
    (`devices.prepare_trainer`: fp32 adapters, SFT's loss over the global batch)."""
    import time

    disable_bnb_cpu_repack(trainer.model)
    devices.prepare_trainer(trainer)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=last_checkpoint(out_dir) if resume else None)
    seconds = time.time() - t0
    final = out_dir / "final"
    trainer.save_model(str(final))
    return final, seconds


def write_train_meta(final: Path, text: str) -> None:
    """`final/inquire_train.json`, written by rank 0 only (every rank holds the same record)."""
    if devices.is_main_process():
        (final / "inquire_train.json").write_text(text)


def last_checkpoint(out_dir: Path) -> str | None:
    """The newest `checkpoint-*` folder of a run, or None."""
    from transformers.trainer_utils import get_last_checkpoint
    return get_last_checkpoint(str(out_dir)) if out_dir.exists() else None
