"""The training stages as the run calls them: timed, checkpoint choice on the validation split, and the short
runs a notebook trains beside a shipped stage."""

from __future__ import annotations

from ..profiles import Profile
from ..runs.paths import artifacts_dir
from ..training.checkpoints import checkpoint_path
from ..training.fit import TrainResult
from ..training.grpo import grpo as _grpo
from ..training.selection import chosen_on_validation
from ..training.sft import base_agent as _base_agent
from ..training.sft import sft as _sft
from .timed import timed

base_agent = timed("base agent")(_base_agent)
sft = timed("sft")(_sft)
grpo = timed("grpo")(_grpo)

# a short run is named `<stage>_short`; the stage each one mirrors: its budget field and the checkpoint its
# shipped result started from (None: the base agent)
SHORT_SUFFIX = "_short"
SHORT_RUNS = {
    "sft_full": ("short_sft_steps", None),
    "grpo_weak": ("short_grpo_steps", "sft_weak"),
}


@timed("select on validation")
def select_checkpoint(profile: Profile, name: str, start_name: str, out_root=None) -> dict:
    """Choose among the kept checkpoints of run `name` on the validation split (see `training.selection`);
    afterwards `checkpoint_path(profile, name)` is the chosen one. A shipped result was chosen where it was
    trained: its choice is read back, not made again."""
    run = artifacts_dir(profile) / name
    return chosen_on_validation(profile, name, checkpoint_path(profile, start_name), run, out_root)


def short_name(stage: str) -> str:
    return stage + SHORT_SUFFIX


def short_profile(profile: Profile, stage: str) -> Profile:
    """The settings of `stage`'s short run: the stage's own, for its short budget (`SHORT_RUNS`), with what a
    few steps need: stage 1's warm-up scaled to the budget (the same share of it, at least one step, so the
    learning rate reaches its peak) and one checkpoint at the end."""
    steps = getattr(profile, SHORT_RUNS[stage][0])
    if stage == "sft_full":
        warmup = max(1, round(steps * profile.sft_warmup_steps / max(1, profile.sft_steps)))
        return profile.replace(sft_steps=steps, sft_warmup_steps=warmup, sft_save_steps=steps)
    return profile.replace(grpo_steps=steps, grpo_save_steps=steps)


def short_run(profile: Profile, stage: str) -> TrainResult | None:
    """`<stage>_short`: `stage` trained here from the checkpoint its shipped result started from, on the short
    budget the profile gives it (`short_profile`), so a student watches training run and its curves move
    beside the full-budget result, which the notebook installs and evaluates. The run is named apart, so it
    is never shipped nor taken for the stage; it is not evaluated (a few steps move no rate by more than the
    test's interval). None where the profile gives it no steps."""
    if getattr(profile, SHORT_RUNS[stage][0]) <= 0:
        return None
    return _train_short(profile, stage, short_name(stage))


@timed("short run")
def _train_short(profile: Profile, stage: str, name: str) -> TrainResult:
    run, start = short_profile(profile, stage), SHORT_RUNS[stage][1]
    if stage == "sft_full":
        return _sft(run, name=name, inquiry_share=profile.sft_inquiry_share)
    return _grpo(run, start=checkpoint_path(profile, start), name=name)
