"""Tests for inquire_lib.evaluation.episodes: task-level episodes in PhoneEnv, metrics and files."""

import io
import json
import re

import pytest
from PIL import Image

from inquire_lib.evaluation import episodes as online
from inquire_lib.evaluation.metrics import TASK_MEAN_KEYS, TASK_RATE_KEYS, asking_errors, task_metrics
from inquire_lib.agent.actions import Action, format_completion
from inquire_lib.data.benchmark import generate_tasks, held_out_tasks, task_at, task_records
from inquire_lib.evaluation.steps import evaluate_steps, reference_outputs
from inquire_lib.profiles import get_profile
from inquire_lib.agent.prompts import frame_for
from inquire_lib.world.apps import centre

N_TASKS = 44  # any 44 consecutive tasks cover all 22 sub-categories and 22 safe controls
PROFILE = get_profile("smoke", max_episode_steps=15, eval_tasks=N_TASKS)


@pytest.fixture(scope="module")
def tasks():
    return held_out_tasks(PROFILE)


@pytest.fixture(scope="module")
def expert_episodes(tasks):
    return online.run_episodes(online.reference_policy("expert", PROFILE), tasks, PROFILE)


def overall(episodes) -> dict:
    return task_metrics(episodes)["overall"]


def test_task_at_matches_generate_tasks():
    for split in ("train", "test"):
        gen = generate_tasks(3, split, 12)
        for i in (0, 1, 7, 11):
            assert task_at(3, split, i) == gen[i]
            assert task_at(3, split, i).task_id == gen[i].task_id


def test_held_out_tasks_cover_the_taxonomy(tasks):
    assert len(tasks) == N_TASKS and all(t.task_id.startswith("test-0-") for t in tasks)
    assert len({t.subcategory for t in tasks}) == 23  # 22 sub-categories + safe
    assert sum(t.inquiry_required for t in tasks) == 22


def test_expert_through_the_text_path_is_perfect(expert_episodes):
    m = overall(expert_episodes)
    assert m["n"] == N_TASKS
    assert m["success_rate"]["value"] == 1.0 and m["success_rate"]["k"] == N_TASKS
    assert m["isr"]["value"] == 1.0 and m["isr"]["n"] == 22
    assert m["unsafe_rate"]["value"] == 0.0
    assert m["needless_rate"]["value"] == 0.0 and m["mean_needless"] == 0.0
    assert m["format"]["value"] == 1.0
    assert m["detour_rate"]["value"] == 0.0 and m["recovery_rate"]["value"] is None
    assert m["detour_success_rate"]["n"] == 0 and m["first_open_accuracy"]["value"] == 1.0
    assert m["outcomes"]["correct"] == sum(e["n_steps"] for e in expert_episodes)
    assert m["mean_reward"] == pytest.approx(1.0 + 0.5 * 22 / N_TASKS + 1.0)  # success, inquiry bonus, format
    assert m["mean_steps"] == pytest.approx(sum(e["gold_steps"] for e in expert_episodes) / N_TASKS)
    for cat, r in task_metrics(expert_episodes)["by_category"].items():
        assert r["success_rate"]["value"] == 1.0, cat


def test_expert_outputs_are_model_frame_and_parsed_back_to_screen(expert_episodes):
    """The raw output holds model-frame coordinates (112x224); the parsed action is screen-frame."""
    frame = frame_for(PROFILE)
    clicks = [st for e in expert_episodes for st in e["steps"] if st["parsed_action"]["action"] == "click"]
    assert len(clicks) > 50
    for st in clicks:
        raw_xy = json.loads(re.search(r"<tool_call>(.*)</tool_call>", st["raw_output"]).group(1))["arguments"][
            "coordinate"
        ]
        assert 0 <= raw_xy[0] < frame.model_w and 0 <= raw_xy[1] < frame.model_h
        assert tuple(st["parsed_action"]["coordinate"]) == frame.to_screen(raw_xy)
    assert any(tuple(st["parsed_action"]["coordinate"]) != tuple(st["gold_action"]["coordinate"]) for st in clicks), (
        "rounding through the model frame should move at least one click by a pixel"
    )


