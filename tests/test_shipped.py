"""Shipped base agents: installed only when the weights' and the tokenizer's hashes match; stage 0
starts from a shipped copy unless asked to rebuild."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from inquire_lib.profiles import SMALL_BASE_AGENT_CURRICULUM, apply_overrides, get_profile
from inquire_lib.runs.integrity import is_complete
from inquire_lib.training import models, sft, shipped

pytestmark = pytest.mark.slow  # builds a tiny model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    return models.build_tiny_model(tmp_path_factory.mktemp("m") / "tiny-smoke", "smoke")


def test_export_then_install_gives_the_same_weights(tiny, tmp_path):
    from transformers import AutoModelForImageTextToText

    root = tmp_path / "assets"
    manifest = shipped.export(tiny, tiny, "agent", command="inquire base-agent --profile smoke", seed=0, root=root)
    assert manifest["sha256"] == shipped.sha256_file(root / "agent" / shipped.WEIGHTS)
    assert manifest["bytes"] <= shipped.MAX_BYTES and manifest["command"] and "code_version" in manifest
    assert json.loads((root / "agent" / "manifest.json").read_text()) == manifest
    dest = tmp_path / "cache" / "base"
    assert shipped.install("agent", tiny, dest, root=root)
    a = AutoModelForImageTextToText.from_pretrained(tiny).state_dict()
    b = AutoModelForImageTextToText.from_pretrained(dest).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((dest / "inquire_train.json").read_text())["shipped"]["sha256"] == manifest["sha256"]
    assert is_complete(dest) and shipped.is_shipped_copy(dest)  # a cache the workbench serves as it is
    assert not shipped.is_shipped_copy(tiny)


def test_install_refuses_a_changed_file_another_tokenizer_or_nothing(tiny, tmp_path):
    root = tmp_path / "assets"
    shipped.export(tiny, tiny, "agent", command="c", seed=0, root=root)
    assert not shipped.install("missing", tiny, tmp_path / "x", root=root)
    other_tok = tmp_path / "tok"
    other_tok.mkdir()
    (other_tok / "tokenizer.json").write_text("{}")
    assert not shipped.install("agent", other_tok, tmp_path / "y", root=root)
    assert not shipped.install("agent", tmp_path / "no-tokenizer", tmp_path / "y", root=root)
    weights = root / "agent" / shipped.WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert not shipped.install("agent", tiny, tmp_path / "z", root=root)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists() and not (tmp_path / "z").exists()


def test_export_refuses_weights_above_the_limit(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "MAX_BYTES", 10)
    with pytest.raises(ValueError, match="more than the 10"):
        shipped.export(tiny, tiny, "agent", command="c", seed=0, root=tmp_path / "assets")
    assert not (tmp_path / "assets").exists()


def _smoke_stage0(tmp_path, monkeypatch):
    """The smoke profile with its cache and shipped agents under `tmp_path`: (profile, tokenizer folder, the
    base agent's folder name)."""
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("INQUIRE_REBUILD_BASE_AGENT", raising=False)
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "assets")
    smoke = get_profile("smoke")
    return smoke, models.model_path(smoke), sft.base_agent_dir(smoke).name


def test_base_agent_starts_from_a_shipped_copy_unless_rebuilt(tmp_path, monkeypatch):
    smoke, tok, name = _smoke_stage0(tmp_path, monkeypatch)
    shipped.export(tok, tok, name, command="c", seed=0)  # the untrained tiny model stands in for a base agent
    trained = []

    def no_training(*_a, **_k):
        trained.append(1)
        raise RuntimeError("trained")

    monkeypatch.setattr(sft, "_run_sft", no_training)
    path = sft.base_agent(smoke)
    assert path == str(tmp_path / "cache" / "models" / name) and not trained
    assert (
        json.loads((tmp_path / "cache" / "models" / name / "inquire_train.json").read_text())["stage"] == "base_agent"
    )
    assert sft.base_agent(smoke) == path and not trained  # served from the cache from now on
    # rebuilding trains, even over the installed copy, and so does $INQUIRE_REBUILD_BASE_AGENT
    with pytest.raises(RuntimeError, match="trained"):
        sft.base_agent(smoke, rebuild=True)
    monkeypatch.setenv("INQUIRE_REBUILD_BASE_AGENT", "1")
    with pytest.raises(RuntimeError, match="trained"):
        sft.base_agent(smoke)
    monkeypatch.delenv("INQUIRE_REBUILD_BASE_AGENT")
    # a shipped copy whose hashes no longer match is not installed: stage 0 trains instead
    shutil.rmtree(path)
    (tmp_path / "assets" / name / shipped.WEIGHTS).write_bytes(b"tampered")
    with pytest.raises(RuntimeError, match="trained"):
        sft.base_agent(smoke)
    # another setting's base agent is another name: the default's shipped copy is never used for it
    assert sft.base_agent_dir(smoke.replace(train_values="procedural")).name != name


