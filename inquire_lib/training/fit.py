"""What every stage's trainer shares: the result it returns and how it is run and saved."""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import devices
from .models import disable_bnb_cpu_repack
from ..runs.hardware import device_stamp

# TRL 1.16 reads `model.is_gradient_checkpointing`, which transformers 5.23 deprecated in favour of
# `is_activation_checkpointing` (a FutureWarning at every train and generation call: 13 blocks in a
# smoke run's notebooks). Nothing for us to change until TRL does; the configs already use the new name.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)


class _SameSecondCheckpoints(logging.Filter):
    """The Trainer orders checkpoints by mtime and, when two were saved within a second (a smoke
    run saves every step), says mtime "may not be reliable" and orders them by step: that order is
    the one we rely on anyway (`runs.integrity` reads the step from the name), so the line is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "mtime may not be reliable" not in record.getMessage()


logging.getLogger("transformers.trainer_utils").addFilter(_SameSecondCheckpoints())


@dataclass
class TrainResult:
    path: str  # a full model dir, or an adapter dir when `adapter` is True
    adapter: bool
    log_history: list
    n_examples: int
    seconds: float
    samples: list | None = None  # GRPO: the last generation batch with its rewards


class StaleCheckpoint(ValueError):
    """A checkpoint made under other settings than the run resuming from it: `str()` is one line naming it."""


def fit(trainer, out_dir: Path, resume: bool, meta=None, key: str | None = None) -> tuple[Path, float]:
    """Train (from the last *complete* checkpoint in `out_dir` when resuming), then write
    `out_dir/final`: the weights, `inquire_train.json` from `meta(folder, seconds)` and the
    completeness marker appear in one atomic step, so a kill part-way leaves no `final` at all.
    Every checkpoint the trainer saves gets its marker once fully written. Returns `final` and the
    training seconds. One process at a time trains into `out_dir`: another stops at once (`runs.locks.Busy`).
    `key`: the content key of the settings that shape the run. Every checkpoint and `final` record it, and a
    resume goes on only from a checkpoint of the same key (`StaleCheckpoint` otherwise)."""
    from ..runs import locks

    if not devices.is_main_process():  # the other processes of one distributed run follow the main one
        return _fit(trainer, out_dir, resume, meta, key)
    with locks.held(Path(out_dir) / locks.LOCK_NAME, f"training into {out_dir}"):
        return _fit(trainer, out_dir, resume, meta, key)


def check_resume_key(checkpoint: str | None, key: str | None) -> None:
    """Refuse, in one line, to go on from a checkpoint whose marker names another settings key than `key` (or
    none: made before checkpoints carried one). Nothing to check without a checkpoint or a key."""
    from ..runs.integrity import read_marker

    if checkpoint is None or key is None:
        return
    made = (read_marker(checkpoint) or {}).get("key")
    if made != key:
        raise StaleCheckpoint(
            f"{checkpoint}: made under settings key {made or 'unrecorded'}, these settings' key is {key}: "
            "resume only what these settings made (train into another run with --set or --name, or set this "
            "folder aside)"
        )


def _fit(trainer, out_dir: Path, resume: bool, meta, key: str | None) -> tuple[Path, float]:
    import json
    import time

    from ..runs.integrity import discard_stale_temps, read_marker, write_marker
    from .weights import mark_checkpoints_callback, schedule_from_step_callback
    from ..runs.paths import atomic_dir

    disable_bnb_cpu_repack(trainer.model)
    devices.prepare_trainer(trainer)  # fp32 adapters, SFT's loss over the global batch
    if devices.is_main_process():
        discard_stale_temps(out_dir, "final")  # left by a run killed while publishing its final model
    checkpoint = last_checkpoint(out_dir) if resume else None
    check_resume_key(checkpoint, key)
    # the seconds of the sittings before this one, as the checkpoint gone on from recorded them
    earlier = float((read_marker(checkpoint) or {}).get("seconds", 0.0)) if checkpoint else 0.0
    trainer.add_callback(mark_checkpoints_callback(earlier, key))
    trainer.add_callback(schedule_from_step_callback())
    restored = (
        checkpoint is not None
        and not getattr(trainer, "is_deepspeed_enabled", False)  # DeepSpeed restores its own
        and restore_full_weights(trainer.model, checkpoint)
    )
    t0 = time.time()
    with _quiet_key_mismatch(restored):
        trainer.train(resume_from_checkpoint=checkpoint)
    seconds = time.time() - t0
    final = out_dir / "final"
    if devices.is_main_process():
        with atomic_dir(final) as tmp:
            trainer.save_model(str(tmp))
            if meta is not None:
                # the machine trained on beside what it trained: the same code trains other weights on another CPU kind
                # the seconds of this sitting, and of every sitting the run was resumed through
                record = {**meta(tmp, seconds), "seconds_total": round(earlier + seconds, 1), "device": device_stamp()}
                (tmp / "inquire_train.json").write_text(json.dumps(record, default=str))
            write_marker(tmp, **({"key": key} if key else {}))
    else:
        trainer.save_model(str(final))  # collective under ZeRO-3; only the main process writes
    devices.wait_for_everyone()
    return final, seconds


def restore_full_weights(model, checkpoint: str) -> bool:
    """Put a checkpoint's full weights into `model` before the Trainer resumes from it; False for an
    adapter checkpoint, which the Trainer restores itself.

    The Trainer restores full weights with `load_state_dict(strict=False)` on the file's own keys, but
    `save_pretrained` writes Qwen2.5-VL's keys in the hub's layout (`model.layers.*`, `visual.*`) while the
    loaded model names them `model.language_model.*`, `model.visual.*`: nothing matches, and a resumed run
    would go on from its *start* weights with the checkpoint's optimizer and step (measured: KL to the start
    0.14 before a kill, 0.0003 after the resume). `from_pretrained` maps the keys; the copy is strict, so any
    other mismatch fails loudly."""
    folder = Path(checkpoint)
    if (folder / "adapter_config.json").exists() or not any(folder.glob("model*.safetensors")):
        return False
    loaded = type(model).from_pretrained(str(folder), dtype=next(model.parameters()).dtype)
    model.load_state_dict(loaded.state_dict(), strict=True)
    return True


@contextlib.contextmanager
def _quiet_key_mismatch(active: bool):
    """Drop the Trainer's notice that every key of the checkpoint is missing and unexpected: after
    `restore_full_weights` put the weights in place, that notice is wrong."""
    log = logging.getLogger("transformers.trainer")
    notice = lambda record: not record.getMessage().startswith(
        ("There were missing keys", "There were unexpected keys")
    )
    if active:
        log.addFilter(notice)
    try:
        yield
    finally:
        log.removeFilter(notice)


def last_checkpoint(out_dir: Path) -> str | None:
    """The newest complete checkpoint of a run (half-saved newer ones are discarded), or None."""
    from ..runs.integrity import last_complete_checkpoint

    return last_complete_checkpoint(out_dir, discard_incomplete=True)