def test_always_ask_never_succeeds_and_asks_needlessly(tasks):
    eps = online.run_episodes(online.reference_policy("always_ask", PROFILE), tasks, PROFILE)
    m = task_metrics(eps)
    assert m["overall"]["success_rate"]["value"] == 0.0
    safe = m["by_category"]["safe"]
    assert safe["needless_rate"]["value"] == 1.0 and safe["mean_needless"] == 15.0
    assert safe["mean_reward"] == 0.0  # needless penalty at its cap (-1) + format (+1)
    assert m["overall"]["mean_steps"] == 15.0  # never terminates
    assert m["overall"]["unsafe_rate"]["value"] == 0.0


def test_always_act_succeeds_only_on_safe_tasks(tasks):
    eps = online.run_episodes(online.reference_policy("always_act", PROFILE), tasks, PROFILE)
    m = task_metrics(eps)
    assert m["by_category"]["safe"]["success_rate"]["value"] == 1.0
    assert m["overall"]["isr"]["value"] == 0.0
    assert m["overall"]["success_rate"]["value"] == 0.5
    assert m["overall"]["needless_rate"]["value"] == 0.0
    # acting where asking was required is unsafe wherever the task has a committing element
    with_candidates = [e for e, t in zip(eps, tasks) if any(s.candidates for s in t.steps if s.inquiry)]
    assert with_candidates and all(e["info"]["unsafe"] for e in with_candidates)


def test_random_policy_rarely_succeeds_and_is_reproducible(tasks):
    eps = online.run_episodes(online.reference_policy("random", PROFILE, seed=0), tasks, PROFILE)
    assert overall(eps)["success_rate"]["value"] <= 0.05
    again = online.run_episodes(online.reference_policy("random", PROFILE, seed=0), tasks[::-1], PROFILE)[::-1]
    assert [e["steps"][0]["raw_output"] for e in eps] == [e["steps"][0]["raw_output"] for e in again]


def test_unreadable_output_is_an_invalid_step(tasks):
    eps = online.run_episodes(
        lambda recs, envs: ["I think I will click somewhere."] * len(recs), tasks[:3], PROFILE, max_steps=4
    )
    for e in eps:
        assert e["n_steps"] == 4 and e["info"]["invalid"] == 4 and not e["success"]
        assert {st["outcome"] for st in e["steps"]} == {"unparseable"}
        assert all(st["parse_error"] == "no_tool_call" and st["parsed_action"] is None for st in e["steps"])
        assert e["steps"][-1]["history"] == ["invalid output"] * 3


def _detour_then_back(profile):
    """The expert, except at its second turn of each episode: a click on a wrong list row."""
    expert, frame = online.expert_policy(profile), frame_for(profile)

    def act(recs, envs):
        outs = expert(recs, envs)
        for k, (rec, env) in enumerate(zip(recs, envs)):
            if len(rec["history"]) == 1:
                step = env.current_step
                wrong = next(
                    e
                    for e in step.screen.elements
                    if e.clickable and e.id != step.target and e.id.startswith("r") and step.inquiry is None
                )
                outs[k] = format_completion(
                    "Trying this row. Inquiry check: not needed, because it is safe.",
                    frame.action_to_model(Action("click", coordinate=centre(wrong.bbox))),
                )
        return outs

    return act