def test_base_agent_trains_with_its_own_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "assets")
    seen = []

    def capture(profile, *_a, **_k):
        seen.append(profile.torch_threads)
        raise RuntimeError("trained")

    monkeypatch.setattr(sft, "_run_sft", capture)
    monkeypatch.setattr(sft, "model_path", lambda _p: str(tmp_path / "no-model"))
    smoke = get_profile("smoke")
    for profile in (smoke, smoke.replace(base_agent_threads=3)):
        with pytest.raises(RuntimeError, match="trained"):
            sft.base_agent(profile)
    assert seen == [smoke.torch_threads, 3]


def test_base_agent_continues_from_the_agent_base_agent_init_names(tmp_path, monkeypatch):
    """Stage 0 as a curriculum: `base_agent_init` names a shipped agent, installed through its hashes
    and handed to the trainer as the start; a name with no agent behind it is one line, not a traceback."""
    from inquire_lib.profiles import apply_overrides

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "assets")
    smoke = get_profile("smoke")
    tok = models.model_path(smoke)
    shipped.export(tok, tok, "first-part", command="c", seed=0)
    starts = []

    def capture(_profile, start, *_a, **_k):
        starts.append(start)
        raise RuntimeError("trained")

    monkeypatch.setattr(sft, "_run_sft", capture)
    cont = apply_overrides(smoke, {"base_agent_init": "first-part"})
    assert sft.base_agent_dir(cont).name != sft.base_agent_dir(smoke).name  # an agent of its own
    with pytest.raises(RuntimeError, match="trained"):
        sft.base_agent(cont)
    assert starts == [str(tmp_path / "cache" / "models" / "first-part")]
    assert (tmp_path / "cache" / "models" / "first-part" / shipped.WEIGHTS).read_bytes() == (
        tmp_path / "assets" / "first-part" / shipped.WEIGHTS
    ).read_bytes()
    with pytest.raises(RuntimeError, match="trained"):
        sft.base_agent(smoke)
    assert starts[-1] is None  # from scratch without it
    with pytest.raises(FileNotFoundError, match="base_agent_init='nothing': no complete base agent"):
        sft.base_agent(apply_overrides(smoke, {"base_agent_init": "nothing"}))


def test_a_pretrained_base_agent_continues_its_own_adapter(tmp_path, monkeypatch):
    """With a pretrained model, `base_agent_init` hands the trainer the earlier agent's adapter (LoRA and
    vision tower) to train further on the graft, not its merged weights under a new adapter."""
    from inquire_lib.runs.integrity import write_marker

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "assets")
    monkeypatch.setattr(sft, "model_path", lambda _p: str(tmp_path / "graft"))
    monkeypatch.setattr(sft, "stage0_records", lambda _p: None)
    earlier = tmp_path / "cache" / "models" / "earlier-small"
    (earlier / shipped.ADAPTER).mkdir(parents=True)
    (earlier / shipped.ADAPTER / "adapter_config.json").write_text("{}")
    write_marker(earlier)
    seen = []

    def capture(profile, start, *_a, **k):
        seen.append((profile.lora, start, k["modules_to_save"]))
        raise RuntimeError("trained")

    monkeypatch.setattr(sft, "_run_sft", capture)
    small = get_profile("small").replace(base_agent_init="")  # a first agent: a new adapter on the graft
    for profile in (apply_overrides(small, {"base_agent_init": "earlier-small"}), small):
        with pytest.raises(RuntimeError, match="trained"):
            sft.base_agent(profile)
    assert seen == [(True, str(earlier / shipped.ADAPTER), ("visual",)), (True, None, ("visual",))]


# the first 6 safe tasks of the test split (21 steps): the shipped agent gets 15 right (0.71) with
# greedy decoding; the 400-step agent it replaced got about half of such steps, an untrained one none
SAFE_TASKS = 6
MIN_SAFE_STEP_ACCURACY = 0.6


