"""Evaluations read back: the key changes with anything that changes the result and nothing else;
a second evaluation of the same checkpoint on the same items loads no model."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from inquire_lib import pipeline
from inquire_lib.stages import evaluate as stage_evaluation
from inquire_lib.profiles import get_profile
from inquire_lib.runs import readback, timing
from inquire_lib.runs.paths import run_dir


def _records():
    img = Image.new("RGB", (8, 16), (10, 20, 30))
    return [
        {"id": "t0/0", "instruction": "Open Mail.", "screenshot": img, "prev_screenshot": None},
        {"id": "t0/1", "instruction": "Open Mail.", "screenshot": img.copy(), "prev_screenshot": None},
    ]


def test_records_digest_follows_fields_and_pixels():
    base = readback.records_digest(_records())
    assert base == readback.records_digest(_records())
    changed = _records()
    changed[1]["screenshot"].putpixel((3, 3), (10, 20, 31))
    assert readback.records_digest(changed) != base
    changed = _records()
    changed[0]["instruction"] = "Open Maps."
    assert readback.records_digest(changed) != base
    assert readback.records_digest(_records()[:1]) != base


def test_key_follows_evaluation_settings_only():
    smoke = get_profile("smoke")
    key = readback.eval_key("step", "m", "r", smoke)
    assert key == readback.eval_key("step", "m", "r", smoke.replace(grpo_lr=1e-5, sft_steps=3))
    for change in ({"eval_max_new_tokens": 7}, {"use_think": False}, {"torch_threads": 2}, {"seed": 1}):
        assert readback.eval_key("step", "m", "r", smoke.replace(**change)) != key, change
    assert readback.eval_key("task", "m", "r", smoke) != key
    assert readback.eval_key("step", "m2", "r", smoke) != key
    assert readback.eval_key("step", "m", "r2", smoke) != key


def test_read_back_needs_the_key_and_the_predictions(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "step_a.json").write_text(json.dumps({"checkpoint": "a", "eval_key": "k1"}))
    assert readback.read_back(tmp_path, "step", "a", "k1") is None  # no predictions beside it
    (tmp_path / "eval" / "a").mkdir(parents=True)
    (tmp_path / "eval" / "a" / "step_predictions.jsonl").write_text("{}\n")
    assert readback.read_back(tmp_path, "step", "a", "k1") == {"checkpoint": "a", "eval_key": "k1"}
    assert readback.read_back(tmp_path, "step", "a", "k2") is None
    assert readback.read_back(tmp_path, "step", "b", "k1") is None
    assert readback.read_back(tmp_path, "task", "a", "k1") is None  # no trajectories.jsonl
    (tmp_path / "metrics" / "step_a.json").write_text("{not json")
    assert readback.read_back(tmp_path, "step", "a", "k1") is None


@pytest.mark.slow  # builds the tiny smoke model and generates
def test_second_evaluation_is_read_back_and_a_new_setting_reruns(monkeypatch):
    profile = get_profile("smoke").replace(eval_tasks=2, eval_max_new_tokens=8)
    records = pipeline.test_records(profile)
    first = pipeline.evaluate_checkpoint(profile, "untrained", records)
    assert first["eval_key"] and (run_dir(profile) / "eval" / "untrained" / "step_predictions.jsonl").is_file()

    def no_model(*_a, **_k):
        raise AssertionError("a model was loaded for an evaluation that should be read back")

    monkeypatch.setattr(stage_evaluation, "loaded", no_model)
    again = pipeline.evaluate_checkpoint(profile, "untrained", records)
    assert again.pop("read_back") is True and again == json.loads(json.dumps(first)) and "read_back" not in first
    # the run's timings name both calls, the second as read back
    lines = [t for t in timing.read(run_dir(profile)) if t["stage"] == "evaluate steps"]
    assert [(t["name"], t.get("reused", False)) for t in lines] == [("untrained", False), ("untrained", True)]
    assert lines[0]["seconds"] > lines[1]["seconds"] >= 0
    with pytest.raises(AssertionError, match="read back"):  # another decoding budget: evaluated again
        pipeline.evaluate_checkpoint(profile.replace(eval_max_new_tokens=9), "untrained", records)
    with pytest.raises(AssertionError, match="read back"):  # other items: evaluated again
        pipeline.evaluate_checkpoint(profile, "untrained", records[:-1])


def test_same_key_finds_another_name_with_its_outputs(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "step_a.json").write_text(json.dumps({"checkpoint": "a", "eval_key": "k1"}))
    (tmp_path / "metrics" / "step_b.json").write_text(json.dumps({"checkpoint": "b", "eval_key": "k2"}))
    (tmp_path / "metrics" / "task_c.json").write_text(json.dumps({"checkpoint": "c", "eval_key": "k1"}))
    assert readback.same_key(tmp_path, "step", "k1") == (None, None)  # no predictions beside a's metrics
    for name, out in (("a", "step_predictions.jsonl"), ("b", "step_predictions.jsonl"), ("c", "trajectories.jsonl")):
        (tmp_path / "eval" / name).mkdir(parents=True)
        (tmp_path / "eval" / name / out).write_text("{}\n")
    assert readback.same_key(tmp_path, "step", "k1") == ("a", {"checkpoint": "a", "eval_key": "k1"})
    assert readback.same_key(tmp_path, "step", "k2")[0] == "b"
    assert readback.same_key(tmp_path, "task", "k1")[0] == "c"
    assert readback.same_key(tmp_path, "step", "k3") == (None, None)


@pytest.mark.slow  # builds the tiny smoke model and generates once
def test_another_name_with_the_same_key_is_scored_from_stored_answers(monkeypatch):
    """A second name for the same model, items and settings (an ablation point that is a recipe stage) loads no
    model: the first name's answers are scored under the second, whose files name it and carry its extra."""
    from inquire_lib.training.models import model_path

    profile = get_profile("smoke").replace(eval_tasks=2, eval_max_new_tokens=8)
    records = pipeline.test_records(profile)
    first = pipeline.evaluate_checkpoint(profile, "untrained", records)
    monkeypatch.setattr(stage_evaluation, "loaded", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("loaded")))
    twin = stage_evaluation.evaluate_checkpoint(
        profile, "abl_twin_s0", records, path=model_path(profile), extra={"variant": "twin"}
    )
    assert twin["read_back"] is True and twin["answers_from"] == "untrained" and twin["variant"] == "twin"
    assert twin["checkpoint"] == "abl_twin_s0" and twin["eval_key"] == first["eval_key"]
    assert twin["overall"] == first["overall"] and twin["generate_seconds"] == first["generate_seconds"]
    preds = run_dir(profile) / "eval" / "abl_twin_s0" / "step_predictions.jsonl"
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert len(lines) == len(records) and {r["checkpoint"] for r in lines} == {"abl_twin_s0"}
    again = stage_evaluation.evaluate_checkpoint(profile, "abl_twin_s0", records, path=model_path(profile))
    assert again["read_back"] is True and "answers_from" in again  # now stored under its own name


