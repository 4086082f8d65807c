"""Training wrappers: record preparation, interrupted SFT and GRPO runs that resume from their last
checkpoint, one GRPO step with its reward logs, reuse and checkpoint choice (smoke profile, private
cache and artifacts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from inquire_lib.data.benchmark import benchmark
from inquire_lib.training.grpo import grpo
from inquire_lib.training.sft import base_agent, sft, training_records
from inquire_lib.profiles import get_profile
from inquire_lib.runs.hardware import cpu_kind, device_stamp

pytestmark = pytest.mark.slow
PROFILE = get_profile("smoke").replace(sft_save_steps=2, torch_threads=1)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_CACHE", str(root / "cache"))
        mp.setenv("INQUIRE_ARTIFACTS", str(root / "artifacts"))
        mp.setenv("INQUIRE_RUNS", str(root / "runs"))  # the tracker's event files live in the run
        mp.delenv("INQUIRE_RUN_NAME", raising=False)
        mp.setenv("CI", "1")
        torch.set_num_threads(1)
        yield root


@pytest.fixture(scope="module")
def train_split(env):
    return benchmark(PROFILE)["train"]


def ids_and_gold(ds) -> list[tuple[str, str]]:
    return list(zip(ds["id"], (json.loads(g)["action"] for g in ds["gold_action"])))


def test_inquiry_share_filters_only_inquiry_steps(train_split):
    n_req = sum(train_split["inquiry_required"])
    assert 0 < n_req < len(train_split)
    full = training_records(train_split, PROFILE, 1.0)
    none = training_records(train_split, PROFILE, 0.0)
    half = training_records(train_split, PROFILE, 0.5)
    assert len(full) == len(train_split) and full["id"] == train_split["id"]
    assert len(none) == len(train_split) - n_req
    assert not any(none["inquiry_required"])
    assert "call_user" not in {a for _, a in ids_and_gold(none)}
    assert "call_user" in {a for _, a in ids_and_gold(full)}
    # part of the inquiries, all of the rest, the same ones on every call, nested in larger fractions
    kept_req = sum(half["inquiry_required"])
    assert 0 < kept_req < n_req and len(half) == len(none) + kept_req
    assert training_records(train_split, PROFILE, 0.5)["id"] == half["id"]
    quarter = set(training_records(train_split, PROFILE, 0.25)["id"])
    assert quarter <= set(half["id"]) and set(none["id"]) <= quarter


def test_training_records_columns(train_split):
    recs = training_records(train_split.select(range(6)), PROFILE, 1.0)
    assert set(recs.column_names) == {
        "prompt",
        "completion",
        "images",
        "gold_action",
        "gold_bbox",
        "inquiry_required",
        "frame_w",
        "frame_h",
        "category",
        "subcategory",
        "id",
    }
    for r in recs:
        n_placeholders = sum(1 for part in r["prompt"][1]["content"] if part["type"] == "image")
        assert len(r["images"]) == n_placeholders == (1 if r["id"].endswith("/0") else 2)
        assert r["images"][-1].size == (360, 720)
        assert r["completion"][0]["content"][0]["text"].startswith("<think>")


class Interrupt(TrainerCallback):
    """Stands for a crash or a kill in the middle of training."""

    def __init__(self, at: int):
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt(f"interrupted at step {self.at}")


class Steps(TrainerCallback):
    """Records the optimizer steps this process actually ran."""

    def __init__(self):
        self.ran: list[int] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ran.append(state.global_step)


@pytest.fixture(scope="module")
def resumed(env):
    out = Path(env) / "artifacts" / "smoke" / "sft_resume"
    first = Steps()
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 3"):
        sft(PROFILE, name="sft_resume", max_steps=4, callbacks=[first, Interrupt(3)])
    checkpoints = sorted(p.name for p in out.glob("checkpoint-*"))
    first_state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    second = Steps()
    res = sft(PROFILE, name="sft_resume", max_steps=4, resume=True, callbacks=[second])
    return {
        "out": out,
        "first": first.ran,
        "checkpoints": checkpoints,
        "first_state": first_state,
        "second": second.ran,
        "result": res,
    }


def test_interrupted_sft_resumes_from_its_last_checkpoint(resumed):
    assert resumed["first"] == [1, 2, 3]
    assert resumed["checkpoints"] == ["checkpoint-2"]  # saved every 2 steps; nothing after the interrupt
    # the second run did only what was left
    assert resumed["second"] == [3, 4]
    res = resumed["result"]
    steps = [e["step"] for e in res.log_history if "loss" in e]
    assert steps == [1, 2, 3, 4]
    assert res.log_history[-1]["step"] == 4 and "train_runtime" in res.log_history[-1]
    # the first two entries come from the checkpoint, unchanged
    before = [e for e in resumed["first_state"]["log_history"] if "loss" in e]
    assert [e["loss"] for e in before] == [e["loss"] for e in res.log_history if "loss" in e][:2]
    assert (resumed["out"] / "checkpoint-4").is_dir()


class FirstWeights(TrainerCallback):
    """The embedding the first optimizer step of this process starts from."""

    def __init__(self):
        self.weights = None

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if self.weights is None:
            # on the CPU, where the checkpoint is read back, whatever device trained
            self.weights = model.get_input_embeddings().weight.detach().to("cpu", copy=True)


def test_a_full_weight_run_resumes_from_the_checkpoints_weights(env):
    """Not from its start weights: the Trainer alone loads none of a Qwen2.5-VL checkpoint's keys."""
    from transformers import AutoModelForImageTextToText

    full = PROFILE.replace(lora=False, load_in_4bit=False)
    out = Path(env) / "artifacts" / "smoke" / "sft_full_weights"
    started = FirstWeights()
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 3"):
        sft(full, name="sft_full_weights", max_steps=4, callbacks=[started, Interrupt(3)])
    saved = AutoModelForImageTextToText.from_pretrained(str(out / "checkpoint-2")).get_input_embeddings().weight
    assert not torch.equal(started.weights, saved)  # two steps moved the weights, so the check below can fail
    resumed_at = FirstWeights()
    res = sft(full, name="sft_full_weights", max_steps=4, resume=True, callbacks=[resumed_at])
    assert torch.equal(resumed_at.weights, saved)
    assert res.adapter is False and (Path(res.path) / "model.safetensors").exists()


