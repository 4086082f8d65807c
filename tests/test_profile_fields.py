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
from inquire_lib.training import configs, sft

# what the hand-kept lists held before they were derived, and the fields added since (the small profile's
# `pretrained_layers` and `eval_bf16`, and `user_answers`), under today's names: changing either set renames caches
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
    "tokenizer_digits",
    "tokenizer_slots",
    "copy_drill_tasks",
    "base_agent_tasks",
    "base_agent_init",
    "recovery_drill_tasks",
    "recovery_drill_slips",
    "open_oversample",
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
    assert found[1].startswith("new_knob: affects None is not a non-empty tuple of data, test, tokenizer")
    assert found[2].startswith("typo_knob: affects ('evall',)")
    assert len(found) == 3


def test_the_derived_lists_hold_what_the_hand_kept_ones_held():
    assert (
        set(sft.BASE_AGENT_FIELDS) == BASE_AGENT and len(sft.BASE_AGENT_FIELDS) == 23
    )  # train_tasks + test_tasks: benchmark_tasks
    assert set(readback.EVAL_SETTINGS) == EVAL and len(readback.EVAL_SETTINGS) == 18
    grpo = set(configs.GRPO_SETTINGS)
    assert (
        len(grpo) == 28
        and {
            "grpo_lr",
            "beta",
            "reward_weights",
            "val_tasks",
            "select_max_needless_episodes",
            "select_ask_biases",
        }
        <= grpo
    )
    # how many seeds a run trains is not what one run is (shipped results were rekeyed without it)
    assert not grpo & {"sft_lr", "model", "torch_threads", "grpo_grad_accum", "parallel_runs", "grpo_seeds"}
    assert "sft_tasks" not in sft.BASE_AGENT_FIELDS and "cpu_bf16" not in sft.BASE_AGENT_FIELDS


def test_fields_affecting_keeps_declaration_order_and_refuses_unknown_words():
    order = [f.name for f in dataclasses.fields(Profile)]
    derived = fields_affecting("base_agent", "eval")
    assert list(derived) == sorted(derived, key=order.index)
    assert set(derived) == BASE_AGENT | EVAL
    with pytest.raises(ValueError, match="unknown kind 'evals'; AFFECTS has data, test, tokenizer"):
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
    when they became content keys (the shipped ones were renamed with them), and every key when the fields of
    rejected experiments, and later the hand-bumped data version, were removed (`tools/rekey_shipped.py` renamed
    the shipped results)."""
    monkeypatch.setattr(readback, "code_digest", lambda: "code")
    assert sft.base_agent_dir(PROFILES["cpu"]).name == "base-agent-ec5b1525fc84"
    # the shipped base agent of `small`, which `quick` starts from too; an override gives another
    assert (
        sft.base_agent_dir(PROFILES["small"]).name
        == sft.base_agent_dir(PROFILES["quick"]).name
        == ("base-agent-162ff4abfc0b")
    )
    assert sft.base_agent_dir(apply_overrides("quick", {"copy_drill_tasks": 10})).name == "base-agent-8b479fdefee4"
    assert readback.eval_key("step", "m", "i", PROFILES["smoke"]) == (
        "0b2074505b988a83f24ab9f621cacee5200d4cba61d0c412440f462a246b8cd1"
    )
    assert readback.eval_key("step", "m", "i", PROFILES["cpu"]) == (
        "ede1e2ed5d657a6dac9937523677c791562900f585469fdd87bd050bebd19930"
    )


def test_explain_says_where_each_value_came_from():
    rows = {r["field"]: r for r in explain(apply_overrides("cpu", {"grpo_lr": 1e-4}))}
    assert len(rows) == len(dataclasses.fields(Profile))
    assert rows["grpo_lr"]["value"] == 1e-4 and rows["grpo_lr"]["source"] == "override"
    assert rows["sft_steps"]["value"] == 150 and rows["sft_steps"]["source"] == "profile"
    assert rows["seed"]["value"] == 0 and rows["seed"]["source"] == "default"
    assert rows["reward_weights"]["source"] == "profile"  # the cpu profile carries GRPO_FINDINGS' weights
    assert rows["name"]["source"] == "profile"
    assert rows["seed"]["affects"] == ("data", "tokenizer", "base_agent", "checkpoints", "eval")
    assert rows["sft_steps"]["help"] == "stage 1's SFT steps (TRL: max_steps)"  # a TRL field says which
    assert rows["sft_steps"]["settings"] == "SFTSettings" and rows["seed"]["settings"] == "DataSettings"
    smoke = {r["field"]: r for r in explain(PROFILES["smoke"])}
    assert smoke["reward_weights"]["source"] == "default"
