"""Stage 2's prompts from the start's own mistakes: the states a policy gets wrong, labelled by the expert."""

import pytest

from inquire_lib.data.benchmark import benchmark, task_at
from inquire_lib.evaluation.episodes import reference_policy, run_episodes
from inquire_lib.profiles import get_profile
from inquire_lib.training import grpo as grpo_module
from inquire_lib.training.dagger import Labeller, to_dataset
from inquire_lib.training.grpo import grpo_records, prompts_digest
from inquire_lib.training.mistakes import mistake_tasks, mistakes_of, play_key

SMOKE = get_profile("smoke")


def played_mistakes(policy_name: str):
    """Six training tasks, three of them with an inquiry due at their first step, played by a reference policy."""
    tasks = [task_at(SMOKE.seed, "train", i) for i in range(100, 400)]
    asks_first = [t for t in tasks if t.steps[0].inquiry][:3]
    assert len(asks_first) == 3
    tasks = asks_first + [t for t in tasks if not t.steps[0].inquiry][:3]
    labeller = Labeller(SMOKE, 0, id_prefix="mistake")
    played = run_episodes(labeller.wrap(reference_policy(policy_name, SMOKE)), tasks, SMOKE)
    return labeller.states, played


def test_the_expert_makes_no_mistake():
    states, played = played_mistakes("expert")
    assert states and mistakes_of(states, played) == []


def test_only_the_steps_played_wrong_are_kept_with_the_experts_label():
    states, played = played_mistakes("always_ask")
    outcome = {(ep["task_id"], st["step"]): st["outcome"] for ep in played for st in ep["steps"]}
    kept = mistakes_of(states, played)
    assert 0 < len(kept) < len(states)  # asking is right where an inquiry is due
    assert {outcome[(s["task_id"], s["step"])] for s in kept} <= {"needless_inquiry", "missed_inquiry"}
    assert all(outcome[(s["task_id"], s["step"])] == "correct" for s in states if s not in kept)
    assert all(s["id"] == f"mistake/{s['task_id']}/{s['step']}" for s in kept)
    assert mistakes_of(states, played, ("needless_inquiry",)) == [
        s for s in kept if outcome[(s["task_id"], s["step"])] == "needless_inquiry"
    ]
    assert mistakes_of(states, played, ("wrong_type",)) == []
    with pytest.raises(ValueError, match="no played step"):
        mistakes_of(states, played[1:])


def test_the_prompt_mix_takes_its_mistake_share_from_the_other_steps(monkeypatch):
    """A share `grpo_mistake_share` of the prompts are the start's mistakes: the inquiry and follow-up counts
    stay, the mistakes are mixed in, and with the share at 0 the mix is the one before, start or not."""
    states, played = played_mistakes("random")
    mistakes = to_dataset(mistakes_of(states, played))  # every kind of mistake: a random policy asks rarely
    monkeypatch.setattr(grpo_module, "mistake_states", lambda profile, start: mistakes)
    profile = SMOKE.replace(grpo_inquiry_share=0.5, grpo_followup_share=0.25, grpo_mistake_share=0.25)
    records = grpo_records(profile, n=40, start="/ckpt/sft_full")
    train_ids = set(benchmark(profile)["train"]["id"])
    off = [i for i, rid in enumerate(records["id"]) if rid not in train_ids]
    assert len(records) == 40 and len(off) == 10
    assert all(records["id"][i].startswith("mistake/") and records["id"][i] in set(mistakes["id"]) for i in off)
    assert sum(r for rid, r in zip(records["id"], records["inquiry_required"]) if rid in train_ids) == 20
    assert off != list(range(30, 40))
    assert prompts_digest(records) == prompts_digest(grpo_records(profile, n=40, start="/ckpt/sft_full"))
    plain = profile.replace(grpo_mistake_share=0.0)
    assert prompts_digest(grpo_records(plain, n=40)) == prompts_digest(grpo_records(plain, n=40, start="/x"))
    with pytest.raises(ValueError, match="needs the start checkpoint"):
        grpo_records(profile, n=40)
    monkeypatch.setattr(grpo_module, "mistake_states", lambda profile, start: mistakes.select([]))
    with pytest.raises(ValueError, match="makes no mistake on 400 grpo_mistake_tasks"):
        grpo_records(profile, n=40, start="/ckpt/sft_full")


def test_a_start_with_few_mistakes_gives_no_more_draws_than_it_has(monkeypatch):
    """A start with fewer mistakes than its share has slots gets as many mistake prompts as it has mistakes;
    the slots left over go to the other steps, and the inquiry prompts stay as without mistakes."""
    states, played = played_mistakes("random")
    mistakes = to_dataset(mistakes_of(states, played)).select([0, 1, 2])
    monkeypatch.setattr(grpo_module, "mistake_states", lambda profile, start: mistakes)
    profile = SMOKE.replace(grpo_inquiry_share=0.5, grpo_followup_share=0.25, grpo_mistake_share=0.25)
    records = grpo_records(profile, n=40, start="/ckpt/sft_weak")
    train_ids = set(benchmark(profile)["train"]["id"])
    off = [rid for rid in records["id"] if rid not in train_ids]
    assert len(records) == 40 and len(off) == 3 and set(off) <= set(mistakes["id"])
    plain = grpo_records(profile.replace(grpo_mistake_share=0.0), n=40)
    on_path = [r for rid, r in zip(records["id"], records["inquiry_required"]) if rid in train_ids]
    assert sum(on_path) == sum(plain["inquiry_required"]) == 20 and len(on_path) == 37


def test_the_played_tasks_and_the_cache_key():
    profile = SMOKE.replace(grpo_mistake_tasks=3)
    assert [t.task_id for t in mistake_tasks(profile)] == [
        task_at(SMOKE.seed, "train", 1_475_000 + i).task_id for i in range(3)
    ]
    key = play_key(profile, "d0")
    assert key == play_key(profile, "d0") and len(key) == 16
    assert (
        len(
            {
                key,
                play_key(profile, "d1"),
                play_key(profile.replace(grpo_mistake_tasks=4), "d0"),
                play_key(profile.replace(max_episode_steps=9), "d0"),
                play_key(profile.replace(grpo_mistake_outcomes=("needless_inquiry",)), "d0"),
                play_key(profile.replace(eval_batch=7), "d0"),
            }
        )
        == 6
    )
    assert play_key(profile.replace(grpo_steps=99), "d0") == key  # training settings do not change the play
