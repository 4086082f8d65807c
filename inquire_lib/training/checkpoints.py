"""Named checkpoints of a profile: where each one lies and which exist."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..profiles import BaseAgentSettings, Profile
from ..runs.integrity import finished_output
from ..runs.paths import artifacts_dir
from ..runs.records import ORDER
from .sft import base_agent_path


def checkpoint_path(profile: Profile, name: str) -> str | None:
    """Path of a named checkpoint: None for the untrained model, the cached base agent, or a stage
    output (`artifacts/<profile>/<name>/selected` when validation chose one, else `.../final`)."""
    if name == "untrained":
        return None
    if name == "base_agent":
        return base_agent_path(profile)  # found or installed, never trained
    run = artifacts_dir(profile) / name
    if finished_output(run / "selected"):  # chosen on the validation split (`training.selection`)
        return str(run / "selected")
    path = run / "final"
    if not finished_output(path):  # a final/ cut short is not a trained checkpoint
        why = "is incomplete (its run was cut short)" if path.exists() else "has not been trained"
        raise FileNotFoundError(f"{path}: checkpoint {name!r} {why} for profile {profile.name!r}")
    return str(path)


def available_checkpoints(profile: BaseAgentSettings) -> list[str]:
    """The untrained model, the base agent where the profile has one, then every trained stage in `ORDER`."""
    names = ["untrained"] + (["base_agent"] if profile.base_agent_steps > 0 else [])
    names += [n for n in ORDER[2:] if finished_output(artifacts_dir(profile) / n / "final")]
    return names


def ask_bias_of(path: str | None) -> float:
    """The bias on the ask decision a checkpoint is played with: the `ask_bias` its choice on validation
    recorded in `inquire_train.json` (`training.selection.select_ask_bias`); 0 for the untrained model
    and every checkpoint without one. A value that is not a finite number raises one line naming the file."""
    meta = Path(path) / "inquire_train.json" if path is not None else None
    if meta is None or not meta.is_file():
        return 0.0
    try:
        value = json.loads(meta.read_text(encoding="utf-8")).get("ask_bias", 0.0)
    except (ValueError, AttributeError):
        raise ValueError(f"{meta}: not a JSON object") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{meta}: field ask_bias: {value!r} is not a finite number")
    return float(value)