@pytest.mark.slow
def test_task_evaluation_is_read_back(monkeypatch):
    profile = get_profile("smoke").replace(eval_max_new_tokens=8, max_episode_steps=2)
    tasks = pipeline.held_out_tasks(profile, 2)
    first = pipeline.evaluate_checkpoint_tasks(profile, "untrained", tasks)
    monkeypatch.setattr(stage_evaluation, "loaded", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("loaded")))
    again = pipeline.evaluate_checkpoint_tasks(profile, "untrained", tasks)
    assert again.pop("read_back") is True and again == json.loads(json.dumps(first))
    with pytest.raises(AssertionError, match="loaded"):
        pipeline.evaluate_checkpoint_tasks(profile, "untrained", tasks[:1])


@pytest.mark.slow
def test_an_ablation_points_evaluations_are_read_back(monkeypatch):
    """`ablations.run_point` evaluates through the stages' evaluate-once: the second run of a point loads
    no model, and the step metrics carry the point's variant and seed either way."""
    from inquire_lib import ablations
    from inquire_lib.training.models import model_path

    profile = get_profile("smoke").replace(eval_tasks=2, eval_max_new_tokens=8, max_episode_steps=2)
    monkeypatch.setattr(ablations, "_train", lambda vp, v, seed, start=None: model_path(vp))
    first = ablations.run_point(profile, "sft_no_think", train_seed=1)
    step = json.loads((run_dir(profile) / "metrics" / "step_abl_sft_no_think_s1.json").read_text())
    assert (step["variant"], step["group"], step["train_seed"], step["overrides"]) == (
        "sft_no_think",
        "sft",
        1,
        {"use_think": False},
    )
    assert step["eval_key"] and set(first["step"]) == set(ablations.STEP_KEYS)
    monkeypatch.setattr(stage_evaluation, "loaded", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("loaded")))
    again = ablations.run_point(profile, "sft_no_think", train_seed=1)
    assert again == first
    lines = [t for t in timing.read(run_dir(profile)) if t["name"] == "abl_sft_no_think_s1"]
    assert [(t["stage"], t.get("reused", False)) for t in lines] == [
        ("evaluate steps", False),
        ("evaluate tasks", False),
        ("evaluate steps", True),
        ("evaluate tasks", True),
    ]


def test_the_evaluation_code_is_what_an_evaluation_runs():
    modules = readback.eval_modules()
    for runs in ("evaluation.steps", "evaluation.episodes", "evaluation.metrics", "world.env", "world.render"):
        assert f"inquire_lib.{runs}" in modules
    for runs in ("agent.prompts", "agent.actions", "agent.questions", "training.openvino", "stages.evaluate"):
        assert f"inquire_lib.{runs}" in modules
    # what only shows, trains or drives an evaluation is not in it
    for other in ("viz.plots", "viz.report", "runs.summary", "training.grpo", "training.sft", "cli", "pipeline"):
        assert f"inquire_lib.{other}" not in modules


def _copy_of_library(tmp_path):
    import shutil

    package = tmp_path / "inquire_lib"
    shutil.copytree(readback.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


@pytest.mark.parametrize(
    "edited, reads_back",
    [("viz/plots.py", True), ("viz/report.py", True), ("training/grpo.py", True), ("world/env.py", False)],
)
def test_an_edit_outside_the_evaluation_code_reads_evaluations_back(tmp_path, edited, reads_back):
    """A docstring edited in `viz` (or a trainer) keeps the key, so stored evaluations are read back; an edit
    to the world the episodes play in gives a new key, and the evaluation runs again."""
    package = _copy_of_library(tmp_path)
    before = readback.code_digest(package)
    path = package / edited
    path.write_text('"""An edited docstring."""\n' + path.read_text())
    readback.code_digest.cache_clear()
    assert (readback.code_digest(package) == before) is reads_back


def test_a_docs_edit_keeps_the_key(tmp_path):
    package = _copy_of_library(tmp_path)
    before = readback.code_digest(package)
    (tmp_path / "README.md").write_text("an edited readme\n")
    (package / "recipes" / "smoke.yaml").write_text((package / "recipes" / "smoke.yaml").read_text() + "\n# note\n")
    readback.code_digest.cache_clear()
    assert readback.code_digest(package) == before
