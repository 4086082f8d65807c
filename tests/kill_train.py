"""Run a smoke SFT that kills itself with SIGKILL at a chosen point (used by test_integrity.py).

    python tests/kill_train.py save  NAME STEPS   # SIGKILL while checkpoint-STEPS is being saved
    python tests/kill_train.py final NAME STEPS   # SIGKILL after final/'s weights, before its metadata
    python tests/kill_train.py none  NAME STEPS   # no kill

Resumes from the last complete checkpoint when one exists; appends the optimizer steps it ran to
`<artifacts>/smoke/NAME.steps` (one JSON list per process). Uses $INQUIRE_CACHE / $INQUIRE_ARTIFACTS.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import torch
from transformers import Trainer, TrainerCallback

from inquire_lib.profiles import get_profile
from inquire_lib.training.sft import sft

# no base agent: the run starts from the tiny model itself, so nothing else trains before it
PROFILE = get_profile("smoke").replace(sft_save_steps=2, torch_threads=1, base_agent_steps=0)


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class Steps(TrainerCallback):
    def __init__(self, path):
        self.path, self.ran = path, []

    def on_step_end(self, args, state, control, **kwargs):
        self.ran.append(state.global_step)
        with open(self.path, "a") as fh:  # written as we go: the process may not get to the end
            fh.write(json.dumps(state.global_step) + "\n")


def main(mode: str, name: str, steps: int) -> None:
    torch.set_num_threads(1)
    if mode == "save":
        original = Trainer._save_rng_state

        def killing_save_rng_state(self, output_dir):  # weights and optimizer are on disk by now
            if self.state.global_step == steps and os.path.basename(self.args.output_dir) == name:
                die()
            return original(self, output_dir)

        Trainer._save_rng_state = killing_save_rng_state
    elif mode == "final":
        original_save = Trainer.save_model

        def killing_save_model(self, output_dir=None, _internal_call=False):
            original_save(self, output_dir, _internal_call)
            if not _internal_call and os.path.basename(os.path.dirname(output_dir)) == name:
                die()  # the final model of this run (not a checkpoint): weights written, no metadata

        Trainer.save_model = killing_save_model
    log = os.path.join(os.environ["INQUIRE_ARTIFACTS"], "smoke", f"{name}.steps")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "a") as fh:
        fh.write("start\n")
    sft(PROFILE, name=name, max_steps=steps, resume=True, callbacks=[Steps(log)])
    print("finished")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