def test_the_cpu_profile_ships_a_base_agent_that_acts(tmp_path):
    """The committed stage-0 agent of the cpu profile installs through its hashes (weights and the
    tokenizer this machine builds) and acts: greedy tool calls on every step of a few held-out safe
    tasks (held-out phrasings and values) are well formed and mostly right."""
    import datasets

    from inquire_lib.data.benchmark import FEATURES, generate_tasks, task_records
    from inquire_lib.evaluation.steps import evaluate_model

    profile = get_profile("cpu")
    name = sft.base_agent_dir(profile).name
    manifest = json.loads((shipped.SHIPPED_ROOT / name / "manifest.json").read_text())
    assert (manifest["steps"], manifest["train_values"], manifest["seed"]) == (
        profile.base_agent_steps,
        "procedural",
        0,
    )
    assert manifest["bytes"] <= shipped.MAX_BYTES
    dest = tmp_path / name
    assert shipped.install(name, models.model_path(profile), dest), "the shipped agent's hashes do not match"
    safe = [t for t in generate_tasks(profile.seed, "test", 40) if not t.inquiry_required][:SAFE_TASKS]
    rows = datasets.Dataset.from_list([r for t in safe for r in task_records(t)], features=FEATURES)
    model, processor = models.load_checkpoint(profile, str(dest))
    m = evaluate_model("shipped", model, processor, profile, list(rows), out_root=tmp_path / "runs", progress=False)
    o = m["overall"]
    assert o["format"]["value"] >= 0.95 and o["step_accuracy"]["n"] >= 3 * SAFE_TASKS
    assert o["step_accuracy"]["value"] >= MIN_SAFE_STEP_ACCURACY, o["step_accuracy"]


def test_an_adapter_ships_alone_and_installs_through_its_merge(tiny, tmp_path):
    """A pretrained model's base agent ships its adapter (`adapter/` of the cached agent), never the merged
    weights; installing hands the checked adapter to `merge`, and a changed adapter is refused."""
    agent = tmp_path / "agent-cache"
    shutil.copytree(tiny, agent)
    (agent / shipped.ADAPTER).mkdir()
    (agent / shipped.ADAPTER / shipped.ADAPTER_WEIGHTS).write_bytes(b"lora and vision tower" * 100)
    (agent / shipped.ADAPTER / "adapter_config.json").write_text('{"r": 16}')
    root = tmp_path / "assets"
    manifest = shipped.export(agent, tiny, "small-agent", command="c", seed=0, root=root)
    assert manifest["kind"] == "adapter" and manifest["file"] == shipped.ADAPTER_WEIGHTS and manifest["bytes"] == 2100
    assert sorted(p.name for p in (root / "small-agent").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "manifest.json",
    ]  # no merged weights
    merged = []

    def merge(adapter, out):
        merged.append(json.loads((adapter / "adapter_config.json").read_text()))
        shutil.copyfile(tiny / shipped.WEIGHTS, out / shipped.WEIGHTS)

    assert not shipped.install("small-agent", tiny, tmp_path / "no-merge", root=root)  # an adapter needs its merge
    dest = tmp_path / "cache" / "small-agent"
    assert shipped.install("small-agent", tiny, dest, root=root, merge=merge)
    assert merged == [{"r": 16}] and is_complete(dest) and shipped.is_shipped_copy(dest)
    assert (dest / shipped.ADAPTER / shipped.ADAPTER_WEIGHTS).read_bytes() == b"lora and vision tower" * 100
    (root / "small-agent" / shipped.ADAPTER_WEIGHTS).write_bytes(b"changed" * 300)
    assert not shipped.install("small-agent", tiny, tmp_path / "changed", root=root, merge=merge)
    assert len(merged) == 1 and not (tmp_path / "changed").exists()


def test_the_small_profile_ships_its_base_agent_as_an_adapter(tmp_path):
    """The committed stage-0 agent the small profile starts from (its curriculum) is its LoRA adapter and
    vision tower alone, trained with the profile's stage-0 settings; it installs through its hashes onto the
    graft built from the installed GGUF file, and the merged agent writes well-formed tool calls on held-out
    safe steps."""
    import datasets

    from inquire_lib.data.benchmark import FEATURES, generate_tasks, task_records
    from inquire_lib.evaluation.steps import evaluate_model

    profile = get_profile("small")
    name = sft.base_agent_dir(profile).name
    manifest = json.loads((shipped.SHIPPED_ROOT / name / "manifest.json").read_text())
    assert manifest["kind"] == "adapter" and manifest["file"] == shipped.ADAPTER_WEIGHTS
    assert (manifest["steps"], manifest["train_values"], manifest["seed"]) == (
        profile.base_agent_steps,
        "procedural",
        0,
    )
    assert (manifest["lr"], manifest["base_agent_init"], manifest["base_agent_tasks"]) == (
        profile.base_agent_lr,
        profile.base_agent_init,
        profile.base_agent_tasks,
    )
    assert manifest["bytes"] <= shipped.MAX_BYTES
    dest = tmp_path / name
    merge = lambda adapter, out: sft.merge_adapter(profile, adapter, out, publish=False)
    assert shipped.install(name, models.model_path(profile), dest, merge=merge), "the shipped adapter's hashes differ"
    assert is_complete(dest) and (dest / shipped.ADAPTER / shipped.ADAPTER_WEIGHTS).exists()
    safe = [t for t in generate_tasks(profile.seed, "test", 40) if not t.inquiry_required][:SAFE_TASKS]
    rows = datasets.Dataset.from_list([r for t in safe for r in task_records(t)], features=FEATURES)
    with models.loaded(profile, str(dest)) as m:
        metrics = evaluate_model(
            "shipped", m.model, m.processor, profile, list(rows), out_root=tmp_path / "runs", progress=False
        )
    assert metrics["overall"]["format"]["value"] >= 0.9, metrics["overall"]["format"]


