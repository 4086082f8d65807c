"""Settings that are TRL's own name the TRL config field they fill (`"trl"` in their metadata), and each config
builder hands them on unchanged (`training.configs.trl_kwargs`)."""

from __future__ import annotations

import dataclasses

import pytest

from inquire_lib.profiles import Profile, apply_overrides
from inquire_lib.training import configs

BUILDERS = ("sft_config", "grpo_config", "task_grpo_config")


def _mapped(builder: str) -> dict[str, str]:
    return {
        f.name: f.metadata["trl"][builder] for f in dataclasses.fields(Profile) if builder in f.metadata.get("trl", {})
    }


def test_every_mapping_names_a_builder_and_a_field_of_trls_config():
    from trl import GRPOConfig, SFTConfig

    trl_fields = {c: {f.name for f in dataclasses.fields(c)} for c in (SFTConfig, GRPOConfig)}
    named = [f for f in dataclasses.fields(Profile) if "trl" in f.metadata]
    assert len(named) >= 15
    for f in named:
        assert set(f.metadata["trl"]) <= set(BUILDERS), f.name
        for builder, trl_field in f.metadata["trl"].items():
            assert trl_field in trl_fields[SFTConfig if builder == "sft_config" else GRPOConfig], (f.name, trl_field)


@pytest.mark.parametrize("builder", BUILDERS)
def test_each_builder_hands_every_mapped_setting_on_unchanged(builder, tmp_path):
    changed = {
        "sft_steps": 9,
        "sft_lr": 3.3e-4,
        "sft_warmup_steps": 2,
        "sft_save_steps": 3,
        "grpo_steps": 11,
        "grpo_lr": 7.7e-6,
        "temperature": 0.77,
        "beta": 0.123,
        "top_entropy_quantile": 0.3,
        "grpo_iterations": 2,
        "loss_type": "dr_grpo",
        "scale_rewards": "batch",
        "max_completion_length": 77,
        "task_grpo_steps": 5,
        "max_episode_steps": 6,
    }
    profile = apply_overrides("smoke", changed)
    config = {
        "sft_config": lambda: configs.sft_config(profile, tmp_path),
        "grpo_config": lambda: configs.grpo_config(profile, tmp_path),
        "task_grpo_config": lambda: configs.task_grpo_config(profile, tmp_path, 999),
    }[builder]()
    mapped = _mapped(builder)
    assert mapped and {k: getattr(config, v) for k, v in mapped.items()} == {k: getattr(profile, k) for k in mapped}
    assert set(mapped) & set(changed)  # the check compares values the overrides set, not only the defaults
