"""Profiles: one code path from a laptop to a GPU.

A profile is a frozen dataclass made of every stage's settings (`profile.Profile`): the data's, the model's,
stage 0's, SFT's, GRPO's, stage 3's, the evaluation's and the run's, one module each here, every field with its
help and what it affects. Each profile is a recipe, a YAML file under `inquire_lib/recipes/` that names the
profile it inherits and what it changes (`recipes`). Notebooks take `PROFILE` (a name) and `OVERRIDES` (a dict of
fields, checked by `apply_overrides`); `inquire run --set grpo_lr=1e-4` reaches the same check through
`parse_overrides` (`overrides`). So `smoke` (CI), `cpu`, `small` and `gpu` run the very same code.
"""

from .loading import RECIPE_KEYS, RECIPES_DIR, RecipeError, load_recipe, load_recipes, read_recipe, recipe_settings
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
from .run import Named, RunSettings
from .scoring import USER_ANSWERS, EvalSettings
from .shared import (
    TEST_FRACTION,
    TOKENIZER_DIGITS,
    TOKENIZER_SLOTS,
    TRAIN_VALUES,
    DataSettings,
    ModelSettings,
    StageSettings,
    split_sizes,
)
from .stage0 import BaseAgentSettings
from .stage1 import SFTSettings
from .stage2 import GRPOSettings
from .stage3 import TaskGRPOSettings

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
