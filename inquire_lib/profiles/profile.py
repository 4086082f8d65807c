"""The resolved profile: one frozen dataclass made of every stage's settings, what each field affects, the
profiles by name, and each field explained.

A `Profile` *is* each stage's settings object (`DataSettings`, `ModelSettings`, `StageSettings` (both),
`BaseAgentSettings`, `SFTSettings`, `EvalSettings`, `GRPOSettings`, `TaskGRPOSettings`, `RunSettings`), so a function names the one
it reads in its signature and is handed the whole profile; `tests/test_settings_reads.py` checks that it reads
nothing else. Every field keeps its name, so recipes, overrides and content keys are the same as before."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .run import RunSettings
from .scoring import EvalSettings
from .stage0 import BaseAgentSettings
from .stage1 import SFTSettings
from .stage2 import GRPOSettings
from .stage3 import TaskGRPOSettings

# What a field's value reaches, named in each field's metadata ("affects"). The cache keys and records
# that name fields are built from these (`fields_affecting`), so a new field is classified once, here.
AFFECTS: dict[str, str] = {
    "data": "which tasks and steps the training and validation splits, drills and probe sets hold (`data.benchmark`'s "
    "caches)",
    "test": "which held-out tasks and inquiry probes the test evaluation scores: no stage trains or chooses on them, "
    "so they are in no stage's key (an evaluation is keyed by its items instead)",
    "tokenizer": "the tiny model's cached weights and tokenizer (`training.models.tiny_dir`)",
    "base_agent": "stage 0: an override gets a cached base agent of its own (`training.sft.BASE_AGENT_FIELDS`)",
    "checkpoints": "every stage's training: the model, numerics and seeds all stages share",
    "sft": "stage 1 (SFT: sft_weak, sft_full)",
    "dagger": "stage 1b (DAgger rounds from full SFT and their equal-compute control)",
    "grpo": "stage 2 (action-level GRPO) and its checkpoint choice; the GRPO notebook records these "
    "(`training.configs.GRPO_SETTINGS`)",
    "task_grpo": "stage 3 (task-level GRPO in PhoneEnv)",
    "eval": "the settings in every evaluation's read-back key (`runs.readback.EVAL_SETTINGS`): prompt, image "
    "size, decoding, numerics; the items evaluated are keyed by their content instead",
    "ablations": "the ablations notebook's points",
    "run": "how a run executes and what it writes beside its results: threads, processes, memory, time "
    "limits, names, figure files",
}


# what a field's value comes to on a given profile, shown beside its help by `explain`
DERIVED = {"benchmark_tasks": lambda p: f"here {p.train_split_tasks} + {p.test_split_tasks}"}


@dataclass(frozen=True)
class Profile(
    RunSettings,
    TaskGRPOSettings,
    GRPOSettings,
    EvalSettings,
    SFTSettings,
    BaseAgentSettings,
):
    """Every stage's settings at once, as a recipe resolves them (dataclass bases list their fields last
    first, so a profile lists its name, then the data's settings, then each stage's in order)."""

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# each stage's settings, in the order a profile lists its fields (its bases, last first)
SETTINGS = tuple(c for c in reversed(Profile.__mro__[1:]) if dataclasses.is_dataclass(c))


# the profiles, each a recipe file that names what it changes (`inquire_lib/recipes/<name>.yaml`, read at the end
# of this module by `load_recipes`), in the order `inquire profile` lists them
PROFILE_ORDER = ("smoke", "cpu", "gpu", "small", "quick")
PROFILES: dict[str, Profile] = {}
# what each profile can and cannot show (its recipe's `purpose`); the first line of every notebook's output says it
PURPOSES: dict[str, str] = {}
# the ablation variants (`ablations.VARIANTS`) of a profile that runs fewer than all of them (its
# recipe's `ablations`); the others are skipped with the reason
ABLATION_GRIDS: dict[str, tuple[str, ...]] = {}

# what `make run`, `inquire run` and every notebook's parameters cell use when no profile is named
DEFAULT_PROFILE = "quick"


def get_profile(name: str | Profile, **overrides) -> Profile:
    """Look a profile up by name; keyword overrides give a variant (e.g. for ablations)."""
    if isinstance(name, Profile):
        base = name
    else:
        if name not in PROFILES:
            raise KeyError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
        base = PROFILES[name]
    return base.replace(**overrides) if overrides else base


# ------------------------------------------------------------------------------------ field metadata
def fields_affecting(*kinds: str) -> tuple[str, ...]:
    """The Profile fields whose metadata's `affects` names any of `kinds` (words of AFFECTS), in the
    order the class declares them: what cache keys and records that name fields are built from."""
    unknown = sorted(set(kinds) - set(AFFECTS))
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; AFFECTS has {', '.join(AFFECTS)}")
    return tuple(f.name for f in dataclasses.fields(Profile) if set(f.metadata.get("affects", ())) & set(kinds))


def unclassified_fields(cls: type = Profile) -> list[str]:
    """'field: what is missing' for each field of `cls` without a one-line help or without an `affects`
    of AFFECTS's words; empty when every field is classified."""
    out = []
    for f in dataclasses.fields(cls):
        help_text, affects = f.metadata.get("help"), f.metadata.get("affects")
        if not isinstance(help_text, str) or not help_text.strip() or "\n" in help_text:
            out.append(f"{f.name}: no one-line help")
        if not isinstance(affects, tuple) or not affects or not set(affects) <= set(AFFECTS):
            out.append(f"{f.name}: affects {affects!r} is not a non-empty tuple of {', '.join(AFFECTS)}")
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING  # `name`: every profile sets it


def settings_of(field_name: str) -> type:
    """The settings class that declares `field_name` (of `SETTINGS`)."""
    return next(c for c in SETTINGS if field_name in vars(c).get("__annotations__", {}))


def explain(profile: Profile) -> list[dict]:
    """Every field of `profile`: name, value, where the value came from ("override" when `--set` or
    OVERRIDES gave it, "profile" when the profile differs from the class default, else "default"),
    the settings class that declares it, its one-line help (with the TRL config field it fills, where it is TRL's)
    and what it affects."""
    overridden = {k for k, _ in profile.overrides} | ({"overrides"} if profile.overrides else set())
    rows = []
    for f in dataclasses.fields(Profile):
        value = getattr(profile, f.name)
        source = (
            "override"
            if f.name in overridden
            else "default"
            if _default(f) is not dataclasses.MISSING and value == _default(f)
            else "profile"
        )
        rows.append(
            {
                "field": f.name,
                "value": value,
                "source": source,
                "settings": settings_of(f.name).__name__,
                "help": f.metadata.get("help", "")
                + (f" ({DERIVED[f.name](profile)})" if f.name in DERIVED else "")
                + (f" (TRL: {', '.join(sorted(set(f.metadata['trl'].values())))})" if "trl" in f.metadata else ""),
                "affects": tuple(f.metadata.get("affects", ())),
            }
        )
    return rows