@pytest.mark.parametrize("name", ["cpu", "small"])
def test_a_shipped_agent_records_the_key_and_settings_it_is_installed_by(name):
    """What `assets/` ships is exactly what a profile starts from: one agent per profile with stage 0, whose
    manifest records the content key its folder is named by and the resolved settings that made it."""
    profile = get_profile(name)
    manifest = json.loads((shipped.SHIPPED_ROOT / sft.base_agent_dir(profile).name / "manifest.json").read_text())
    assert manifest["key"] == sft.base_agent_key(profile) and manifest["name"] == f"base-agent-{manifest['key']}"
    assert manifest["settings"] == json.loads(json.dumps(sft.base_agent_settings(profile)))
    assert manifest["profile"] == name and manifest["bytes"] <= shipped.MAX_BYTES
    shipped_for = sorted(json.loads(p.read_text())["profile"] for p in shipped.SHIPPED_ROOT.glob("*/manifest.json"))
    assert shipped_for == ["cpu", "small"]
    if name == "small":
        assert {k: manifest[k] for k in ("base_agent_init", "base_agent_tasks", "open_oversample")} == {
            k: SMALL_BASE_AGENT_CURRICULUM[k] for k in ("base_agent_init", "base_agent_tasks", "open_oversample")
        }
        assert (manifest["steps"], manifest["lr"]) == (150, 2e-4)


def test_an_edited_stage0_default_names_a_new_folder_and_the_shipped_agent_is_refused_in_one_line(
    tmp_path, monkeypatch
):
    """A shipped agent is installed by its key only. When the profile's own settings no longer give that key (a
    default was edited), stage 0 neither reuses it nor trains silently for hours: one line names the manifest
    and the fields that differ. An override of a stage-0 field asks for another agent, and trains it."""
    smoke, tok, name = _smoke_stage0(tmp_path, monkeypatch)
    extra = {"key": sft.base_agent_key(smoke), "profile": "smoke", "settings": sft.base_agent_settings(smoke)}
    shipped.export(tok, tok, name, command="c", seed=0, extra=extra)
    monkeypatch.setattr(sft, "_run_sft", lambda *_a, **_k: (_ for _ in ()).throw(RuntimeError("trained")))
    assert sft.base_agent(smoke) == str(tmp_path / "cache" / "models" / name)  # installed by its key
    edited = smoke.replace(base_agent_steps=smoke.base_agent_steps + 1)  # as if the default were edited
    assert sft.base_agent_dir(edited).name != name
    with pytest.raises(shipped.StaleShippedAgent) as refused:
        sft.base_agent(edited)
    line = str(refused.value)
    assert "\n" not in line and str(tmp_path / "assets" / name / "manifest.json") in line
    assert f"base_agent_steps {smoke.base_agent_steps} -> {smoke.base_agent_steps + 1}" in line
    assert not sft.base_agent_dir(edited).exists()
    for asked in (apply_overrides(smoke, {"base_agent_steps": smoke.base_agent_steps + 1}), edited):
        with pytest.raises(RuntimeError, match="trained"):
            sft.base_agent(asked, rebuild=asked is edited)  # an override, or --rebuild: trained


def test_looking_the_base_agent_up_finds_or_installs_and_never_trains(tmp_path, monkeypatch):
    """`checkpoint_path(profile, "base_agent")` is a look-up: the cached agent, else the shipped copy installed;
    where neither is there it is one line naming the command that trains, and nothing is trained."""
    from inquire_lib.training.checkpoints import checkpoint_path

    smoke, tok, name = _smoke_stage0(tmp_path, monkeypatch)
    trained = []
    monkeypatch.setattr(sft, "_run_sft", lambda *_a, **_k: trained.append(1))
    with pytest.raises(FileNotFoundError, match=r"inquire base-agent --profile smoke"):
        checkpoint_path(smoke, "base_agent")
    assert not trained and not (tmp_path / "cache" / "models" / name).exists()
    shipped.export(tok, tok, name, command="c", seed=0)
    assert checkpoint_path(smoke, "base_agent") == str(tmp_path / "cache" / "models" / name)  # installed
    assert sft.find_base_agent(smoke) == checkpoint_path(smoke, "base_agent")  # then found in the cache
    assert not trained
