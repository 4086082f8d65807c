"""Helpers shared by the trainer benchmarks (not a benchmark itself: `make bench` skips `_*.py`)."""
from __future__ import annotations

import time


def step_timer():
    """A TrainerCallback that records the wall time of every optimizer step."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self._t0 = None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self._t0)

    return StepTimer()


def train_runtime(log_history: list[dict]) -> float:
    """The trainer's own train_runtime (seconds), from its final log entry."""
    for entry in reversed(log_history):
        if "train_runtime" in entry:
            return float(entry["train_runtime"])
    raise KeyError("train_runtime missing from the trainer's log history")
