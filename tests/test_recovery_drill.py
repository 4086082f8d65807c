"""Stage 0's recovery drill: the expert with one mistake per task, and the states after it (a detour
labelled Back with its reason, then the path with the mistake in the history)."""

from __future__ import annotations

import json
import random

from inquire_lib.data.benchmark import COPY_DRILL_FIRST, RECOVERY_DRILL_FIRST, SFT_FIRST, recovery_drill, task_at
from inquire_lib.profiles import get_profile
from inquire_lib.world.env import PhoneEnv
from inquire_lib.world.expert import run_with_slip


def test_one_mistake_then_back_then_the_expert_still_succeeds():
    env, kinds = PhoneEnv(), set()
    for i in range(60):
        task = task_at(0, "train", RECOVERY_DRILL_FIRST + i, "procedural")
        recs = run_with_slip(env, task, random.Random(i))
        mistakes = [k for k, r in enumerate(recs) if not r["after_slip"]][-1]
        assert all(not r["after_slip"] for r in recs[: mistakes + 1]) and all(
            r["after_slip"] for r in recs[mistakes + 1 :]
        )
        wrong, gold = recs[mistakes]["action"], recs[mistakes]["gold"]
        kinds.add(wrong.type)
        assert wrong.type == gold.action.type and wrong.to_arguments() != gold.action.to_arguments()
        detour = recs[mistakes + 1]
        assert detour["gold"] is None and detour["action"].to_arguments() == {
            "action": "system_button",
            "button": "Back",
        }
        assert "going back" in detour["think"] and detour["screen"] != recs[mistakes]["screen"]
        after = recs[mistakes + 2]  # back where the mistake was made, which the history shows
        assert after["screen"] == recs[mistakes]["screen"] and after["history"][-1] == "press Back"
        assert after["action"].to_arguments() == gold.action.to_arguments()
        info = recs[-1]["info"]
        assert info["success"] and not info["unsafe"] and info["effects"] == list(task.goal_effects)
    assert kinds == {"open", "click"}


def test_several_mistakes_are_distinct_each_undone_by_back_and_often_named_like_the_target():
    from inquire_lib.world.expert import slips

    env, counts, near, clicks = PhoneEnv(), set(), 0, 0
    for i in range(80):
        task = task_at(0, "train", RECOVERY_DRILL_FIRST + i, "procedural")
        recs = run_with_slip(env, task, random.Random(i), max_slips=3)
        # the mistakes: the only actions after which a detour follows (the expert never opens one)
        wrong = [r for r in recs[:-1] if r["gold"] is not None and recs[r["step"] + 1]["gold"] is None]
        assert not any(r["after_slip"] for r in wrong) and recs[wrong[-1]["step"] + 2]["after_slip"]
        args = [json.dumps(r["action"].to_arguments()) for r in wrong]
        assert 1 <= len(wrong) <= 3 and len(set(args)) == len(args)  # never the same mistake twice
        counts.add(len(wrong))
        for r in wrong:  # each mistake is followed by a detour the expert leaves with Back
            nxt = recs[r["step"] + 1]
            assert nxt["gold"] is None and nxt["action"].to_arguments()["button"] == "Back"
        assert recs[-1]["info"]["success"]
    assert counts == {1, 2, 3}
    for i in range(200):  # click mistakes share a word with the target's text about half the time when they can
        task = task_at(0, "train", RECOVERY_DRILL_FIRST + i, "procedural")
        for st in task.steps:
            if st.action.type == "click" and st.target and st.inquiry is None:
                target = set(st.screen.element(st.target).text.lower().split())
                for a in slips(st, random.Random(i), 1):
                    el = st.screen.at(*a.coordinate)
                    assert el.id not in (st.target, "back")
                    clicks += 1
                    near += bool(set(el.text.lower().split()) & target)
    assert clicks > 300 and 0.15 < near / clicks < 0.6


def test_the_drill_keeps_the_action_steps_after_the_mistake_of_fresh_tasks():
    prof = get_profile("cpu").replace(recovery_drill_tasks=20)
    drill = recovery_drill(prof)
    assert not any(drill["inquiry_required"])
    indices = {int(t.rsplit("-", 1)[1]) for t in drill["task_id"]}
    assert indices == set(range(RECOVERY_DRILL_FIRST, RECOVERY_DRILL_FIRST + 20))  # every task allows a mistake
    assert COPY_DRILL_FIRST + 100_000 < RECOVERY_DRILL_FIRST < SFT_FIRST - 100_000
    backs = [r for r in drill if json.loads(r["gold_action"]) == {"action": "system_button", "button": "Back"}]
    assert len(backs) == 20 and all("going back" in r["gold_think"] for r in backs)
    assert all(r["gold_bbox"] == [-1, -1, -1, -1] for r in backs)
    assert all(
        r["history"] and r["history"][-1] == "press Back"
        for r in drill
        if r["step"] == backs[0]["step"] + 1 and r["task_id"] == backs[0]["task_id"]
    )
    assert len(drill) > 20 * 3
    assert list(recovery_drill(prof)["gold_action"]) == list(drill["gold_action"])  # deterministic


def test_stage0_data_grows_with_the_drill_and_caches_apart():
    from inquire_lib.training.sft import BASE_AGENT_FIELDS, stage0_records

    smoke = get_profile("smoke")
    plain = stage0_records(smoke)
    drilled = stage0_records(smoke.replace(recovery_drill_tasks=5))
    assert len(drilled) > len(plain) and list(drilled["id"])[: len(plain)] == list(plain["id"])
    assert "recovery_drill_tasks" in BASE_AGENT_FIELDS


def test_stage1_recovery_drill_joins_its_expert_steps_with_inquiries_kept():
    from inquire_lib.data.benchmark import SFT_RECOVERY_FIRST, sft_split

    prof = get_profile("cpu").replace(sft_tasks=6)
    plain = sft_split(prof)
    drilled = sft_split(prof.replace(sft_recovery_tasks=25))
    assert list(drilled["id"])[: len(plain)] == list(plain["id"])
    extra = drilled.select(range(len(plain), len(drilled)))
    indices = {int(t.rsplit("-", 1)[1]) for t in extra["task_id"]}
    assert indices == set(range(SFT_RECOVERY_FIRST, SFT_RECOVERY_FIRST + 25))
    assert RECOVERY_DRILL_FIRST + 100_000 <= SFT_RECOVERY_FIRST < SFT_FIRST - 100_000
    assert any(extra["inquiry_required"])  # stage 1 learns to ask after a mistake too
    assert sum(json.loads(a) == {"action": "system_button", "button": "Back"} for a in extra["gold_action"]) == 25
