"""Every Profile field carries a one-line help and what it affects; the cache keys and records that
name fields are built from that metadata and keep the names they had."""

from __future__ import annotations

import dataclasses

import pytest

from inquire_lib.profiles import (
    AFFECTS,
    PROFILES,
    Profile,
    apply_overrides,
    explain,
    fields_affecting,
    unclassified_fields,
)
from inquire_lib.runs import readback
from inquire_lib.training import configs, mistakes, sft

# what the hand-kept lists held before they were derived, and the fields added since (the small profile's
# `pretrained_layers` and `eval_bf16`, and `user_answers`), under today's names (`profiles.RENAMED`): changing either set renames caches
BASE_AGENT = {
    "pretrained_layers",
    "seed",
    "benchmark_tasks",
    "model",
    "bf16",
    "min_pixels",
    "max_pixels",
    "use_a11y",
    "a11y_coords",
    "use_think",
    "use_prev_screenshot",
    "base_agent_steps",
    "base_agent_lr",
    "sft_batch",
    "train_values",
    "task_last",
    "tokenizer_spaces",
    "tokenizer_digits",
    "tokenizer_slots",
    "copy_drill_tasks",
    "base_agent_tasks",
    "base_agent_init",
    "recovery_drill_tasks",
    "recovery_drill_slips",
    "open_oversample",
    "copy_warmup_steps",
    "copy_warmup_gap",
    "copy_warmup_lr",
    "copy_warmup_easy_steps",
    "copy_warmup_easy_vocab",
    "copy_warmup_easy_gap",
    "copy_mix_share",
}
EVAL = {
    "seed",
    "model",
    "load_in_4bit",
    "bf16",
    "min_pixels",
    "max_pixels",
    "use_a11y",
    "a11y_coords",
    "use_think",
    "use_prev_screenshot",
    "task_last",
    "eval_batch",
    "eval_max_new_tokens",
    "eval_repetition_penalty",
    "max_episode_steps",
    "torch_threads",
    "pretrained_layers",
    "eval_bf16",
    "user_answers",
}


def test_every_field_has_help_and_affects():
    assert unclassified_fields() == []
    for f in dataclasses.fields(Profile):
        assert len(f.metadata["help"]) <= 200, f.name  # one line, not a paragraph


def test_a_field_without_metadata_is_reported():
    @dataclasses.dataclass(frozen=True)
    class WithNewField(Profile):
        new_knob: int = 3
        typo_knob: int = dataclasses.field(default=1, metadata={"help": "a knob", "affects": ("evall",)})

    found = [line for line in unclassified_fields(WithNewField) if line.startswith(("new_knob:", "typo_knob:"))]
    assert found[0] == "new_knob: no one-line help"
    assert found[1].startswith("new_knob: affects None is not a non-empty tuple of data, tokenizer")
    assert found[2].startswith("typo_knob: affects ('evall',)")
    assert len(found) == 3


def test_the_derived_lists_hold_what_the_hand_kept_ones_held():
    assert (
        set(sft.BASE_AGENT_FIELDS) == BASE_AGENT and len(sft.BASE_AGENT_FIELDS) == 32
    )  # train_tasks + test_tasks: benchmark_tasks
    assert set(readback.EVAL_SETTINGS) == EVAL and len(readback.EVAL_SETTINGS) == 19
    assert set(mistakes._PLAY_FIELDS) == EVAL | {"train_values", "grpo_mistake_tasks", "grpo_mistake_outcomes"}
    grpo = set(configs.GRPO_SETTINGS)
    assert (
        len(grpo) == 32
        and {
            "grpo_lr",
            "beta",
            "reward_weights",
            "val_tasks",
            "grpo_seeds",
            "select_max_needless_episodes",
            "select_ask_biases",
        }
        <= grpo
    )
    assert not grpo & {"sft_lr", "model", "torch_threads", "grpo_grad_accum", "parallel_runs"}
    assert "sft_tasks" not in sft.BASE_AGENT_FIELDS and "cpu_bf16" not in sft.BASE_AGENT_FIELDS


def test_every_evaluation_setting_keys_the_mistakes_too():
    assert set(fields_affecting("eval")) <= set(fields_affecting("mistakes"))


def test_fields_affecting_keeps_declaration_order_and_refuses_unknown_words():
    order = [f.name for f in dataclasses.fields(Profile)]
    derived = fields_affecting("base_agent", "eval")
    assert list(derived) == sorted(derived, key=order.index)
    assert set(derived) == BASE_AGENT | EVAL
    with pytest.raises(ValueError, match="unknown kind 'evals'; AFFECTS has data, tokenizer"):
        fields_affecting("evals")
    assert "run" in AFFECTS and fields_affecting("ablations") == (
        "ablation_sft_steps",
        "ablation_grpo_steps",
        "ablation_seeds",
    )


def test_cache_names_and_keys_are_the_ones_from_before(monkeypatch):
    """Pinned: a change to the fields a key reads, or to how it hashes them, renames every cache and strands
    the shipped agents. The evaluation keys changed when `pretrained_layers` and `eval_bf16` joined them, and
    again with `user_answers` (the simulated user changes what an episode returns); the base agents' folders
    when they became content keys (the shipped ones were renamed with them)."""
    monkeypatch.setattr(readback, "code_digest", lambda: "code")
    assert sft.base_agent_dir(PROFILES["cpu"]).name == "base-agent-45303721495d"
    quick = apply_overrides("quick", {"copy_drill_tasks": 10})
    assert sft.base_agent_dir(quick).name == "base-agent-abcde52856f7"
    assert mistakes.play_key(PROFILES["smoke"], "digest") == "255d9a9dd4fd1f29"
    assert mistakes.play_key(PROFILES["cpu"], "digest") == "e10efe5bdca6d4c1"
    assert readback.eval_key("step", "m", "i", PROFILES["smoke"]) == (
        "2802f9336d77071014448c79d423dcc840adebd7eeb572a01b6d7e45934a76b9"
    )
    assert readback.eval_key("step", "m", "i", PROFILES["cpu"]) == (
        "f7c817a4afb5dea9e37a9abfcd7b8c356029ec20a1293608a0f1b806b137a9a2"
    )


def test_explain_says_where_each_value_came_from():
    rows = {r["field"]: r for r in explain(apply_overrides("cpu", {"grpo_lr": 1e-4}))}
    assert len(rows) == len(dataclasses.fields(Profile))
    assert rows["grpo_lr"]["value"] == 1e-4 and rows["grpo_lr"]["source"] == "override"
    assert rows["sft_steps"]["value"] == 150 and rows["sft_steps"]["source"] == "profile"
    assert rows["seed"]["value"] == 0 and rows["seed"]["source"] == "default"
    assert rows["reward_weights"]["source"] == "profile"  # the cpu profile carries GRPO_FINDINGS' weights
    assert rows["name"]["source"] == "profile"
    assert rows["seed"]["affects"] == ("data", "tokenizer", "base_agent", "checkpoints", "eval", "mistakes")
    assert rows["sft_steps"]["help"] == "stage 1's SFT steps"
    smoke = {r["field"]: r for r in explain(PROFILES["smoke"])}
    assert smoke["reward_weights"]["source"] == "default"