def test_sft_output_is_an_adapter_with_metadata(resumed):
    res = resumed["result"]
    final = Path(res.path)
    assert res.adapter is True and final == resumed["out"] / "final"
    assert (final / "adapter_config.json").exists() and (final / "adapter_model.safetensors").exists()
    meta = json.loads((final / "inquire_train.json").read_text())
    assert meta["stage"] == "sft" and meta["profile"] == "smoke" and meta["steps"] == 4
    assert meta["inquiry_share"] == PROFILE.sft_inquiry_share and meta["adapter"] is True
    assert meta["base"] == base_agent(PROFILE) and Path(meta["base"], "config.json").exists()
    assert res.n_examples == meta["n_examples"] > 0
    assert meta["device"] == device_stamp() and meta["device"]["cpu_kind"] == cpu_kind()  # the machine it trained on


def test_grpo_one_step_logs_each_reward(resumed):
    res = grpo(PROFILE, start=resumed["result"].path, name="grpo_one", max_steps=1)
    (entry,) = [e for e in res.log_history if "reward" in e]
    for name in ("format", "action", "inquiry"):
        assert f"rewards/{name}/mean" in entry and f"rewards/{name}/std" in entry
    assert -1.0 <= entry["rewards/format/mean"] <= 1.0
    assert 0.0 <= entry["rewards/action/mean"] <= 2.0
    assert -PROFILE.missed_penalty <= entry["rewards/inquiry/mean"] <= 0.0
    assert 0.0 <= entry["frac_reward_zero_std"] <= 1.0
    assert entry["reward"] == pytest.approx(
        sum(PROFILE.reward_weights.get(n, 1.0) * entry[f"rewards/{n}/mean"] for n in ("format", "action", "inquiry")),
        abs=1e-4,
    )
    assert entry["step"] == 1 and entry["completions/max_length"] <= PROFILE.max_completion_length
    assert res.adapter is True and (Path(res.path) / "adapter_config.json").exists()
    meta = json.loads((Path(res.path) / "inquire_train.json").read_text())
    assert meta["stage"] == "grpo" and meta["start"] == resumed["result"].path
    assert meta["base"] == base_agent(PROFILE) and meta["rewards"] == ["format", "action", "inquiry"]
    assert meta["config"]["top_entropy_quantile"] == PROFILE.top_entropy_quantile
    assert meta["config"]["num_iterations"] == PROFILE.grpo_iterations and meta["config"]["max_steps"] == 1
    assert meta["config"]["learning_rate"] == PROFILE.grpo_lr and meta["config"]["beta"] == PROFILE.beta
    assert len(res.samples) == PROFILE.grpo_prompts_per_step * PROFILE.num_generations
    assert all(set(s["rewards"]) == {"format", "action", "inquiry"} for s in res.samples)


