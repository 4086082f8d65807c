"""Stage 3 on the evaluation's own episodes (`task_rollout` "reprompt"): start states, their prompts, the return
of each sampled first action, the temperature-0 rollouts equal to the evaluation's, and one GRPO step."""

from __future__ import annotations

import json
import random

import pytest

from inquire_lib.agent.actions import Action
from inquire_lib.agent.prompts import images_of, prompt_messages
from inquire_lib.agent.task_rewards import task_reward
from inquire_lib.data.benchmark import task_at
from inquire_lib.evaluation import episodes
from inquire_lib.profiles import apply_overrides
from inquire_lib.training import task_starts as ts
from inquire_lib.world.env import PhoneEnv

SMOKE = apply_overrides("smoke", {"task_rollout": "reprompt", "task_start_shares": {"start": 1, "path": 1, "slip": 2}})


def test_start_kinds_follow_the_shares_in_a_seeded_order():
    kinds = ts.start_kinds(SMOKE, 10, 0)
    assert sorted(kinds) == sorted(["start"] * 3 + ["path"] * 2 + ["slip"] * 5) or (
        kinds.count("slip") == 5 and kinds.count("start") + kinds.count("path") == 5
    )
    assert kinds == ts.start_kinds(SMOKE, 10, 0) and kinds != ts.start_kinds(SMOKE, 10, 1)
    assert ts.start_kinds(apply_overrides("smoke", {}), 4, 0) == ["start"] * 4  # the default: first screens


@pytest.mark.parametrize("index", range(6))
def test_a_path_start_is_the_expert_part_way_and_a_slip_start_is_off_the_path(index):
    task = task_at(0, "train", index)
    path = ts.start_prefix(task, "path", random.Random(index), SMOKE.max_episode_steps)
    env = PhoneEnv(max_steps=SMOKE.max_episode_steps)
    env.reset(task)
    for a in path:
        env.step(a)
    assert 1 <= len(path) < len(task.steps) and env.state.idx == len(path) and env.state.detour is None
    assert not env.state.done
    slip = ts.start_prefix(task, "slip", random.Random(index), SMOKE.max_episode_steps)
    env.reset(task)
    for a in slip:
        env.step(a)
    assert not env.state.done
    from inquire_lib.world.expert import slips

    can_slip = any(slips(st, random.Random(0), 1) for st in task.steps[: len(task.steps) - 1])
    if can_slip:  # the expert's steps before it, then the mistake, which lands on a detour
        assert env.state.detour is not None and env.state.idx == len(slip) - 1
    else:  # no step allows a slip: a start along the path instead
        assert env.state.detour is None and len(slip) >= 1
    assert ts.start_prefix(task, "start", random.Random(0), SMOKE.max_episode_steps) == []


def test_a_rows_prompt_is_the_prompt_the_evaluation_shows_at_that_state():
    rows = ts.start_rows(SMOKE, "train", 8)
    assert set(rows["start_kind"]) <= set(ts.START_KINDS) and max(rows["start_step"]) >= 1
    for row in rows:
        task = task_at(row["task_seed"], row["task_split"], row["task_index"])
        prefix = [Action.from_arguments(a) for a in json.loads(row["prefix"])]
        seen = []

        def first_turn(records, envs):
            seen.append(records[0])
            return ["not an answer"] * len(records)

        episodes.run_episodes(first_turn, [task], SMOKE, prefixes=[prefix], max_steps=len(prefix) + 1)
        assert prompt_messages(seen[0], SMOKE) == _without_nones(row["prompt"])  # arrow fills absent keys
        shown = images_of(seen[0], SMOKE)
        assert [im.tobytes() for im in shown] == [im.convert("RGB").tobytes() for im in row["images"]]


def _without_nones(messages):
    drop = lambda part: {k: v for k, v in part.items() if v is not None}  # noqa: E731
    return [{**m, "content": [drop(p) for p in m["content"]]} for m in messages]


def _expert_text(task, prefix):
    env = PhoneEnv(max_steps=SMOKE.max_episode_steps)
    env.reset(task)
    for a in prefix:
        env.step(a)
    return episodes.expert_policy(SMOKE)([None], [env])[0]


