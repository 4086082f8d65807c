"""Shipped stage results: a stage's adapter or a long run's last checkpoint, found by its content key, checked
by sha256, installed instead of trained or gone on from, unless the stage is rebuilt."""

from __future__ import annotations

import json
import shutil

import pytest

from inquire_lib.profiles import apply_overrides
from inquire_lib.runs.integrity import complete_checkpoints, is_complete
from inquire_lib.runs.paths import artifacts_dir
from inquire_lib.training import sft, shipped_stages

pytestmark = pytest.mark.slow  # trains the smoke model a few steps


@pytest.fixture()
def places(tmp_path, monkeypatch):
    for var, sub in (("INQUIRE_CACHE", "cache"), ("INQUIRE_ARTIFACTS", "artifacts"), ("INQUIRE_RUNS", "runs")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("INQUIRE_REBUILD", raising=False)
    monkeypatch.setattr(shipped_stages, "STAGES_ROOT", tmp_path / "assets" / "stages")
    return tmp_path


def test_a_shipped_resume_point_is_gone_on_from_and_a_shipped_result_is_installed(places, monkeypatch):
    profile = apply_overrides("smoke", {"sft_steps": 4, "sft_save_steps": 2})
    first = sft.sft(profile, name="sft_full", inquiry_share=1.0)
    out = artifacts_dir(profile) / "sft_full"
    assert [step for step, _ in complete_checkpoints(out)] == [2, 4]  # a run saving part-way keeps them all
    settings = shipped_stages.stage_settings(profile, "sft_full", 4, 1.0)
    parent = sft.base_agent_key(profile)
    m = shipped_stages.ship(out / "checkpoint-2", "sft_full", settings, parent, command="c", extra={"examples": 2})
    assert (m["kind"], m["step"], m["key"]) == ("resume", 2, shipped_stages.stage_key(settings, parent))
    assert m["seconds"] > 0 and set(m["files"]) == set(shipped_stages.RESUME_FILES)
    assert shipped_stages.find("sft_full", settings, parent) == m
    # another setting is another key: nothing shipped for it
    assert shipped_stages.find("sft_full", {**settings, "sft_lr": 1.0}, parent) is None
    assert shipped_stages.find("sft_full", settings, "another-start") is None

    shutil.rmtree(out)
    from transformers import TrainerCallback

    trained = []

    class Steps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            trained.append(state.global_step)

    # no resume asked: the shipped point is put in place and gone on from
    resumed = sft.sft(profile, name="sft_full", inquiry_share=1.0, callbacks=[Steps()])
    assert trained == [3, 4] and is_complete(resumed.path)
    record = json.loads((out / "final" / "inquire_train.json").read_text())
    assert record["seconds_total"] > record["seconds"]  # the shipped sitting's seconds are counted in

    m = shipped_stages.ship(first.path, "sft_full", settings, parent, command="c")
    assert m["kind"] == "final" and set(m["files"]) == {*shipped_stages.FINAL_FILES, "inquire_train.json"}
    shutil.rmtree(out)
    monkeypatch.setattr(sft, "_run_sft", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("trained")))
    installed = sft.sft(profile, name="sft_full", inquiry_share=1.0)
    assert installed.seconds == 0.0 and is_complete(installed.path)
    shipped_record = json.loads((shipped_stages.STAGES_ROOT / m["name"] / "inquire_train.json").read_text())
    assert installed.log_history == shipped_record["log_history"] != []  # its curves come along
    meta = json.loads((out / "final" / "inquire_train.json").read_text())
    assert meta["shipped"]["key"] == m["key"] and meta["base"] == sft.base_agent(profile)
    with pytest.raises(RuntimeError, match="trained"):
        sft.sft(profile, name="sft_full", inquiry_share=1.0, rebuild=True)
    monkeypatch.setenv("INQUIRE_REBUILD", "grpo_full,sft_full")
    with pytest.raises(RuntimeError, match="trained"):
        sft.sft(profile, name="sft_full", inquiry_share=1.0)
    monkeypatch.delenv("INQUIRE_REBUILD")

    # a result trained on other data than this code generates is refused in one line, never used
    shutil.rmtree(out)
    manifest_path = shipped_stages.STAGES_ROOT / m["name"] / "manifest.json"
    good = manifest_path.read_text()
    manifest_path.write_text(json.dumps({**m, "data_fingerprint": "0123456789abcdef"}))
    with pytest.raises(shipped_stages.ShippedStageError) as other_data:
        sft.sft(profile, name="sft_full", inquiry_share=1.0)
    fingerprint = sft.benchmark_fingerprint(profile)
    assert str(other_data.value) == (
        f"{manifest_path}: trained on data with fingerprint 0123456789abcdef, this code generates {fingerprint}; "
        "train sft_full here with --rebuild"
    )
    assert not (out / "final").exists()
    manifest_path.write_text(json.dumps({**m, "data_fingerprint": fingerprint}))
    assert sft.sft(profile, name="sft_full", inquiry_share=1.0).seconds == 0.0
    manifest_path.write_text(good)

    # a shipped file that is not the one its manifest names is one line, never used
    shutil.rmtree(out)
    weights = shipped_stages.STAGES_ROOT / m["name"] / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    with pytest.raises(shipped_stages.ShippedStageError) as bad:
        sft.sft(profile, name="sft_full", inquiry_share=1.0)
    assert str(bad.value).startswith(f"{weights}: missing or not the file") and "\n" not in str(bad.value)
    assert not (out / "final").exists()


