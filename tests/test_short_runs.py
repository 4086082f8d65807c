"""The short runs a notebook trains beside a shipped stage (`stages.train.short_run`) and the checkpoints a
profile scores (`stages.scored_names`): read from the profile, no model."""

from __future__ import annotations

from inquire_lib.profiles import get_profile
from inquire_lib.stages import scored_names
from inquire_lib.stages.train import SHORT_RUNS, short_name, short_profile, short_run


def test_a_short_run_keeps_the_stage_settings_on_its_own_budget():
    quick = get_profile("quick")
    sft = short_profile(quick, "sft_full")
    # small's warm-up is 30 of 600 steps; four steps keep the same share, at least one step
    assert (sft.sft_steps, sft.sft_warmup_steps, sft.sft_save_steps) == (4, 1, 4)
    assert (sft.sft_lr, sft.sft_batch, sft.model) == (quick.sft_lr, quick.sft_batch, quick.model)
    grpo = short_profile(quick, "grpo_weak")
    assert (grpo.grpo_steps, grpo.grpo_save_steps, grpo.num_generations) == (2, 2, quick.num_generations)
    assert short_profile(get_profile("cpu").replace(short_sft_steps=40), "sft_full").sft_warmup_steps == (
        max(1, round(40 * get_profile("cpu").sft_warmup_steps / get_profile("cpu").sft_steps))
    )


def test_a_profile_without_short_budgets_trains_none():
    cpu = get_profile("cpu")
    assert all(short_run(cpu, stage) is None for stage in SHORT_RUNS)
    assert [short_name(s) for s in SHORT_RUNS] == ["sft_full_short", "grpo_weak_short"]


def test_scored_names_follow_the_profile():
    names = ["untrained", "base_agent", "sft_weak", "sft_full", "sft_full_short", "grpo_task", "grpo_weak_short"]
    quick, cpu = get_profile("quick"), get_profile("cpu")
    assert scored_names(quick, names) == ["base_agent", "sft_weak", "sft_full", "grpo_task"]
    assert scored_names(quick, names, level="task") == ["grpo_task"]
    assert scored_names(cpu, names) == ["untrained", "base_agent", "sft_weak", "sft_full", "grpo_task"]
    assert scored_names(cpu, names, level="task") == scored_names(cpu, names)
    assert "base_agent" not in scored_names(cpu.replace(base_agent_steps=0), names)