def test_training_logs_to_the_run_tracker(resumed, env):
    """TRL's report_to=["tensorboard"]: every logged loss of the SFT run is in the run's store,
    with the run name and the effective profile beside it."""
    from inquire_lib.runs import tracking

    folder = env / "runs" / "smoke" / "default" / "tensorboard" / "sft_resume"
    scalars = tracking.read_scalars(folder)
    logged = [h for h in resumed["result"].log_history if "loss" in h]
    assert [step for step, _ in scalars["train/loss"]][-len(logged) :] == [h["step"] for h in logged]
    assert [round(v, 4) for _, v in scalars["train/loss"]][-len(logged) :] == [round(h["loss"], 4) for h in logged]
    texts = tracking.read_texts(folder)
    profile = json.loads(texts["profile"].replace("\n    ", "\n"))
    assert (profile["run"], profile["stage"]) == ("default", "sft_resume")
    assert profile["profile"]["sft_save_steps"] == 2 and profile["profile"]["name"] == "smoke"
    assert json.loads(texts["args"])["run_name"] == "default/sft_resume"


def test_grpo_keeps_checkpoints_reuses_a_finished_run_and_validation_chooses(resumed, tmp_path):
    from inquire_lib.training import selection

    profile = PROFILE.replace(grpo_save_steps=1, val_tasks=2)
    start = resumed["result"].path
    first = grpo(profile, start=start, name="grpo_kept", max_steps=2)
    run = Path(first.path).parent
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    stamp = (Path(first.path) / "adapter_model.safetensors").stat().st_mtime_ns

    again = grpo(profile, start=start, name="grpo_kept", max_steps=2, reuse=True)
    assert (Path(first.path) / "adapter_model.safetensors").stat().st_mtime_ns == stamp  # not retrained
    assert again.log_history == json.loads(json.dumps(first.log_history)) and again.seconds == first.seconds
    assert len(again.samples) == len(first.samples) and again.n_examples == first.n_examples

    record = selection.select_on_validation(profile, "grpo_kept", start, run, out_root=tmp_path)
    assert [r["step"] for r in record["checkpoints"]] == [1, 2] and record["start"]["step"] == 0
    assert record["validation_tasks"] == 2 and record["validation_steps"] > 2
    for r in [record["start"], *record["checkpoints"]]:
        assert set(selection.KEYS) <= set(r) and 0.0 <= r["format"] <= 1.0
    assert record["selected_step"] in (1, 2) and isinstance(record["constraints_met"], bool)
    chosen = json.loads((run / "selected" / "inquire_train.json").read_text())
    assert chosen["selected_step"] == record["selected_step"] and chosen["base"] == base_agent(profile)
    assert (run / "selected" / "adapter_model.safetensors").exists() and not (
        run / "selected" / "optimizer.pt"
    ).exists()
    saved = json.loads((tmp_path / "smoke" / "default" / "metrics" / "selection_grpo_kept.json").read_text())
    assert saved["selected_step"] == record["selected_step"]
    assert saved["online"] == [] and saved["max_needless_episodes"] == 1.0  # the online check is off

    # every checkpoint qualifies on steps and none can meet the online bound: each plays the 2 validation
    # tasks, and the one with the fewest episodes with a needless inquiry is kept
    strict = profile.replace(select_max_needless_steps=1.0, select_max_safe_drop=1.0, select_max_needless_episodes=-1.0)
    record = selection.select_on_validation(strict, "grpo_kept", start, run, out_root=tmp_path)
    assert sorted(o["step"] for o in record["online"]) == [1, 2] and record["constraints_met"] is False
    assert all(o["needless_episodes"] in (0.0, 0.5, 1.0) for o in record["online"])
    assert record["selected_step"] == min(record["online"], key=lambda o: o["needless_episodes"])["step"]

    # and an operating point for the chosen checkpoint: both biases play the validation tasks (the bound
    # cannot be met), bias 0 read from the online check above; a bias that buries `call_user` never asks
    from inquire_lib.training.checkpoints import ask_bias_of

    biased = strict.replace(select_ask_biases=(0.0, -1e4), select_bias_max_needless_episodes=-1.0)
    record = selection.select_on_validation(biased, "grpo_kept", start, run, out_root=tmp_path)
    assert [b["ask_bias"] for b in record["ask_biases"]] == [0.0, -1e4] and record["ask_bias_met"] is False
    assert record["ask_biases"][0]["needless_episodes"] == min(o["needless_episodes"] for o in record["online"])
    assert record["ask_biases"][1]["needless_episodes"] == 0.0
    assert ask_bias_of(str(run / "selected")) == record["ask_bias"]
    assert json.loads((run / "selected" / "inquire_train.json").read_text())["selected_step"] == record["selected_step"]

    # other settings: trained again, and the choice made among the older run's checkpoints is dropped
    other = grpo(profile.replace(grpo_lr=profile.grpo_lr / 2), start=start, name="grpo_kept", max_steps=1, reuse=True)
    assert json.loads((Path(other.path) / "inquire_train.json").read_text())["config"]["max_steps"] == 1
    assert not (run / "selected").exists()