def test_inquire_ship_records_each_sitting_less_its_pause(places, monkeypatch):
    from inquire_lib import cli
    from inquire_lib.runs.integrity import read_marker

    monkeypatch.delenv("INQUIRE_RUN_NAME", raising=False)
    sets = ["--set", "sft_steps=4", "--set", "sft_save_steps=2"]
    profile = apply_overrides("smoke", {"sft_steps": 4, "sft_save_steps": 2})
    monkeypatch.setenv("INQUIRE_RUN_NAME", "sittings")
    sft.sft(profile, name="sft_full", inquiry_share=1.0)
    out = artifacts_dir(profile) / "sft_full"
    shutil.rmtree(out / "final")  # as if the sitting had ended after step 2's checkpoint
    shutil.rmtree(out / "checkpoint-4")
    assert cli.main(["ship", "sft_full", "--profile", "smoke", *sets, "--paused-seconds", "0.5"]) == 0
    first = shipped_stages.find(
        "sft_full", shipped_stages.stage_settings(profile, "sft_full", 4, 1.0), sft.base_agent_key(profile)
    )
    marker = read_marker(out / "checkpoint-2")
    assert (
        first["step"] == 2
        and first["command"] == "inquire train sft --profile smoke --set sft_save_steps=2 --set sft_steps=4 --resume"
    )
    [sitting] = first["sittings"]
    assert sitting["steps"] == [0, 2] and sitting["paused_seconds"] == 0.5
    assert sitting["seconds"] == first["seconds"] == round(marker["seconds"] - 0.5, 1)