def test_the_return_is_the_episodes_and_lands_on_the_first_action(monkeypatch):
    """From the expert's last state, its terminate ends the episode a success at once; a wrong first action leaves
    the rest to the policy (here one that never answers), and the episode fails. Each return is `task_reward` of
    the episode played, as the evaluation's mean_reward scores it."""
    task = next(t for t in (task_at(0, "train", i) for i in range(40)) if not t.inquiry_required)
    env = PhoneEnv(max_steps=SMOKE.max_episode_steps)
    env.reset(task)
    prefix = []
    for _ in range(len(task.steps) - 1):
        prefix.append(episodes.expert_act(env)[1])
        env.step(prefix[-1])
    later = []
    monkeypatch.setattr(
        ts, "generate", lambda m, p, records, *a, **k: later.append(len(records)) or ["?"] * len(records)
    )
    reward = ts.EpisodeReturn(SMOKE).bind(model=object(), processor=None)
    monkeypatch.setattr(ts, "_generating", lambda model: __import__("contextlib").nullcontext())
    good, bad = _expert_text(task, prefix), "no tool call here"
    logged = {}
    out = reward(
        [[{"role": "assistant", "content": good}], [{"role": "assistant", "content": bad}]],
        task_seed=[0, 0],
        task_split=["train", "train"],
        task_index=[int(task.task_id.split("-")[-1])] * 2,
        prefix=[json.dumps([a.to_arguments() for a in prefix])] * 2,
        start_kind=["path", "path"],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    first, second = reward.episodes
    assert (first["success"], first["turns"], first["start_step"]) == (True, 1, len(prefix))
    assert not second["success"] and second["turns"] == SMOKE.max_episode_steps - len(prefix)
    assert out[0] == task_reward({"success": True, **_info(task, prefix, good)}, [1.0])["total"] > out[1]
    assert later and all(n == 1 for n in later)  # only the episode still running asks the policy
    assert logged["task/success"] == 0.5 and "task/total" in logged


def _info(task, prefix, text):
    def policy(records, envs):
        return [text]

    return episodes.run_episodes(policy, [task], SMOKE, prefixes=[prefix])[0]["info"]


@pytest.mark.slow
def test_rollouts_at_temperature_0_are_the_evaluations_episodes(tmp_path):
    """From the first screens, stage 3's rollouts at temperature 0 are the evaluation's episodes, answer for answer."""
    import torch

    from inquire_lib.training.models import build_tiny_model, load_checkpoint

    torch.set_num_threads(1)
    path = build_tiny_model(tmp_path / "tiny", "smoke")
    model, processor = load_checkpoint(SMOKE, path)
    tasks = [task_at(0, "validation", i) for i in range(4)]
    ours = ts.training_rollouts(model, processor, SMOKE, tasks)
    theirs = episodes.run_episodes(episodes.model_policy(model, processor, SMOKE), tasks, SMOKE)
    assert [e["success"] for e in ours] == [e["success"] for e in theirs]
    assert [[s["raw_output"] for s in e["steps"]] for e in ours] == [
        [s["raw_output"] for s in e["steps"]] for e in theirs
    ]


@pytest.mark.slow
def test_one_reprompted_stage_3_step_through_trls_grpo(tmp_path, monkeypatch):
    """One GRPO step on start states: TRL samples the first actions in the stage 1-2 template, each one's episode
    is played to its end, and the result records the episodes with their start kinds."""
    import torch

    from inquire_lib.training import task_grpo

    torch.set_num_threads(1)
    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path))
    res = task_grpo.grpo_task(SMOKE, None, max_steps=1, train=ts.start_rows(SMOKE, "train", 4))
    n = SMOKE.grpo_prompts_per_step * SMOKE.task_num_generations
    assert len(res.samples) == n and {e["start_kind"] for e in res.samples} <= set(ts.START_KINDS)
    log = res.log_history[0]
    assert "task/total" in log and "rewards/task/mean" in log
    meta = json.loads((tmp_path / "smoke" / "grpo_task" / "final" / "inquire_train.json").read_text())
    assert meta["task_rollout"] == "reprompt" and meta["episodes"] == n
