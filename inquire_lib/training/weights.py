"""Checks of model weights and checkpoint markers that need torch or transformers, kept out of
`runs.integrity` so that reading records and drawing reports never import them."""

from __future__ import annotations

import os
from pathlib import Path

from ..runs.integrity import write_marker


class CorruptWeightsError(ValueError):
    """A model file that cannot be trusted: truncated, unreadable, or holding NaN/Inf values."""


def mark_checkpoints_callback(before: float = 0.0, key: str | None = None):
    """A `transformers.TrainerCallback` that writes the completeness marker into each checkpoint
    once the trainer has saved all of it (weights, optimizer, RNG and trainer state). The marker also
    records the training seconds up to that step: `before` (those of the sittings the run was resumed
    through) and this sitting's, so a run spread over several sittings still says what it cost; and the
    content key of the settings that shaped the run (`key`, when it has one), which a resume checks."""
    import time

    from transformers import TrainerCallback

    class MarkCheckpoints(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.t0 = time.time()

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    seconds = round(before + time.time() - self.t0, 1)
                    write_marker(folder, step=state.global_step, seconds=seconds, **({"key": key} if key else {}))

    return MarkCheckpoints()


def schedule_from_step_callback():
    """A `transformers.TrainerCallback` that, when a run goes on from a checkpoint, brings the learning-rate
    schedule to the step the run stands at. The trainer restores the schedule only beside the optimizer's
    moments (`optimizer.pt`), which a shipped resume point leaves out; without this the schedule would
    start again from its warm-up at every such resume. The schedule is a function of the step, so it is
    stepped forward, not read from a file that may hold a schedule already started anew."""
    import warnings

    from transformers import TrainerCallback

    class ScheduleFromStep(TrainerCallback):
        def on_train_begin(self, args, state, control, lr_scheduler=None, **kwargs):
            if lr_scheduler is None or lr_scheduler.last_epoch >= state.global_step:
                return
            with warnings.catch_warnings():  # "scheduler.step() before optimizer.step()": no step is skipped here
                warnings.simplefilter("ignore", UserWarning)
                while lr_scheduler.last_epoch < state.global_step:
                    lr_scheduler.step()

    return ScheduleFromStep()


def check_weights(path: str | os.PathLike) -> int:
    """Refuse a model folder (or one .safetensors file) that cannot be trusted: a file that does not
    parse (truncated) or a floating-point tensor with NaN or Inf values raises CorruptWeightsError
    naming the file and the tensor. Returns the number of tensors checked; a hub id (not a local
    path) is left to its own loader and gives 0."""
    import torch
    from safetensors import safe_open

    path = Path(path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.safetensors"))
    else:
        return 0
    n = 0
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                for name in fh.keys():
                    t = fh.get_tensor(name)
                    n += 1
                    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                        bad = int((~torch.isfinite(t)).sum())
                        raise CorruptWeightsError(
                            f"{f}: tensor '{name}' holds {bad} NaN/Inf values; refusing to load it"
                        )
        except CorruptWeightsError:
            raise
        except Exception as exc:  # safetensors raises its own error types for a truncated header/body
            raise CorruptWeightsError(f"{f}: unreadable weights ({type(exc).__name__}: {exc})") from None
    return n
