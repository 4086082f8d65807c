"""One builder per trainer config: what the profile says reaches TRL under TRL's names, the record
beside a checkpoint is the config's own dict, reward weights go by name, and every branch of the
check that reuses a finished GRPO run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inquire_lib.profiles import Profile, get_profile
from inquire_lib.training import configs
from inquire_lib.training.fit import TrainResult
from inquire_lib.runs.integrity import write_marker
from inquire_lib.training.grpo import finished_run

SMOKE = get_profile("smoke")
REWARDS = ["format", "action", "inquiry"]
REWARD_PARAMS = {"inquiry": {"missed_penalty": 0.5, "needless_penalty": 0.5}}


def test_sft_config_from_the_profile(tmp_path):
    c = configs.sft_config(SMOKE, tmp_path)
    assert (c.max_steps, c.per_device_train_batch_size, c.learning_rate, c.warmup_steps, c.save_steps) == (
        SMOKE.sft_steps,
        SMOKE.sft_batch,
        SMOKE.sft_lr,
        SMOKE.sft_warmup_steps,
        SMOKE.sft_save_steps,
    )
    assert c.completion_only_loss is True and c.lr_scheduler_type == "cosine" and c.seed == SMOKE.seed
    base = configs.sft_config(SMOKE, tmp_path, steps=7, lr=0.5, warmup=2)  # the base agent's own budget
    assert (base.max_steps, base.learning_rate, base.warmup_steps) == (7, 0.5, 2)
    assert configs.sft_config(SMOKE.replace(train_seed=5), tmp_path).seed == 5


def test_grpo_config_from_the_profile(tmp_path):
    p = get_profile("cpu")
    c = configs.grpo_config(p, tmp_path, REWARDS)
    assert (c.max_steps, c.learning_rate, c.beta, c.temperature, c.top_entropy_quantile) == (
        p.grpo_steps,
        p.grpo_lr,
        p.beta,
        p.temperature,
        p.top_entropy_quantile,
    )
    assert c.per_device_train_batch_size == p.grpo_prompts_per_step * p.num_generations
    assert (c.num_generations, c.num_iterations, c.max_completion_length) == (
        p.num_generations,
        p.grpo_iterations,
        p.max_completion_length,
    )
    assert (c.save_steps, c.save_total_limit) == (p.grpo_save_steps, None)
    assert configs.grpo_config(p.replace(grpo_save_steps=0), tmp_path, REWARDS, steps=9).save_steps == 3
    assert (c.loss_type, c.scale_rewards) == ("dapo", "group")  # TRL's defaults, as the shipped runs used
    other = configs.grpo_config(p.replace(loss_type="dr_grpo", scale_rewards="none"), tmp_path, REWARDS)
    assert (other.loss_type, other.scale_rewards) == ("dr_grpo", "none")
    task = configs.task_grpo_config(p.replace(loss_type="dr_grpo", scale_rewards="batch"), tmp_path, 100)
    assert (task.loss_type, task.scale_rewards) == ("dr_grpo", "batch")


def test_task_grpo_config_from_the_profile(tmp_path):
    c = configs.task_grpo_config(SMOKE, tmp_path, max_completion_length=777)
    assert (c.max_steps, c.num_generations, c.max_tool_calling_iterations, c.max_completion_length) == (
        SMOKE.task_grpo_steps,
        SMOKE.task_num_generations,
        SMOKE.max_episode_steps,
        777,
    )
    assert c.per_device_train_batch_size == SMOKE.grpo_prompts_per_step * SMOKE.task_num_generations
    assert c.generation_kwargs == {"max_new_tokens": SMOKE.max_completion_length}


def test_reward_weights_go_by_name(tmp_path):
    weighted = SMOKE.replace(reward_weights={"inquiry": 3.0, "format": 0.5, "action": 2.0})
    assert configs.reward_weights(weighted, ["format", "action", "inquiry"]) == [0.5, 2.0, 3.0]
    assert configs.reward_weights(weighted, ["inquiry", "format"]) == [3.0, 0.5]  # not by position
    assert configs.grpo_config(weighted, tmp_path, ["inquiry", "action"]).reward_weights == [3.0, 2.0]
    assert configs.reward_weights(weighted, ["format", "novel"]) == [0.5, 1.0]  # a reward not named weighs 1.0
    # without names, the profile's `reward_funcs` decide which rewards GRPO sums
    assert configs.grpo_config(SMOKE, tmp_path).reward_weights == [1.0, 1.0, 1.0]
    with_consistency = SMOKE.replace(
        reward_funcs=("format", "action", "inquiry", "consistency"),
        reward_weights={"format": 1.0, "action": 1.0, "inquiry": 1.0, "consistency": 0.5},
    )
    assert configs.grpo_config(with_consistency, tmp_path).reward_weights == [1.0, 1.0, 1.0, 0.5]


def test_defaults_live_in_the_profile_only():
    from inquire_lib.agent.rewards import build_reward_funcs

    default = Profile(name="default")
    [inquiry] = build_reward_funcs(["inquiry"])  # no profile: the Profile's defaults
    assert inquiry.params == {
        "missed_penalty": default.missed_penalty,
        "needless_penalty": default.needless_penalty,
        "judge_questions": default.user_answers == "content",
    }
    [inquiry] = build_reward_funcs(["inquiry"], get_profile("cpu"))
    assert inquiry.params == {"missed_penalty": 2.0, "needless_penalty": 1.5, "judge_questions": True}


def test_the_record_is_the_configs_own_dict(tmp_path, monkeypatch):
    c = configs.grpo_config(SMOKE, tmp_path, REWARDS)
    record = configs.config_record(c)
    assert record == json.loads(json.dumps({k: v for k, v in c.to_dict().items() if k != "disable_tqdm"}, default=str))
    assert record["learning_rate"] == SMOKE.grpo_lr and record["reward_weights"] == [1.0, 1.0, 1.0]
    monkeypatch.setenv("CI", "1")  # progress bars are not a setting of the run
    assert configs.config_record(configs.grpo_config(SMOKE, tmp_path, REWARDS)) == record
    assert set(configs.GRPO_SETTINGS) <= set(Profile.__dataclass_fields__)


def _finished(out: Path, **changes) -> dict:
    rec = {
        "stage": "grpo",
        "start": "/ckpt/sft_weak",
        "start_digest": "d0",
        "adapter": True,
        "rewards": REWARDS,
        "n_examples": 8,
        "prompts_digest": "p0",
        "reward_params": REWARD_PARAMS,
        "config": {"max_steps": 2, "learning_rate": 1e-4},
        "seconds": 3.5,
        "log_history": [{"step": 1, "reward": 0.25}],
        "samples": [{"completion": "x"}],
        **changes,
    }
    (out / "final").mkdir(parents=True, exist_ok=True)
    (out / "final" / "inquire_train.json").write_text(json.dumps({k: v for k, v in rec.items() if v is not None}))
    write_marker(out / "final")
    return rec


@pytest.mark.parametrize(
    "changes, reused",
    [
        ({}, True),
        ({"start": "/ckpt/sft_full"}, False),  # another start
        ({"start_digest": "d1"}, False),  # the start retrained at its path
        ({"start_digest": None}, False),  # recorded before start digests
        ({"rewards": ["format", "action"]}, False),  # other rewards
        ({"n_examples": 9}, False),  # another prompt set
        ({"prompts_digest": "p1"}, False),  # another mix of as many prompts
        ({"prompts_digest": None}, False),  # recorded before prompt digests
        ({"reward_params": {"inquiry": {"missed_penalty": 2.0, "needless_penalty": 0.5}}}, False),  # another penalty
        ({"config": {"max_steps": 2, "learning_rate": 5e-5}}, False),  # another setting
        ({"config": {"max_steps": 2}}, False),  # a record of fewer settings
        ({"log_history": None}, False),  # finished before logs were kept
    ],
)
def test_finished_run_reuse_branches(tmp_path, changes, reused):
    rec = _finished(tmp_path, **changes)
    got = finished_run(
        tmp_path, "/ckpt/sft_weak", "d0", REWARDS, {"max_steps": 2, "learning_rate": 1e-4}, 8, "p0", REWARD_PARAMS
    )
    if not reused:
        assert got is None
        return
    assert got == TrainResult(str(tmp_path / "final"), True, rec["log_history"], 8, 3.5, rec["samples"])


def test_no_finished_run_without_a_final_record(tmp_path):
    assert finished_run(tmp_path, None, "d0", REWARDS, {}, 8, "p0", REWARD_PARAMS) is None
    (tmp_path / "final").mkdir()
    assert finished_run(tmp_path, None, "d0", REWARDS, {}, 8, "p0", REWARD_PARAMS) is None


def test_no_finished_run_from_an_incomplete_final(tmp_path):
    _finished(tmp_path)
    (tmp_path / "final" / "adapter_model.safetensors").write_bytes(b"half")  # not in the marker: fine
    args = (tmp_path, "/ckpt/sft_weak", "d0", REWARDS, {"max_steps": 2, "learning_rate": 1e-4}, 8, "p0", REWARD_PARAMS)
    assert finished_run(*args) is not None
    (tmp_path / "final" / "inquire_train.json").write_text("{}")  # changed after the marker
    assert finished_run(*args) is None


@pytest.mark.parametrize("followup, counts", [(None, (20, 20, 0)), (0.25, (20, 10, 10)), (0.0, (20, 0, 20))])
def test_grpo_prompt_mix_follows_the_shares(followup, counts):
    """Share 0.5 of 40 prompts need an inquiry; the follow-up steps take `grpo_followup_share` (None: the
    same 0.5), the rest are other steps; another mix of as many prompts has another digest."""
    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.training.grpo import grpo_records, prompts_digest

    profile = get_profile("smoke").replace(grpo_inquiry_share=0.5, grpo_followup_share=followup)
    records = grpo_records(profile, n=40)
    train = benchmark(profile)["train"]
    history = dict(zip(train["id"], train["history"]))
    required = sum(records["inquiry_required"])
    after = sum(
        1
        for rid, req in zip(records["id"], records["inquiry_required"])
        if not req and history[rid] and history[rid][-1].startswith("asked:")
    )
    assert (required, after, len(records) - required - after) == counts
    assert prompts_digest(records) == prompts_digest(grpo_records(profile, n=40))  # deterministic
    if followup is not None:
        assert prompts_digest(records) != prompts_digest(grpo_records(profile.replace(grpo_followup_share=None), n=40))


def test_grpo_prompts_carry_what_a_question_must_name():
    """Each inquiry row holds its Need (the inquiry reward judges questions by it); the gold question passes
    it and a vague one does not; every other row holds ""."""
    import json

    from inquire_lib.agent.questions import Need, answerable
    from inquire_lib.training.grpo import grpo_records

    records = grpo_records(get_profile("smoke").replace(grpo_inquiry_share=0.5), n=40)
    rows = list(
        zip(records["inquiry_required"], records["inquiry_need"], records["gold_action"], records["subcategory"])
    )
    assert sum(req for req, *_ in rows) == 20
    for req, need, gold, sub in rows:
        if not req:
            assert need == ""
            continue
        parsed = Need.from_json(need)
        assert parsed is not None and answerable(sub, json.loads(gold)["text"], parsed)
        assert not answerable(sub, "Can you help?", parsed)


def test_grpo_prompt_mix_takes_its_detour_share_off_the_path():
    """A share `grpo_detour_share` of the prompts are steps after a mistake (`data.benchmark.grpo_detours`),
    taken from the other steps: the inquiry and follow-up counts stay, the order is shuffled, and the
    mix is deterministic."""
    from inquire_lib.data.benchmark import benchmark, grpo_detours
    from inquire_lib.training.grpo import grpo_records, prompts_digest

    profile = get_profile("smoke").replace(
        grpo_inquiry_share=0.5, grpo_followup_share=0.25, grpo_detour_share=0.25, grpo_detour_tasks=30
    )
    records = grpo_records(profile, n=40)
    train_ids = set(benchmark(profile)["train"]["id"])
    detours = grpo_detours(profile)
    detour_history = dict(zip(detours["id"], detours["history"]))
    off = [i for i, rid in enumerate(records["id"]) if rid not in train_ids]
    assert len(records) == 40 and len(off) == 10
    assert all(records["id"][i] in detour_history and detour_history[records["id"][i]] for i in off)
    on_required = sum(r for rid, r in zip(records["id"], records["inquiry_required"]) if rid in train_ids)
    assert on_required == 20
    assert off != list(range(30, 40))  # mixed in, not appended
    assert prompts_digest(records) == prompts_digest(grpo_records(profile, n=40))
    plain = grpo_records(profile.replace(grpo_detour_share=0.0), n=40)
    assert all(rid in train_ids for rid in plain["id"])
