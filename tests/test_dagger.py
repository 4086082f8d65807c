"""DAgger: states visited by a policy, labelled by the expert, in the benchmark's schema."""

import json
from pathlib import Path

import datasets
import pytest

from inquire_lib.data.benchmark import task_at, task_records
from inquire_lib.evaluation.episodes import reference_policy, run_episodes
from inquire_lib.profiles import get_profile
from inquire_lib.training.dagger import Labeller, to_dataset
from inquire_lib.world.env import PhoneEnv
from inquire_lib.world.expert import expert_act

SMOKE = get_profile("smoke")


def rollout_states(policy, profile, indices, round_index):
    labeller = Labeller(profile, round_index)
    episodes = run_episodes(labeller.wrap(policy), [task_at(profile.seed, "train", i) for i in indices], profile)
    return labeller.states, episodes


def test_the_experts_own_rollouts_are_the_benchmarks_records():
    states, episodes = rollout_states(reference_policy("expert", SMOKE), SMOKE, [0, 1, 2], round_index=1)
    assert all(e["success"] for e in episodes)
    assert not any(s["_off_path"] for s in states)
    states = sorted(states, key=lambda s: (s["task_id"], s["step"]))  # episodes advance turn by turn together
    gold = [r for i in (0, 1, 2) for r in task_records(task_at(SMOKE.seed, "train", i))]
    assert [(s["task_id"], s["gold_action"], s["gold_think"], s["inquiry_required"]) for s in states] == [
        (r["task_id"], r["gold_action"], r["gold_think"], r["inquiry_required"]) for r in gold
    ]
    assert [s["history"] for s in states] == [r["history"] for r in gold]


def test_a_random_policys_detours_are_labelled_back_with_a_reason():
    states, episodes = rollout_states(reference_policy("random", SMOKE), SMOKE, list(range(8)), round_index=2)
    off = [s for s in states if s["_off_path"]]
    assert len(off) > len(states) // 2  # a random policy leaves the path at once
    backs = [s for s in states if json.loads(s["gold_action"]) == {"action": "system_button", "button": "Back"}]
    assert backs, "a random policy always strays onto some detour"
    for s in backs:
        assert s["gold_think"].endswith("Target: Back <back>. Inquiry check: not needed, because going back is safe.")
        assert "not the app the task needs" in s["gold_think"] or "has nothing for the task" in s["gold_think"]
        assert s["gold_bbox"] == [-1, -1, -1, -1] and not s["inquiry_required"]
    assert all(s["id"].startswith("dagger-r2/train-") for s in states)
    ds = to_dataset(states)
    assert len(ds) == len(states) and "_off_path" not in ds.column_names
    assert ds[0]["screenshot"].size == (360, 720)


def test_a_wrong_app_is_named_in_the_experts_reason():
    task = next(t for t in (task_at(SMOKE.seed, "train", i) for i in range(40)) if t.steps[0].action.type == "open")
    env = PhoneEnv()
    env.reset(task)
    wrong = "Clock" if task.steps[0].action.text != "Clock" else "Maps"
    from inquire_lib.agent.actions import Action

    env.step(Action("open", text=wrong))
    think, action = expert_act(env)
    assert action == Action("system_button", button="Back")
    assert think.startswith(f"This is {wrong}, not the app the task needs; going back.")
    env.step(action)
    assert expert_act(env)[1] == task.steps[0].action  # back home, the right app next


@pytest.mark.slow
def test_dagger_rounds_continue_the_policy_on_the_aggregate(private_folders):
    """One smoke round from a 2-step SFT adapter: the round's adapter sits on the same base, the states
    it labelled are counted, and its training set is the expert data plus those states."""
    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.pipeline import dagger
    from inquire_lib.runs.integrity import verify
    from inquire_lib.training import sft
    from inquire_lib.training.models import base_of

    artifacts = Path(private_folders["artifacts"])
    start = sft.sft(SMOKE, name="sft_full", max_steps=2).path
    path, rounds = dagger(SMOKE, start, rounds=1, steps=2, tasks_per_round=3)
    assert path.endswith("sft_dagger/final") and len(rounds) == 1  # the last round, published as the stage's checkpoint
    assert rounds[0].path.endswith("sft_dagger/round1/final")
    assert (
        verify(path) is None
        and (Path(path) / "adapter_model.safetensors").read_bytes()
        == (Path(rounds[0].path) / "adapter_model.safetensors").read_bytes()
    )
    r = rounds[0]
    assert r.states >= 3 and 0 <= r.off_path <= r.states and 0.0 <= r.rollout_success <= 1.0
    meta = json.loads((artifacts / "smoke" / "sft_dagger" / "round1" / "final" / "inquire_train.json").read_text())
    assert meta["start"] == start and meta["base"] == base_of(start, SMOKE) and meta["steps"] == 2
    expert = sft.training_records(benchmark(SMOKE)["train"], SMOKE, 1.0, SMOKE.sft_inquiry_oversample)
    assert meta["n_examples"] == len(expert) + r.states


def test_the_aggregate_gives_the_labelled_states_their_share():
    from inquire_lib.training.dagger import aggregate

    e_ids, s_ids = [f"e{i}" for i in range(90)], [f"s{i}" for i in range(7)]
    expert = datasets.Dataset.from_dict({"id": e_ids})
    states = datasets.Dataset.from_dict({"id": s_ids})
    plain = aggregate(expert, states)
    assert list(plain["id"]) == e_ids + s_ids  # no mix: the union, as before
    mixed = aggregate(expert, states, 0.25)
    ids = list(mixed["id"])
    assert ids[:90] == e_ids
    drawn = ids[90:]
    assert len(drawn) == 30 and drawn[:7] == s_ids and drawn[7:14] == s_ids  # whole passes first
    assert sum(i.startswith("s") for i in ids) / len(ids) == pytest.approx(0.25)
    m_ids = [f"s{i}" for i in range(50)]
    assert (
        list(aggregate(expert, datasets.Dataset.from_dict({"id": m_ids}), 0.25)["id"]) == e_ids + m_ids
    )  # never fewer than all of them


def test_the_labeller_labels_every_turn_of_a_loop():
    """A policy that opens a wrong app and goes back, again and again, visits two states: home (the
    expert says: open the right app) and the wrong app (Back). Every turn is labelled, in order."""
    from inquire_lib.agent.actions import Action, format_completion

    tasks = [t for t in (task_at(SMOKE.seed, "train", i) for i in range(40)) if t.steps[0].action.type == "open"][:3]

    def looping(records, envs):
        out = []
        for env in envs:
            wrong = "Clock" if env.task.steps[0].action.text != "Clock" else "Maps"
            home = env.screen.app == "Home" or env.state.detour is None
            action = Action("open", text=wrong) if home else Action("system_button", button="Back")
            out.append(format_completion("Looping. Inquiry check: not needed, because looping.", action))
        return out

    labeller = Labeller(SMOKE, 1)
    run_episodes(labeller.wrap(looping), tasks, SMOKE, max_steps=10)
    assert len(labeller.states) == 30
    assert sorted({json.loads(s["gold_action"])["action"] for s in labeller.states}) == ["open", "system_button"]
    per_task = {t.task_id: [s["step"] for s in labeller.states if s["task_id"] == t.task_id] for t in tasks}
    assert all(steps == list(range(10)) for steps in per_task.values())
