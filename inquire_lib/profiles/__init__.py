"""Profiles: one code path from a laptop to a GPU.

A profile is a frozen dataclass made of every stage's settings (`profile.Profile`): the data's, the model's,
stage 0's, SFT's, GRPO's, stage 3's, the evaluation's and the run's, one module each here, every field with its
help and what it affects. Each profile is a recipe, a YAML file under `inquire_lib/recipes/` that names the
profile it inherits and what it changes (`recipes`). Notebooks take `PROFILE` (a name) and `OVERRIDES` (a dict of
fields, checked by `apply_overrides`); `inquire run --set grpo_lr=1e-4` reaches the same check through
`parse_overrides` (`overrides`). So `smoke` (CI), `cpu`, `small` and `gpu` run the very same code.
"""

from .base_agent import BaseAgentSettings
from .data import TEST_FRACTION, TRAIN_VALUES, DataSettings, split_sizes
from .evaluation import USER_ANSWERS, EvalSettings
from .grpo import GRPOSettings
from .model import TOKENIZER_DIGITS, TOKENIZER_SLOTS, ModelSettings
from .overrides import (
    CHOICES,
    UNNAMED_OVERRIDES,
    OverrideError,
    apply_overrides,
    check_override,
    check_overrides,
    default_run_name,
    overridable_fields,
    parse_overrides,
)
from .profile import (
    ABLATION_GRIDS,
    AFFECTS,
    DEFAULT_PROFILE,
    PROFILE_ORDER,
    PROFILES,
    PURPOSES,
    SETTINGS,
    Profile,
    explain,
    fields_affecting,
    get_profile,
    settings_of,
    unclassified_fields,
)
from .recipes import RECIPE_KEYS, RECIPES_DIR, RecipeError, load_recipe, load_recipes, read_recipe, recipe_settings
from .run import Named, RunSettings
from .sft import SFTSettings
from .stage import StageSettings
from .task_grpo import TaskGRPOSettings

load_recipes()
# the fragments callers name: stage 2's findings and the two curricula of stage 0
GRPO_FINDINGS = recipe_settings("grpo_findings")
CPU_BASE_AGENT_CURRICULUM = recipe_settings("cpu_base_agent_curriculum")
SMALL_BASE_AGENT_CURRICULUM = recipe_settings("small_base_agent_curriculum")

__all__ = [
    "ABLATION_GRIDS",
    "AFFECTS",
    "CHOICES",
    "CPU_BASE_AGENT_CURRICULUM",
    "DEFAULT_PROFILE",
    "GRPO_FINDINGS",
    "PROFILES",
    "PROFILE_ORDER",
    "PURPOSES",
    "RECIPES_DIR",
    "RECIPE_KEYS",
    "SETTINGS",
    "SMALL_BASE_AGENT_CURRICULUM",
    "TEST_FRACTION",
    "TOKENIZER_DIGITS",
    "TOKENIZER_SLOTS",
    "TRAIN_VALUES",
    "UNNAMED_OVERRIDES",
    "USER_ANSWERS",
    "BaseAgentSettings",
    "DataSettings",
    "EvalSettings",
    "GRPOSettings",
    "ModelSettings",
    "Named",
    "OverrideError",
    "Profile",
    "RecipeError",
    "RunSettings",
    "SFTSettings",
    "StageSettings",
    "TaskGRPOSettings",
    "apply_overrides",
    "check_override",
    "check_overrides",
    "default_run_name",
    "explain",
    "fields_affecting",
    "get_profile",
    "load_recipe",
    "load_recipes",
    "overridable_fields",
    "parse_overrides",
    "read_recipe",
    "recipe_settings",
    "settings_of",
    "split_sizes",
    "unclassified_fields",
]
