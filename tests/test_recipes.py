"""The profiles' recipes (`inquire_lib/recipes/*.yaml`): short files that name only what they change, read
into the same `Profile`s, and a bad one refused in one line naming the file and the field."""

from __future__ import annotations

import pytest

from inquire_lib.profiles import (
    ABLATION_GRIDS,
    PROFILE_ORDER,
    PROFILES,
    PURPOSES,
    RECIPE_KEYS,
    RECIPES_DIR,
    Profile,
    RecipeError,
    load_recipe,
    read_recipe,
    recipe_settings,
)


def test_every_recipe_is_short():
    for path in sorted(RECIPES_DIR.glob("*.yaml")):
        assert len(path.read_text().splitlines()) <= 60, path.name


@pytest.mark.parametrize("name", PROFILE_ORDER)
def test_a_recipe_names_only_what_differs_from_its_parent(name):
    data = read_recipe(name)
    parent = PROFILES[data["inherit"]] if "inherit" in data else Profile(name=name)
    own = {k for k in data if k not in RECIPE_KEYS}
    for key in own:
        assert getattr(PROFILES[name], key) != getattr(parent, key), f"{name}.yaml: {key} is its parent's value"
    for fragment in data.get("with", ()):
        for key, value in recipe_settings(fragment).items():
            assert key in own or getattr(PROFILES[name], key) == value, (name, fragment, key)
    assert PROFILES[name].name == name and PROFILES[name].overrides == ()
    assert PURPOSES[name].lower().startswith(name) and "\n" not in PURPOSES[name]


def test_profiles_come_in_the_recipes_order_with_their_grids():
    assert tuple(PROFILES) == PROFILE_ORDER
    assert PROFILES["small"].grpo_inquiry_share == 0.5  # from cpu
    assert PROFILES["quick"].model == PROFILES["small"].model == "smollm2:135m"  # quick inherits small
    assert PROFILES["quick"].base_agent_from == "" and PROFILES["quick"].eval_tasks == 10
    assert ABLATION_GRIDS == {name: ("sft_baseline", "sft_weak_share") for name in ("small", "quick")}
    assert PROFILES["small"].reward_funcs == ("format", "action", "inquiry", "reasoned_ask")  # a list read as a tuple
    assert isinstance(PROFILES["cpu"].grpo_lr, float) and PROFILES["cpu"].grpo_lr == 1e-4


def _write(root, name, text):
    (root / f"{name}.yaml").write_text(text)


def test_a_fragment_comes_first_and_the_recipe_wins(tmp_path):
    _write(tmp_path, "frag", "sft_steps: 5\nsft_lr: 0.01\n")
    _write(tmp_path, "mine", "with: [frag]\nsft_steps: 7\n")
    profile = load_recipe("mine", tmp_path)
    assert (profile.name, profile.sft_steps, profile.sft_lr) == ("mine", 7, 0.01)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sft_stepz: 5\n", r"mine\.yaml: unknown profile field 'sft_stepz' \(did you mean sft_steps\?\)"),
        ("sft_lr: 1e-3\n", r"mine\.yaml: profile field 'sft_lr' takes a float, got '1e-3'$"),
        ("inherit: nobody\n", r"mine\.yaml: inherit: 'nobody' is not a profile read before it$"),
        ("- sft_steps\n", r"mine\.yaml: a recipe is a mapping of profile fields, got list$"),
        ("sft_steps: [5\n", r"mine\.yaml: while parsing a flow sequence"),
    ],
)
def test_a_bad_recipe_is_refused_in_one_line_naming_its_file(tmp_path, text, message):
    _write(tmp_path, "mine", text)
    with pytest.raises(RecipeError, match=message) as info:
        load_recipe("mine", tmp_path)
    assert "\n" not in str(info.value) and str(tmp_path / "mine.yaml") in str(info.value)
