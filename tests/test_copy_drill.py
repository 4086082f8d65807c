"""Stage 0's copy drill: only steps whose answer is copied from the instruction, from tasks after the
training split's, and nothing changes when the profile asks for none."""

from __future__ import annotations

import json

import pytest

from inquire_lib.data.benchmark import COPY_DRILL_FIRST, benchmark, copy_drill, task_at
from inquire_lib.profiles import apply_overrides, get_profile


def test_the_drill_holds_only_value_copying_steps_of_fresh_tasks():
    prof = get_profile("cpu").replace(copy_drill_tasks=30)
    drill = copy_drill(prof)
    assert len(drill) > 20
    kinds = set()
    for rec in drill:
        action = json.loads(rec["gold_action"])
        kinds.add(action["action"])
        assert not rec["inquiry_required"]
        if action["action"] == "type":
            assert f"Type: {action['text']}." in rec["gold_think"]
        else:  # a click on an element the instruction names
            assert action["action"] == "click"
            named = [e["text"] for e in rec["a11y"] if list(e["bbox"]) == list(rec["gold_bbox"])]
            assert named and named[0] and named[0] in rec["instruction"]
        index = int(rec["task_id"].rsplit("-", 1)[1])
        assert COPY_DRILL_FIRST <= index < COPY_DRILL_FIRST + 30
    assert kinds == {"type", "click"}
    assert list(copy_drill(prof)["id"]) == list(drill["id"])  # deterministic
    first = task_at(0, "train", COPY_DRILL_FIRST, prof.train_values)
    assert first.task_id == f"train-0-{COPY_DRILL_FIRST:05d}"


def test_stage0_data_is_unchanged_without_a_drill_and_grows_with_one():
    from inquire_lib.training.sft import BASE_AGENT_FIELDS, stage0_records, training_records

    smoke = get_profile("smoke")
    plain = stage0_records(smoke)
    assert list(plain["id"]) == list(training_records(benchmark(smoke)["train"], smoke, 0.0, 1)["id"])
    drilled = stage0_records(smoke.replace(copy_drill_tasks=10))
    assert len(drilled) > len(plain) and list(drilled["id"])[: len(plain)] == list(plain["id"])
    assert "copy_drill_tasks" in BASE_AGENT_FIELDS  # a drilled stage 0 is cached apart from the shipped one


def test_stage0_fresh_tasks_hold_every_action_step_of_tasks_no_other_stage_reads():
    from inquire_lib.data.benchmark import STAGE0_FIRST, stage0_tasks, task_records
    from inquire_lib.training.sft import BASE_AGENT_FIELDS, stage0_records
    from inquire_lib.world.env import PhoneEnv

    prof = get_profile("cpu").replace(base_agent_tasks=12)
    fresh = stage0_tasks(prof)
    indices = {int(t.rsplit("-", 1)[1]) for t in fresh["task_id"]}
    assert indices == set(range(STAGE0_FIRST, STAGE0_FIRST + 12))
    assert not any(fresh["inquiry_required"])
    # every step of those tasks but the inquiries, in the expert's order
    env, expected = PhoneEnv(), []
    for i in sorted(indices):
        expected += [
            r["id"] for r in task_records(task_at(0, "train", i, prof.train_values), env) if not r["inquiry_required"]
        ]
    assert list(fresh["id"]) == expected
    assert len(expected) > 12 * 3  # tasks are several steps long
    assert list(stage0_tasks(prof)["gold_action"]) == list(fresh["gold_action"])  # deterministic
    # the benchmark's training split never reaches these indices, nor the copy drill's
    assert prof.train_split_tasks < STAGE0_FIRST < STAGE0_FIRST + 12 < COPY_DRILL_FIRST
    # stage 0 reads them instead of the benchmark's training split, and caches apart
    records = stage0_records(prof)
    assert list(records["id"]) == expected
    assert "base_agent_tasks" in BASE_AGENT_FIELDS


def test_open_oversample_repeats_each_app_choice_of_stage0_and_nothing_else():
    from inquire_lib.training.sft import BASE_AGENT_FIELDS, base_agent_dir, stage0_records

    prof = get_profile("cpu").replace(base_agent_tasks=12)
    plain = stage0_records(prof)
    tripled = stage0_records(prof.replace(open_oversample=3))
    actions = [json.loads(a)["action"] for a in plain["gold_action"]]
    opens = [i for i, a in zip(plain["id"], actions) if a == "open"]
    assert len(opens) == 12  # one app a task
    assert len(tripled) == len(plain) + 2 * len(opens)
    assert list(tripled["id"])[: len(plain)] == list(plain["id"])
    assert sorted(list(tripled["id"])[len(plain) :]) == sorted(opens * 2)
    assert "open_oversample" in BASE_AGENT_FIELDS
    assert base_agent_dir(apply_overrides("cpu", {"open_oversample": 3})) != base_agent_dir(get_profile("cpu"))
    # small's own start repeats them already; an override back to one names another agent
    assert base_agent_dir(apply_overrides("small", {"open_oversample": 1})) != base_agent_dir(get_profile("small"))
    with pytest.raises(ValueError, match="open_oversample"):
        stage0_records(prof.replace(open_oversample=0))


def test_sft_fresh_tasks_hold_every_step_of_tasks_after_stage0s_and_dagger_rolls_out_the_next():
    from inquire_lib.data.benchmark import SFT_FIRST, sft_split, task_records
    from inquire_lib.training.dagger import round_tasks
    from inquire_lib.training.sft import BASE_AGENT_FIELDS
    from inquire_lib.world.env import PhoneEnv

    smoke = get_profile("smoke")
    assert list(sft_split(smoke)["id"]) == list(benchmark(smoke)["train"]["id"])  # off: the split, as before
    prof = get_profile("cpu").replace(sft_tasks=10)
    fresh = sft_split(prof)
    env, expected = PhoneEnv(), []
    for i in range(SFT_FIRST, SFT_FIRST + 10):
        expected += [r["id"] for r in task_records(task_at(0, "train", i, prof.train_values), env)]
    assert list(fresh["id"]) == expected  # every step, inquiries included
    assert any(fresh["inquiry_required"]) and not all(fresh["inquiry_required"])
    assert COPY_DRILL_FIRST + prof.copy_drill_tasks < SFT_FIRST  # no other stage reads them
    # DAgger's roll-outs are the tasks right after stage 1's, a new block each round
    assert [t.task_id for t in round_tasks(prof, 1, 3)] == [f"train-0-{SFT_FIRST + 10 + i}" for i in range(3)]
    assert [t.task_id for t in round_tasks(prof, 2, 3)] == [f"train-0-{SFT_FIRST + 13 + i}" for i in range(3)]
    assert "sft_tasks" not in BASE_AGENT_FIELDS  # stage 1's data never retrains stage 0
