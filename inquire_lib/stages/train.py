"""The training stages as the run calls them: timed, and checkpoint choice on the validation split."""

from __future__ import annotations

from ..profiles import Profile
from ..runs.paths import artifacts_dir
from ..training.checkpoints import checkpoint_path
from ..training.grpo import grpo as _grpo
from ..training.selection import chosen_on_validation
from ..training.sft import base_agent as _base_agent
from ..training.sft import sft as _sft
from .timed import timed

base_agent = timed("base agent")(_base_agent)
sft = timed("sft")(_sft)
grpo = timed("grpo")(_grpo)


@timed("select on validation")
def select_checkpoint(profile: Profile, name: str, start_name: str, out_root=None) -> dict:
    """Choose among the kept checkpoints of run `name` on the validation split (see `training.selection`);
    afterwards `checkpoint_path(profile, name)` is the chosen one. A shipped result was chosen where it was
    trained: its choice is read back, not made again."""
    run = artifacts_dir(profile) / name
    return chosen_on_validation(profile, name, checkpoint_path(profile, start_name), run, out_root)