def test_detour_and_recovery_are_found(tasks):
    # tasks whose second screen is a plain list with a non-target row
    picks = [
        t
        for t in tasks
        if not t.inquiry_required
        and t.steps[1].inquiry is None
        and any(e.id.startswith("r") and e.clickable and e.id != t.steps[1].target for e in t.steps[1].screen.elements)
    ][:3]
    assert len(picks) == 3
    eps = online.run_episodes(_detour_then_back(PROFILE), picks, PROFILE)
    for e in eps:
        assert e["detour"] and e["recovered"] and e["success"], e["task_id"]
        outcomes = [st["outcome"] for st in e["steps"]]
        assert outcomes[:3] == ["correct", "wrong_argument", "correct"]  # stray, then Back is right
        assert [st["on_path"] for st in e["steps"][:3]] == [True, True, False]
        assert e["steps"][2]["gold_action"] == {"action": "system_button", "button": "Back"}
    m = overall(eps)
    assert m["detour_rate"]["value"] == 1.0 and m["recovery_rate"]["value"] == 1.0
    assert m["detour_success_rate"]["value"] == 1.0 and m["detour_success_rate"]["n"] == 3
    assert [e["task_id"] for e in online.self_corrections(eps)] == sorted(e["task_id"] for e in eps)


def test_evaluate_tasks_writes_trajectories_and_metrics(tmp_path, tasks):
    some = tasks[:4]
    m = online.evaluate_tasks("expert", online.reference_policy("expert", PROFILE), some, PROFILE, out_root=tmp_path)
    run = tmp_path / "smoke" / "default"
    saved = json.loads((run / "metrics" / "task_expert.json").read_text())
    assert saved["checkpoint"] == "expert" and saved["kind"] == "task" and saved["n_tasks"] == 4
    assert saved["overall"]["success_rate"]["value"] == 1.0 == m["overall"]["success_rate"]["value"]
    assert set(saved) >= {"overall", "by_category", "by_subcategory", "max_steps", "seconds", "profile"}
    assert set(TASK_RATE_KEYS) | set(TASK_MEAN_KEYS) <= set(saved["overall"])
    lines = (run / "eval" / "expert" / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 4
    ep = json.loads(lines[0])
    assert {
        "checkpoint",
        "task_id",
        "category",
        "subcategory",
        "instruction",
        "inquiry_required",
        "success",
        "info",
        "steps",
        "frame",
        "detour",
        "recovered",
    } <= set(ep)
    assert ep["info"]["success"] is True and ep["n_steps"] == len(ep["steps"]) == some[0].steps.__len__()
    for st in ep["steps"]:
        assert {
            "step",
            "screenshot",
            "raw_output",
            "think",
            "parsed_action",
            "parse_error",
            "user_reply",
            "history",
            "outcome",
            "gold_action",
        } <= set(st)
        assert st["screenshot"] == f"screens/traj_expert_{ep['task_id']}_{st['step']}.png"
        with Image.open(run / "eval" / st["screenshot"]) as im:
            assert im.size == (360, 720)
    asked = [st for e in map(json.loads, lines) for st in e["steps"] if st["parsed_action"]["action"] == "call_user"]
    assert asked and all(st["user_reply"] for st in asked)
    # the gold element's box of each click (the inspector draws it), none where the expert's action has no target
    clicks = [st for e in map(json.loads, lines) for st in e["steps"] if st["gold_action"]["action"] == "click"]
    assert clicks and all(len(st["gold_bbox"]) == 4 for st in clicks)
    assert all(
        st["gold_bbox"] is None
        for e in map(json.loads, lines)
        for st in e["steps"]
        if st["gold_action"]["action"] == "open"
    )
    assert online.load_trajectories(PROFILE, "expert", out_root=tmp_path)[0]["task_id"] == ep["task_id"]
    assert [x["checkpoint"] for x in online.load_task_metrics(PROFILE, out_root=tmp_path)] == ["expert"]
    # a strip of the episode for the notebook
    from inquire_lib.viz.overlays import episode_strip

    fig = episode_strip(ep, run / "eval")
    assert len(fig.layout.images) == ep["n_steps"]


def test_inspector_reads_the_trajectories(tmp_path, tasks):
    from inquire_lib.viz.inspector import load_run

    some = tasks[:2]
    records = []
    for t in some:
        for r in task_records(t):
            r["screenshot"] = Image.open(io.BytesIO(r["screenshot"]["bytes"]))
            records.append(r)
    evaluate_steps("expert", records, PROFILE, reference_outputs("expert", records, PROFILE), out_root=tmp_path)
    online.evaluate_tasks("expert", online.reference_policy("expert", PROFILE), some, PROFILE, out_root=tmp_path)
    run = load_run(tmp_path / "smoke" / "default")
    assert [e["task_id"] for e in run.trajectories["expert"]] == [t.task_id for t in some]


def test_bad_trajectory_line_names_file_and_line(tmp_path):
    path = tmp_path / "smoke" / "default" / "eval" / "x" / "trajectories.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"task_id": "a"}\n{oops\n')
    with pytest.raises(ValueError, match=r"trajectories.jsonl:2: invalid JSON"):
        online.load_trajectories(PROFILE, "x", out_root=tmp_path)


def test_unknown_reference_policy():
    with pytest.raises(ValueError, match="unknown reference policy"):
        online.reference_policy("oracle", PROFILE)


def test_model_policy_plays_batched_episodes(tasks):
    """The untrained tiny model through `evaluate.generate`: every turn is recorded, whatever it says."""
    import torch

    from inquire_lib.training.models import load_checkpoint

    torch.set_num_threads(1)
    prof = get_profile("smoke", max_episode_steps=2, eval_max_new_tokens=8)
    model, processor = load_checkpoint(prof, None)
    eps = online.run_episodes(online.model_policy(model, processor, prof), tasks[:3], prof)
    assert [e["n_steps"] for e in eps] == [2, 2, 2]  # greedy gibberish never terminates
    for e in eps:
        assert all(isinstance(st["raw_output"], str) for st in e["steps"])
        assert e["info"]["steps"] == e["n_steps"]


def test_table_and_bars(expert_episodes):
    ms = [{"checkpoint": "expert", **task_metrics(expert_episodes)}]
    from inquire_lib.viz.plots import task_table

    table = task_table(ms)
    assert table.loc["expert", "success_rate"] == 1.0 and table.loc["expert", "success_rate_ci"].startswith("0.9")
    from inquire_lib.viz.plots import task_bars

    fig = task_bars(ms)
    assert len(fig.data) == 1 and list(fig.data[0].x)[:2] == ["task SR", "task ISR"]


def test_asking_errors_name_over_execution_and_over_soliciting(tasks, expert_episodes):
    act = asking_errors(online.run_episodes(online.reference_policy("always_act", PROFILE), tasks, PROFILE))
    ask = asking_errors(online.run_episodes(online.reference_policy("always_ask", PROFILE), tasks, PROFILE))
    expert = asking_errors(expert_episodes)
    required = sum(t.inquiry_required for t in tasks)
    assert 0 < required < len(tasks)
    assert act["overall"]["over_execution"] == {
        "value": 1.0,
        "lo": act["overall"]["over_execution"]["lo"],
        "hi": 1.0,
        "k": required,
        "n": required,
    }
    assert act["overall"]["over_soliciting"]["k"] == 0 and act["by_category"]["safe"]["over_execution"]["n"] == 0
    # always-ask's "Should I go ahead with this step?" names nothing a task misses: where a task opens on its
    # inquiry (a vague need) the user never answers it, so no step where asking is needless is ever reached
    opens_on_inquiry = sum(t.steps[0].inquiry is not None for t in tasks)
    assert opens_on_inquiry > 0
    assert ask["overall"]["over_execution"]["k"] == 0
    assert ask["overall"]["over_soliciting"]["k"] == len(tasks) - opens_on_inquiry
    older = PROFILE.replace(user_answers="any")
    old_ask = asking_errors(online.run_episodes(online.reference_policy("always_ask", older), tasks, older))
    assert old_ask["overall"]["over_soliciting"]["k"] == len(tasks)
    assert (expert["overall"]["over_execution"]["k"], expert["overall"]["over_soliciting"]["k"]) == (0, 0)
    assert set(act["by_category"]) == {t.category for t in tasks} and act["overall"]["n"] == len(tasks)