def test_inquire_ship_refuses_a_checkpoint_made_under_other_settings(places, monkeypatch, capsys):
    from inquire_lib import cli

    sets = ["--set", "sft_steps=4", "--set", "sft_save_steps=2"]
    profile = apply_overrides("smoke", {"sft_steps": 4, "sft_save_steps": 2})
    monkeypatch.setenv("INQUIRE_RUN_NAME", "other")
    sft.sft(profile, name="sft_full")
    out = artifacts_dir(profile) / "sft_full"
    shutil.rmtree(out / "final")  # as if the sitting had ended after step 2's checkpoint
    shutil.rmtree(out / "checkpoint-4")
    capsys.readouterr()
    # the run was trained with sft_lr at its default: shipped as if trained with another, it is refused
    assert cli.main(["ship", "sft_full", "--profile", "smoke", *sets, "--set", "sft_lr=0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out / 'checkpoint-2'}: made under settings key " in err[0]
    assert "ship it with the settings it was trained with" in err[0]
    assert not shipped_stages.STAGES_ROOT.exists() or not any(shipped_stages.STAGES_ROOT.iterdir())
    assert cli.main(["ship", "sft_full", "--profile", "smoke", *sets]) == 0  # with its own settings it ships
    assert len(list(shipped_stages.STAGES_ROOT.iterdir())) == 1
    # gone on from to its end, the finished result ships in the same place, with its step
    sft.sft(profile, name="sft_full", resume=True)
    assert cli.main(["ship", "sft_full", "--profile", "smoke", *sets]) == 0
    [folder] = shipped_stages.STAGES_ROOT.iterdir()
    m = json.loads((folder / "manifest.json").read_text())
    assert (m["kind"], m["step"], m["examples"]) == ("final", 4, 4 * profile.sft_batch)


def test_a_grpo_result_ships_with_its_choice_and_installs_by_its_start_s_key(places, monkeypatch, capsys):
    from inquire_lib import cli
    from inquire_lib.runs.integrity import read_marker
    from inquire_lib.stages.train import select_checkpoint
    from inquire_lib.training import grpo as grpo_stage
    from inquire_lib.training.checkpoints import checkpoint_path

    monkeypatch.setenv("INQUIRE_RUN_NAME", "later")
    sets = ["--set", "sft_steps=2", "--set", "val_tasks=2", "--set", "torch_threads=1"]
    profile = apply_overrides("smoke", {"sft_steps": 2, "val_tasks": 2, "torch_threads": 1})
    start = sft.sft(profile, name="sft_full", inquiry_share=1.0).path
    sft_key = read_marker(start)["key"]
    assert sft_key == sft.run_key(profile, "sft_full", 2, 1.0)
    # a run that is not one of the recipe's stages, or a start without a key, is never keyed nor shipped
    assert shipped_stages.result_key(profile, "grpo_s1", 2, start) is None
    assert shipped_stages.result_key(profile, "grpo_full", 2, None) is None

    trained = grpo_stage.grpo(profile, start=start, name="grpo_full")
    assert shipped_stages.provenance(trained.path).startswith(f"trained here: {profile.grpo_steps} steps, ")
    key = shipped_stages.result_key(profile, "grpo_full", profile.grpo_steps, start)
    assert read_marker(trained.path)["key"] == key != sft_key
    record = select_checkpoint(profile, "grpo_full", "sft_full")
    out = artifacts_dir(profile) / "grpo_full"
    assert read_marker(out / "selected")["key"] == key  # the chosen checkpoint keeps the run's key
    assert cli.main(["ship", "grpo_full", "--profile", "smoke", *sets]) == 0
    m = json.loads((shipped_stages.folder_of("grpo_full", key) / "manifest.json").read_text())
    assert (m["kind"], m["parent"], m["start"], m["selected_step"]) == (
        "final",
        sft_key,
        "sft_full",
        record["selected_step"],
    )
    assert m["command"] == (  # a thread count does not shape the result: the command leaves it out
        "inquire train grpo --profile smoke --set sft_steps=2 --set val_tasks=2 --name grpo_full --start sft_full --select"
    )
    assert set(m["files"]) == {*shipped_stages.FINAL_FILES, *shipped_stages.RECORD_FILES}
    assert m["examples"] == profile.grpo_steps * profile.grpo_prompts_per_step

    # a fresh place: installed instead of trained, its log history kept, its choice read back, not made again
    shutil.rmtree(out)
    monkeypatch.setattr(grpo_stage, "fit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("trained")))
    monkeypatch.setattr(
        "inquire_lib.training.selection.select_on_validation",
        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("selected again")),
    )
    installed = grpo_stage.grpo(profile, start=start, name="grpo_full")
    assert installed.seconds == 0.0 and installed.log_history == json.loads(json.dumps(trained.log_history))
    again = select_checkpoint(profile, "grpo_full", "sft_full")
    assert again["selected_step"] == record["selected_step"] and checkpoint_path(profile, "grpo_full") == installed.path
    meta = json.loads((out / "final" / "inquire_train.json").read_text())
    assert meta["shipped"]["key"] == key and meta["base"] == sft.base_agent(profile)
    said = shipped_stages.provenance(installed.path)
    assert said.startswith(f"shipped result grpo_full-{key}: `{m['command']}`, {m['examples']} examples (prompts")
    with pytest.raises(RuntimeError, match="trained"):
        grpo_stage.grpo(profile, start=start, name="grpo_full", rebuild=True)
    # the thread count is not a setting that shapes it, another validation size is
    threads = apply_overrides("smoke", {"sft_steps": 2, "val_tasks": 2, "torch_threads": 3})
    assert shipped_stages.result_key(threads, "grpo_full", profile.grpo_steps, start) == key
    other = apply_overrides("smoke", {"sft_steps": 2, "val_tasks": 3, "torch_threads": 1})
    assert shipped_stages.result_key(other, "grpo_full", profile.grpo_steps, start) != key
    # an extra training seed is a stage of its own: keyed, and its name says the seed it was trained with
    from inquire_lib.training.configs import train_seed

    assert shipped_stages.kind_of("grpo_full_s2") == "grpo" and shipped_stages.kind_of("sft_more") is None
    assert shipped_stages.seed_of("grpo_full_s2") == ("grpo_full", 2) and shipped_stages.seed_of("grpo_full")[1] == 0
    seeded = profile.replace(train_seed=train_seed(profile) + 2)
    assert shipped_stages.result_key(seeded, "grpo_full_s2", profile.grpo_steps, start) not in (None, key)
    assert cli.main(["ship", "sft_more", "--profile", "smoke"]) == 2
    assert "not a stage that ships" in capsys.readouterr().err
    # another start is another key; stage 3 from this one is keyed under it
    assert shipped_stages.result_key(profile, "grpo_full", profile.grpo_steps, str(out / "final")) != key
    assert shipped_stages.result_key(profile, "grpo_task", 1, str(out / "final")) is not None
