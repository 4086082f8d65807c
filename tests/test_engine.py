"""The evaluation engine switch (`eval_engine`) and the OpenVINO export's cache (`training.openvino`).

The export's cache and key are checked with optimum-intel's command replaced by one that writes a marked
file (the real one needs `.venv-export`); the real export and the engine's answers against HF's are the
slow tests at the end, skipped with their reason where `make install` has not installed OpenVINO."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from inquire_lib.evaluation.engine import ExportError, OpenVINOEngine, export_problem, open_engine
from inquire_lib.evaluation.steps import generate
from inquire_lib.profiles import apply_overrides, get_profile
from inquire_lib.runs.integrity import MARKER, read_marker, write_marker
from inquire_lib.stages import evaluate as stage_evaluation
from inquire_lib.training import openvino

SMOKE = get_profile("smoke")
KEY_A, KEY_B = "a" * 64, "b" * 64


def test_eval_engine_is_hf_but_on_small_and_takes_only_the_two_engines():
    assert (
        SMOKE.eval_engine == get_profile("cpu").eval_engine == "hf" and get_profile("small").eval_engine == "openvino"
    )
    assert apply_overrides(SMOKE, {"eval_engine": "openvino"}).eval_engine == "openvino"
    with pytest.raises(ValueError, match="eval_engine.*one of hf, openvino"):
        apply_overrides(SMOKE, {"eval_engine": "vllm"})


def _marked_export(folder: Path, key: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "openvino_language_model.xml").write_text("<net/>")
    write_marker(folder, source_key=key)
    return folder


def test_an_export_of_another_checkpoint_is_refused_with_one_line_naming_its_marker(tmp_path):
    folder = _marked_export(tmp_path / "export", KEY_A)
    assert export_problem(folder, KEY_A) is None
    problem = export_problem(folder, KEY_B)
    assert problem.startswith(f"{folder / MARKER}: exported from another checkpoint (source_key aaaaaaaaaaaa")
    assert "stale" in problem and "\n" not in problem
    with pytest.raises(ExportError) as raised:  # refused before OpenVINO is even imported
        open_engine(folder, KEY_B, eos_token_id=0)
    assert str(raised.value) == problem
    (folder / "openvino_language_model.xml").write_text("<net edited='1'/>")
    assert export_problem(folder, KEY_A).startswith(f"{folder / 'openvino_language_model.xml'}: ")
    (folder / MARKER).unlink()
    assert export_problem(folder, KEY_A) == f"{folder / MARKER}: missing or unreadable (the folder was not finished)"


def test_a_pass_that_needs_logits_is_refused_by_the_engine():
    engine = OpenVINOEngine(Path("."), None, eos_token_id=0, threads=1, kv_cache_precision="f32")
    with pytest.raises(ValueError, match="eval_engine openvino: a pass that reads or biases logits runs on HF"):
        generate(engine, None, [], SMOKE, ask_bias=2.0)
    with pytest.raises(ValueError, match="runs on HF"):
        generate(engine, None, [], SMOKE, logits_processor=lambda: None)
    assert engine.generate([], [], max_new_tokens=8, repetition_penalty=1.0) == []  # no episode left running


def test_the_played_digest_names_the_engine_and_keeps_hf_keys(monkeypatch):
    monkeypatch.setattr(stage_evaluation, "model_digest", lambda path, profile: "m")
    monkeypatch.setattr(stage_evaluation, "engine_precision", lambda profile: "f32")
    ov = SMOKE.replace(eval_engine="openvino")
    assert stage_evaluation.played_digest(None, SMOKE, 0.0) == "m"  # HF: the key of before
    assert stage_evaluation.played_digest(None, ov, 0.0) == "m+engine=openvino"
    assert stage_evaluation.played_digest(None, ov, 2.0) == "m+ask_bias=2.0"  # a bias plays on HF
    monkeypatch.setattr(stage_evaluation, "engine_precision", lambda profile: "bf16")
    assert stage_evaluation.played_digest(None, ov, 0.0) == "m+engine=openvino+precision=bf16"
    assert stage_evaluation.played_digest(None, SMOKE, 0.0) == "m"


@pytest.mark.parametrize("hf_bf16, precision", [(True, "bf16"), (False, "f32")])
def test_the_engine_computes_in_what_the_hf_path_computes_in(monkeypatch, hf_bf16, precision):
    from inquire_lib.runs import hardware
    from inquire_lib.training.openvino import engine_precision

    monkeypatch.setattr(hardware, "eval_uses_bf16", lambda profile: hf_bf16)
    assert engine_precision(SMOKE) == precision


def test_an_engine_precision_it_does_not_have_is_refused():
    with pytest.raises(ValueError, match="engine precision 'fp16': one of f32, bf16"):
        open_engine(".", "k", eos_token_id=0, precision="fp16")


@pytest.mark.parametrize(
    "engine, bias, used",
    [("hf", 0.0, "hf"), ("openvino", 0.0, "openvino"), ("openvino", 1.5, "hf"), ("hf", 1.5, "hf")],
)
def test_evaluate_once_loads_the_engine_the_profile_names(monkeypatch, tmp_path, engine, bias, used):
    calls = []

    def loader(kind):
        @contextlib.contextmanager
        def load(profile, path):
            calls.append((kind, path))
            yield type("Held", (), {"model": kind, "processor": "processor"})()

        return load

    monkeypatch.setattr(stage_evaluation, "model_digest", lambda path, profile: "m")
    monkeypatch.setattr(stage_evaluation, "ask_bias_of", lambda path: bias)
    monkeypatch.setattr(stage_evaluation, "loaded", loader("hf"))
    monkeypatch.setattr(stage_evaluation, "engine_loaded", loader("openvino"))
    profile = SMOKE.replace(eval_engine=engine)
    out = stage_evaluation.evaluate_once(
        profile, "step", "ck", "/ck", "items", tmp_path, lambda model, proc, extra, b: {"model": model, **extra}
    )
    assert calls == [(used, "/ck")] and out["model"] == used and out["eval_engine"] == used
    assert len(out["eval_key"]) == 64


# ----------------------------------------------------------------------- the export's cache, on the tiny model
def _checkpoint(tmp_path: Path) -> Path:
    from inquire_lib.training.models import model_path

    ck = tmp_path / "ck"
    shutil.copytree(model_path(SMOKE), ck)
    return ck


def _edit_weights(ck: Path) -> None:
    from safetensors.torch import load_file, save_file

    (weights,) = ck.glob("*.safetensors")
    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, weights, metadata={"format": "pt"})


@pytest.mark.slow  # builds the tiny smoke model
def test_the_export_key_follows_the_checkpoints_content_not_its_place(tmp_path):
    ck = _checkpoint(tmp_path)
    key = openvino.export_key(SMOKE, str(ck))
    assert len(key) == 64 and openvino.export_key(SMOKE, str(ck)) == key
    shutil.copytree(ck, tmp_path / "elsewhere")
    assert openvino.export_key(SMOKE, str(tmp_path / "elsewhere")) == key
    assert openvino.export_key(SMOKE.replace(max_pixels=SMOKE.max_pixels * 2), str(ck)) != key
    config = json.loads((ck / "config.json").read_text())
    (ck / "config.json").write_text(json.dumps({**config, "note": 1}))
    by_config = openvino.export_key(SMOKE, str(ck))
    _edit_weights(ck)
    by_weights = openvino.export_key(SMOKE, str(ck))
    assert len({key, by_config, by_weights}) == 3
    assert openvino.export_dir(SMOKE, key) != openvino.export_dir(SMOKE, by_weights)
    assert openvino.export_dir(SMOKE, key).name == f"smoke-{key[:16]}"


@pytest.mark.slow  # builds the tiny smoke model and saves its scratch copy
def test_a_stale_export_is_rebuilt_and_a_current_one_reused(tmp_path, monkeypatch, capsys):
    made = []

    def exporter(cli, src, out, log):
        # what the real command is handed: a transformers-4 readable copy of this very checkpoint
        config = json.loads((src / "config.json").read_text())
        made.append(config["text_config"]["rope_scaling"])
        (out / "openvino_language_model.xml").write_text(json.dumps(config, sort_keys=True))

    cli = tmp_path / "optimum-cli"
    cli.write_text("")
    monkeypatch.setattr(openvino, "optimum_cli", lambda: cli)
    monkeypatch.setattr(openvino, "_run_exporter", exporter)
    ck = _checkpoint(tmp_path)
    first = openvino.export_openvino(SMOKE, str(ck))
    folder = Path(first["folder"])
    assert first["built"] is True and folder == openvino.export_dir(SMOKE, first["key"])
    assert read_marker(folder)["source_key"] == first["key"] and export_problem(folder, first["key"]) is None
    record = json.loads((folder / openvino.RECORD).read_text())
    assert record["source_key"] == first["key"] and record["weight_format"] == "fp32"
    assert "transformers==4.57.6" in record["exporter"] and first["bytes"] > 0
    assert made[0]["type"] == "mrope" and len(made[0]["mrope_section"]) == 3
    assert not list(folder.parent.glob(".source.*"))  # the scratch copy is gone
    again = openvino.export_openvino(SMOKE, str(ck))
    assert again["built"] is False and again["folder"] == first["folder"] and len(made) == 1
    _edit_weights(ck)  # the checkpoint changed: its old export is never used
    changed = openvino.export_openvino(SMOKE, str(ck))
    assert changed["built"] is True and changed["key"] != first["key"] and changed["folder"] != first["folder"]
    assert export_problem(folder, changed["key"]).startswith(f"{folder / MARKER}: exported from another checkpoint")
    # a folder given by hand that holds the old export is made again, saying why
    capsys.readouterr()
    into = openvino.export_openvino(SMOKE, str(ck), out=folder)
    assert into["built"] is True and read_marker(folder)["source_key"] == changed["key"] and len(made) == 3
    assert capsys.readouterr().err.startswith(f"re-exporting: {folder / MARKER}: exported from another checkpoint")


def test_a_missing_exporter_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_EXPORT_VENV", str(tmp_path / "no-venv"))
    monkeypatch.setattr(openvino, "export_key", lambda profile, path, base=None: KEY_A)
    with pytest.raises(ExportError) as raised:
        openvino.export_openvino(SMOKE, "/ck", out=tmp_path / "out")
    assert str(raised.value) == (
        f"{tmp_path / 'no-venv' / 'bin' / 'optimum-cli'}: missing; `make install` installs the exporter's "
        "environment (.venv-export)"
    )
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ the real exporter and engine
REAL = pytest.mark.skipif(
    importlib.util.find_spec("openvino_genai") is None or not openvino.optimum_cli().is_file(),
    reason="OpenVINO GenAI or the exporter's .venv-export is not installed (make install installs both)",
)


@pytest.mark.slow
@REAL
def test_the_engine_answers_as_hf_on_the_tiny_model_in_steps_and_tasks():
    from inquire_lib.data.benchmark import held_out_tasks, test_records
    from inquire_lib.evaluation.episodes import model_policy, run_episodes
    from inquire_lib.training.models import loaded

    # fp32 on both sides (smoke trains in 4-bit; the export is fp32 whatever the profile loads in)
    profile = SMOKE.replace(eval_max_new_tokens=12, max_episode_steps=2, torch_threads=2, load_in_4bit=False)
    records = test_records(profile)[:8]
    tasks = held_out_tasks(profile, 3)
    with loaded(profile, None) as m:
        hf = generate(m.model, m.processor, records, profile, progress=False)
        hf_play = run_episodes(model_policy(m.model, m.processor, profile), tasks, profile)
    with openvino.engine_loaded(profile.replace(eval_engine="openvino"), None) as m:
        assert m.model.engine == "openvino" and m.model.kv_cache_precision == "f32"
        ov = generate(m.model, m.processor, records, profile, progress=False)
        ov_play = run_episodes(model_policy(m.model, m.processor, profile), tasks, profile)
    assert sum(a == b for a, b in zip(ov, hf)) == len(records) == 8
    raw = lambda play: [[st["raw_output"] for st in ep["steps"]] for ep in play]  # noqa: E731
    assert raw(ov_play) == raw(hf_play) and sum(map(len, raw(ov_play))) >= len(tasks)
    again = openvino.export_openvino(profile, None)  # made by engine_loaded above, reused now
    assert again["built"] is False and export_problem(again["folder"], again["key"]) is None


@pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino-genai is not installed")
@pytest.mark.parametrize(
    ("kind", "threads", "precision", "opened_on"),
    [("amx", 1, "bf16", 2), ("amx", 1, "f32", 1), ("amx", 2, "bf16", 2), ("avx512_bf16", 1, "bf16", 1)],
)
def test_a_bf16_pipeline_on_one_thread_of_an_amx_cpu_opens_on_two(
    tmp_path, monkeypatch, kind, threads, precision, opened_on
):
    """The CPU plugin dies of a divide error opening bf16 on one thread of an AMX CPU (docs/lab/log.md, 2026-12-06):
    there the engine asks for two threads, for the language model and the vision tower alike; elsewhere it keeps
    what it was given."""
    import openvino_genai

    from inquire_lib.evaluation import engine

    seen = {}

    def pipeline(folder, scheduler, device, props, vision_encoder_properties):
        seen.update(props=props, vision=vision_encoder_properties)
        return object()

    monkeypatch.setattr(engine, "export_problem", lambda folder, key: None)
    monkeypatch.setattr(engine, "cpu_kind", lambda: kind)
    monkeypatch.setattr(openvino_genai, "ContinuousBatchingPipeline", pipeline)
    opened = open_engine(tmp_path, "k", eos_token_id=2, threads=threads, precision=precision)
    assert opened.threads == opened_on
    assert seen["props"]["INFERENCE_NUM_THREADS"] == seen["vision"]["INFERENCE_NUM_THREADS"] == opened_on
    assert seen["props"]["INFERENCE_PRECISION_HINT"] == precision
