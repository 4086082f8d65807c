"""Recipes: one YAML file a profile (`inquire_lib/recipes/<name>.yaml`), each naming the profile it inherits,
the fragments it takes and the fields it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .overrides import OverrideError, check_override
from .profile import ABLATION_GRIDS, PROFILE_ORDER, PROFILES, PURPOSES, Profile

RECIPES_DIR = Path(__file__).parents[1] / "recipes"
# what a recipe says beside its fields: the profile it starts from, the fragments it takes in order, what it
# can show, and its ablation grid
RECIPE_KEYS = ("inherit", "with", "purpose", "ablations")


class RecipeError(ValueError):
    """A recipe file that cannot be read: the message is one line naming the file and the key."""


def _recipe_path(name: str, root: Path | None) -> Path:
    return (root or RECIPES_DIR) / f"{name}.yaml"


def read_recipe(name: str, root: Path | None = None) -> dict:
    """The mapping of `<root>/<name>.yaml` (default root: `RECIPES_DIR`): a profile's recipe or a fragment."""
    import yaml

    path = _recipe_path(name, root)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise RecipeError(f"{path}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of profile fields, got {type(data).__name__}")
    return data


def recipe_settings(name: str, root: Path | None = None, data: dict | None = None) -> dict[str, Any]:
    """The fields a recipe file sets (`data`, when already read), after the fragments it takes (`with`), each
    checked and typed as `--set` checks it (`check_override`): the recipe's own changes, not its parent's."""
    data = read_recipe(name, root) if data is None else data
    out: dict[str, Any] = {}
    for fragment in data.get("with", ()):
        out.update(recipe_settings(fragment, root))
    for key, value in data.items():
        if key in RECIPE_KEYS:
            continue
        try:
            out[key] = check_override(str(key), value)
        except OverrideError as exc:
            raise RecipeError(f"{_recipe_path(name, root)}: {exc}") from None
    return out


def load_recipe(name: str, root: Path | None = None, data: dict | None = None) -> Profile:
    """The profile a recipe resolves to: the profile it inherits (already in `PROFILES`) or the class defaults,
    with the recipe's settings (`recipe_settings`) and its name."""
    data = read_recipe(name, root) if data is None else data
    parent = data.get("inherit")
    if parent is not None and parent not in PROFILES:
        raise RecipeError(f"{_recipe_path(name, root)}: inherit: {parent!r} is not a profile read before it")
    base = PROFILES[parent] if parent is not None else Profile(name=name)
    return base.replace(name=name, **recipe_settings(name, root, data))


def load_recipes(root: Path | None = None) -> None:
    """Read every profile of `PROFILE_ORDER` into `PROFILES`, with its purpose and ablation grid; each file once."""
    for name in PROFILE_ORDER:
        data = read_recipe(name, root)
        PROFILES[name] = load_recipe(name, root, data)
        PURPOSES[name] = " ".join(str(data.get("purpose", "")).split())
        if "ablations" in data:
            ABLATION_GRIDS[name] = tuple(data["ablations"])