def test_interrupted_grpo_resumes_from_its_last_checkpoint(resumed):
    profile = PROFILE.replace(grpo_save_steps=1)
    start = resumed["result"].path
    out = Path(resumed["out"]).parent / "grpo_resume"
    first = Steps()
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 2"):
        grpo(profile, start=start, name="grpo_resume", max_steps=3, callbacks=[first, Interrupt(2)])
    assert first.ran == [1, 2]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]  # step 2 died before its save
    before = json.loads((out / "checkpoint-1" / "trainer_state.json").read_text())["log_history"]
    second = Steps()
    res = grpo(profile, start=start, name="grpo_resume", max_steps=3, resume=True, callbacks=[second])
    assert second.ran == [2, 3]  # only what was left
    logged = [e for e in res.log_history if "reward" in e]
    assert [e["step"] for e in logged] == [1, 2, 3]
    assert logged[0]["reward"] == [e for e in before if "reward" in e][0]["reward"]  # from the checkpoint
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    meta = json.loads((Path(res.path) / "inquire_train.json").read_text())
    assert meta["config"]["max_steps"] == 3 and meta["config"]["save_steps"] == 1


def test_the_weak_run_keeps_the_weak_share_unless_told(monkeypatch, tmp_path):
    """`inquire train sft --name sft_weak` trains the weak inquirer, not a second sft_full."""
    from inquire_lib.training import sft as stage

    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path))
    shares = []
    monkeypatch.setattr(stage, "_from_shipped", lambda *a: False)
    monkeypatch.setattr(stage, "base_agent", lambda profile: None)
    monkeypatch.setattr(stage, "_run_sft", lambda profile, **kw: shares.append(kw["inquiry_share"]))
    smoke = get_profile("smoke")
    assert smoke.weak_inquiry_share != smoke.sft_inquiry_share
    for name, share in [("sft_weak", None), ("sft_full", None), ("sft_weak", 0.5), ("other", None)]:
        stage.sft(smoke, name=name, inquiry_share=share)
    assert shares == [smoke.weak_inquiry_share, smoke.sft_inquiry_share, 0.5, smoke.sft_inquiry_share]


def test_a_resume_goes_on_only_from_a_checkpoint_of_its_own_settings(env):
    """A stage's checkpoints and result record its content key; a resume under other settings is refused in one
    line, never gone on from."""
    from inquire_lib.runs.integrity import read_marker
    from inquire_lib.training.fit import StaleCheckpoint
    from inquire_lib.training.sft import run_key

    out = Path(env) / "artifacts" / "smoke" / "sft_weak"
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 3"):
        sft(PROFILE, name="sft_weak", max_steps=4, callbacks=[Interrupt(3)])
    key = run_key(PROFILE, "sft_weak", 4, PROFILE.weak_inquiry_share)
    assert read_marker(out / "checkpoint-2")["key"] == key and len(key) == 12
    other = PROFILE.replace(sft_lr=2 * PROFILE.sft_lr)
    assert run_key(other, "sft_weak", 4, PROFILE.weak_inquiry_share) != key
    with pytest.raises(StaleCheckpoint) as refused:
        sft(other, name="sft_weak", max_steps=4, resume=True)
    assert str(refused.value).startswith(f"{out / 'checkpoint-2'}: made under settings key {key}, these settings'")
    assert "\n" not in str(refused.value)
    ran = Steps()
    res = sft(PROFILE, name="sft_weak", max_steps=4, resume=True, callbacks=[ran])
    assert ran.ran == [3, 4] and read_marker(res.path)["key"] == key
    assert json.loads((Path(res.path) / "inquire_train.json").read_text())["key"] == key
