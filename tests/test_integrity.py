"""Complete or absent: markers, resume after kill -9, final/ with its metadata, cache checks,
weights with NaN. The kill tests run a smoke SFT in a subprocess that SIGKILLs itself
(`tests/kill_train.py`); the module prints how long they took."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from inquire_lib.runs import integrity
from inquire_lib.training import weights

HERE = Path(__file__).parent
REPO = HERE.parent


# ------------------------------------------------------------------------------ markers
def _folder(tmp_path: Path) -> Path:
    f = tmp_path / "ck"
    (f / "sub").mkdir(parents=True)
    (f / "a.bin").write_bytes(b"0123456789")
    (f / "sub" / "b.txt").write_text("hello")
    return f


def test_marker_decides_completeness(tmp_path):
    f = _folder(tmp_path)
    assert "missing or unreadable" in integrity.verify(f)
    integrity.write_marker(f)
    assert integrity.verify(f) is None
    rec = integrity.read_marker(f)
    assert rec["files"]["a.bin"]["size"] == 10 and set(rec["files"]) == {"a.bin", "sub/b.txt"}


def test_truncated_or_edited_or_missing_file_is_named(tmp_path):
    f = _folder(tmp_path)
    integrity.write_marker(f)
    (f / "a.bin").write_bytes(b"01234")
    assert integrity.verify(f) == f"{f / 'a.bin'}: 5 bytes, 10 recorded in {integrity.MARKER}"
    (f / "a.bin").write_bytes(b"0123456780")  # same size, other content
    assert integrity.verify(f, hashes=False) is None
    assert integrity.verify(f) == f"{f / 'a.bin'}: content differs from the sha256 recorded in {integrity.MARKER}"
    (f / "a.bin").unlink()
    assert "a.bin: listed in" in integrity.verify(f)


def test_last_complete_checkpoint_skips_and_discards_half_saved(tmp_path):
    run = tmp_path / "run"
    for step in (2, 4, 6):
        c = run / f"checkpoint-{step}"
        c.mkdir(parents=True)
        (c / "model.safetensors").write_bytes(b"x" * step)
        if step != 6:
            integrity.write_marker(c)
    # a pre-marker checkpoint whose trainer state names another step is not trusted either
    legacy = run / "checkpoint-8"
    legacy.mkdir()
    (legacy / "trainer_state.json").write_text(json.dumps({"global_step": 7}))
    assert integrity.last_complete_checkpoint(run) == str(run / "checkpoint-4")
    assert [s for s, _ in integrity.complete_checkpoints(run)] == [2, 4]
    assert integrity.last_complete_checkpoint(run, discard_incomplete=True) == str(run / "checkpoint-4")
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    # a checkpoint from before markers: complete when its trainer state parses and names its step
    (legacy).mkdir()
    (legacy / "trainer_state.json").write_text(json.dumps({"global_step": 8}))
    assert integrity.last_complete_checkpoint(run) == str(legacy)


def test_finished_output_needs_marker_or_metadata(tmp_path):
    final = tmp_path / "final"
    final.mkdir()
    (final / "adapter_model.safetensors").write_bytes(b"w")
    assert not integrity.finished_output(final)  # weights without metadata: a killed run
    (final / "inquire_train.json").write_text("{}")
    assert integrity.finished_output(final)  # written by the code before markers, metadata last
    integrity.write_marker(final)
    (final / "adapter_model.safetensors").write_bytes(b"")
    assert not integrity.finished_output(final)


# ------------------------------------------------------------------------------ weights
def test_nan_weights_are_refused_naming_file_and_tensor(tmp_path):
    good = {"a.weight": torch.ones(3, 3), "b.bias": torch.zeros(3)}
    save_file(good, tmp_path / "model.safetensors")
    assert weights.check_weights(tmp_path) == 2
    bad = dict(good, **{"b.bias": torch.tensor([0.0, float("nan"), float("inf")])})
    save_file(bad, tmp_path / "model.safetensors")
    with pytest.raises(
        weights.CorruptWeightsError, match=rf"^{tmp_path / 'model.safetensors'}: tensor 'b.bias' holds 2 NaN/Inf values"
    ):
        weights.check_weights(tmp_path)


def test_truncated_weights_are_refused(tmp_path):
    save_file({"a": torch.ones(64)}, tmp_path / "model.safetensors")
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-40])
    with pytest.raises(weights.CorruptWeightsError, match="model.safetensors: unreadable weights"):
        weights.check_weights(tmp_path)


def test_nan_checkpoint_is_refused_when_loaded_for_training_or_evaluation(tmp_path, monkeypatch):
    """A trained smoke checkpoint with one NaN: `load_checkpoint` refuses it, naming the file."""
    from inquire_lib.profiles import get_profile
    from inquire_lib.training import models

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    profile = get_profile("smoke")
    base = Path(models.model_path(profile))
    ck = tmp_path / "nan_ck"
    ck.mkdir()
    from safetensors.torch import load_file

    tensors = load_file(base / "model.safetensors")
    name = sorted(k for k, v in tensors.items() if v.is_floating_point())[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = float("nan")
    save_file(tensors, ck / "model.safetensors")
    (ck / "config.json").write_text((base / "config.json").read_text())
    for trainable in (True, False):
        with pytest.raises(weights.CorruptWeightsError, match=rf"{ck / 'model.safetensors'}: tensor '{name}'"):
            models.load_checkpoint(profile, str(ck), trainable=trainable)
    model, _ = models.load_checkpoint(profile, str(base))  # the intact one loads
    assert models.n_params(model) > 0


# ------------------------------------------------------------------------------ dataset cache
def test_cached_arrow_edited_in_place_warns_naming_the_file_and_rebuilds(tmp_path, monkeypatch):
    from inquire_lib.data import benchmark

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    first = benchmark.fingerprint(benchmark.load_or_build(3, 5))
    path = next((tmp_path / "data").glob("inquirebench-*"))
    arrow = sorted(path.glob("train/*.arrow"))[0]
    data = bytearray(arrow.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    arrow.write_bytes(bytes(data))
    with pytest.warns(integrity.CacheWarning, match=rf"{arrow}: content differs"):
        again = benchmark.load_or_build(3, 5)
    assert benchmark.fingerprint(again) == first
    assert integrity.verify(path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # intact now: served without a word
        benchmark.load_or_build(3, 5)


def test_cached_dataset_truncated_or_without_marker(tmp_path, monkeypatch):
    from inquire_lib.data import benchmark

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    first = benchmark.fingerprint(benchmark.load_or_build(3, 5))
    path = next((tmp_path / "data").glob("inquirebench-*"))
    arrow = sorted(path.glob("test/*.arrow"))[0]
    arrow.write_bytes(arrow.read_bytes()[:100])
    with pytest.warns(integrity.CacheWarning, match=rf"{arrow}: 100 bytes"):
        assert benchmark.fingerprint(benchmark.load_or_build(3, 5)) == first
    # a build from before markers: adopted when its stored fingerprint still matches ...
    (path / integrity.MARKER).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        benchmark.load_or_build(3, 5)
    assert integrity.read_marker(path)["adopted"] is True
    # ... and rebuilt when it does not
    (path / integrity.MARKER).unlink()
    meta = json.loads((path / "inquirebench.json").read_text())
    (path / "inquirebench.json").write_text(json.dumps({**meta, "fingerprint": "0" * 16}))
    with pytest.warns(integrity.CacheWarning, match=r"inquirebench.json: fingerprint 0000000000000000, data gives"):
        benchmark.load_or_build(3, 5)
    assert json.loads((path / "inquirebench.json").read_text())["fingerprint"] == first


def test_truncated_tiny_model_is_rebuilt_with_a_warning(tmp_path):
    from inquire_lib.training import models

    out = models.build_tiny_model(tmp_path / "tiny", "smoke", seed=0)
    weights = out / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])
    with pytest.warns(integrity.CacheWarning, match=rf"{weights}: {len(good) // 2} bytes"):
        models.build_tiny_model(out, "smoke", seed=0)
    assert weights.read_bytes() == good  # the same seed builds the same bytes


# ------------------------------------------------------------------------------ kill -9
def _kill_run(env: dict, mode: str, name: str, steps: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HERE / "kill_train.py"), mode, name, str(steps)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ran(artifacts: Path, name: str) -> list[list[int]]:
    """Optimizer steps per process, from the log kill_train.py appends to."""
    runs: list[list[int]] = []
    for line in (artifacts / "smoke" / f"{name}.steps").read_text().split():
        if line == "start":
            runs.append([])
        else:
            runs[-1].append(int(line))
    return runs


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill")
    env = {
        **os.environ,
        "INQUIRE_CACHE": str(root / "cache"),
        "INQUIRE_ARTIFACTS": str(root / "artifacts"),
        "CI": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    run = root / "artifacts" / "smoke" / "sft_weak"
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.sft import sft

    profile = get_profile("smoke").replace(sft_save_steps=2, torch_threads=1, base_agent_steps=0)
    t0 = time.time()
    # 1. SIGKILL while checkpoint-4 is being saved (weights and optimizer written, not the rest)
    save = _kill_run(env, "save", "sft_weak", 4)
    after_save = {
        "checkpoints": sorted(p.name for p in run.glob("checkpoint-*")),
        "complete": integrity.last_complete_checkpoint(run),
    }
    from transformers.trainer_utils import get_last_checkpoint

    after_save["transformers_pick"] = get_last_checkpoint(str(run))
    # 2. resume; SIGKILL right after final/'s weights are written, before its metadata
    final = _kill_run(env, "final", "sft_weak", 4)
    after_final = {
        "entries": sorted(p.name for p in run.iterdir()),
        "complete": [s for s, _ in integrity.complete_checkpoints(run)],
    }
    from inquire_lib import pipeline

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_ARTIFACTS", env["INQUIRE_ARTIFACTS"])
        mp.setenv("INQUIRE_CACHE", env["INQUIRE_CACHE"])
        after_final["listed"] = pipeline.available_checkpoints(profile)
        try:
            pipeline.checkpoint_path(profile, "sft_weak")
        except FileNotFoundError as exc:
            after_final["error"] = str(exc)
    # 3. resume once more, in this process, to the end
    with pytest.MonkeyPatch.context() as mp:
        for key in ("INQUIRE_ARTIFACTS", "INQUIRE_CACHE", "CI"):
            mp.setenv(key, env[key])
        torch.set_num_threads(1)
        done = sft(profile, name="sft_weak", max_steps=4, resume=True)
    seconds = time.time() - t0
    print(f"\nkill tests: two killed smoke SFT subprocesses and the resumed run took {seconds:.1f} s")
    return {
        "root": root,
        "env": env,
        "run": run,
        "save": save,
        "after_save": after_save,
        "final": final,
        "after_final": after_final,
        "done": done,
        "seconds": seconds,
    }


def test_kill_during_checkpoint_save_then_resume_from_the_last_complete(killed):
    assert killed["save"].returncode == -signal.SIGKILL, killed["save"].stderr[-2000:]
    after = killed["after_save"]
    assert after["checkpoints"] == ["checkpoint-2", "checkpoint-4"]
    # the half-saved checkpoint-4 is what transformers alone would resume from; ours skips it
    assert after["transformers_pick"] == str(killed["run"] / "checkpoint-4")
    assert after["complete"] == str(killed["run"] / "checkpoint-2")
    ran = _ran(killed["root"] / "artifacts", "sft_weak")
    assert ran[0] == [1, 2, 3, 4]
    assert ran[1] == [3, 4]  # resumed from step 2, not from the broken step 4
    assert "skipping incomplete checkpoint" in killed["final"].stderr


def test_kill_between_final_weights_and_metadata_leaves_no_final(killed):
    assert killed["final"].returncode == -signal.SIGKILL, killed["final"].stderr[-2000:]
    after = killed["after_final"]
    assert "final" not in after["entries"] and any(e.startswith(".final.") for e in after["entries"])
    assert after["complete"] == [2, 4]
    # neither listed as trained nor handed to an evaluation
    assert "sft_weak" not in after["listed"]
    assert after["error"] == (
        f"{killed['run'] / 'final'}: checkpoint 'sft_weak' has not been trained for profile 'smoke'"
    )


def test_resume_after_both_kills_finishes_with_final_and_metadata(killed):
    done = killed["done"]
    final = killed["run"] / "final"
    assert done.path == str(final) and integrity.verify(final) is None
    meta = json.loads((final / "inquire_train.json").read_text())
    assert meta["stage"] == "sft" and meta["steps"] == 4 and meta["adapter"] is True
    assert not any(p.name.startswith(".final.") for p in killed["run"].iterdir())  # the temp is gone
    # the log carries the steps of both killed processes, restored from the complete checkpoint-4
    assert [e["step"] for e in done.log_history if "loss" in e][:4] == [1, 2, 3, 4]


def test_final_weights_without_metadata_are_not_listed(tmp_path, monkeypatch):
    """What an older run killed between its weights and metadata left: not listed, not loadable."""
    from inquire_lib import pipeline
    from inquire_lib.profiles import get_profile

    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path))
    profile = get_profile("smoke").replace(base_agent_steps=0)
    final = tmp_path / "smoke" / "sft_weak" / "final"
    final.mkdir(parents=True)
    (final / "adapter_model.safetensors").write_bytes(b"w")
    (final / "adapter_config.json").write_text("{}")
    assert "sft_weak" not in pipeline.available_checkpoints(profile)
    with pytest.raises(FileNotFoundError, match="checkpoint 'sft_weak' is incomplete"):
        pipeline.checkpoint_path(profile, "sft_weak")


# ------------------------------------------------------------------------------ GRPO reuse
def test_grpo_reuse_keys_on_the_start_content_not_its_path(tmp_path):
    """A start retrained at the same path is another start: its finished GRPO run is not reused."""
    from inquire_lib.profiles import get_profile
    from inquire_lib.training import grpo

    profile = get_profile("smoke")
    start = tmp_path / "sft_weak" / "final"
    start.mkdir(parents=True)
    save_file({"w": torch.ones(4)}, start / "model.safetensors")
    (start / "config.json").write_text("{}")
    old = grpo.model_digest(str(start), profile)
    knobs = {"max_steps": 2}
    run = tmp_path / "grpo_weak"
    (run / "final").mkdir(parents=True)
    (run / "final" / "inquire_train.json").write_text(
        json.dumps(
            {
                "start": str(start),
                "start_digest": old,
                "rewards": ["format"],
                "n_examples": 3,
                "config": knobs,
                "prompts_digest": "p",
                "reward_params": {},
                "log_history": [{"step": 1}],
                "adapter": False,
                "seconds": 1.0,
                "samples": [],
            }
        )
    )
    integrity.write_marker(run / "final")
    assert grpo.finished_run(run, str(start), old, ["format"], knobs, 3, "p", {}).log_history == [{"step": 1}]
    save_file({"w": torch.zeros(4)}, start / "model.safetensors")  # retrained in place
    new = grpo.model_digest(str(start), profile)
    assert new != old
    assert grpo.finished_run(run, str(start), new, ["format"], knobs, 3, "p", {}) is None
    # a run recorded without the digest (older code) is never reused
    meta = json.loads((run / "final" / "inquire_train.json").read_text())
    del meta["start_digest"]
    (run / "final" / "inquire_train.json").write_text(json.dumps(meta))
    integrity.write_marker(run / "final")
    assert grpo.finished_run(run, str(start), old, ["format"], knobs, 3, "p", {}) is None
