"""Named checkpoints of a profile: where each one lies and which exist."""
from __future__ import annotations

from ..profiles import Profile
from ..runs.integrity import finished_output
from ..runs.paths import artifacts_dir
from ..runs.records import ORDER
from .sft import base_agent


def checkpoint_path(profile: Profile, name: str) -> str | None:
    """Path of a named checkpoint: None for the untrained model, the cached base agent, or a stage
    output (`artifacts/<profile>/<name>/selected` when validation chose one, else `.../final`)."""
    if name == "untrained":
        return None
    if name == "base_agent":
        return base_agent(profile)
    run = artifacts_dir(profile) / name
    if finished_output(run / "selected"):  # chosen on the validation split (`training.selection`)
        return str(run / "selected")
    path = run / "final"
    if not finished_output(path):  # a final/ cut short is not a trained checkpoint
        why = "is incomplete (its run was cut short)" if path.exists() else "has not been trained"
        raise FileNotFoundError(f"{path}: checkpoint {name!r} {why} for profile {profile.name!r}")
    return str(path)


def available_checkpoints(profile: Profile) -> list[str]:
    """The untrained model, the base agent where the profile has one, then every trained stage in `ORDER`."""
    names = ["untrained"] + (["base_agent"] if profile.base_agent_steps > 0 else [])
    names += [n for n in ORDER[2:] if finished_output(artifacts_dir(profile) / n / "final")]
    return names
