"""`training.weights`' schedule callback: a run that goes on from a checkpoint keeps the learning-rate schedule
of its step."""

from __future__ import annotations

import math

import pytest


def test_a_resumed_run_gets_the_schedule_of_its_step_not_a_fresh_warm_up():
    """The trainer restores the scheduler only beside optimizer.pt; a resume point without it would start the
    schedule again. The callback steps the schedule to the run's step, whatever state it was left in."""
    import torch
    from transformers import TrainerControl, TrainerState, get_cosine_schedule_with_warmup

    from inquire_lib.training.weights import schedule_from_step_callback

    def fresh():
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2e-4)
        return opt, get_cosine_schedule_with_warmup(opt, num_warmup_steps=30, num_training_steps=600)

    _, want = fresh()
    for _ in range(300):
        want.step()
    for already in (0, 150):  # never restored, or restored from a schedule started anew at step 150
        opt, sched = fresh()
        for _ in range(already):
            sched.step()
        state = TrainerState(global_step=300)
        schedule_from_step_callback().on_train_begin(None, state, TrainerControl(), lr_scheduler=sched)
        assert sched.last_epoch == 300 and opt.param_groups[0]["lr"] == pytest.approx(want.get_last_lr()[0])
    assert want.get_last_lr()[0] == pytest.approx(2e-4 * 0.5 * (1 + math.cos(math.pi * 270 / 570)))
    opt, sched = fresh()
    schedule_from_step_callback().on_train_begin(
        None, TrainerState(global_step=0), TrainerControl(), lr_scheduler=sched
    )
    assert sched.last_epoch == 0  # a run from the start is left alone
