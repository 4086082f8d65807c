"""The `inquire` command: build is deterministic, validate names the bad line and field."""

from __future__ import annotations

import json
import subprocess
import sys
import re
from pathlib import Path

import datasets
import pytest

from inquire_lib import cli
from inquire_lib.profiles import apply_overrides
from inquire_lib.data.benchmark import fingerprint
from inquire_lib.data.external import SAMPLES_DIR
from inquire_lib.runs.hardware import cpu_kind

FIXTURES = SAMPLES_DIR
TASKS = FIXTURES / "tasks_en.sample.jsonl"
GRPO = FIXTURES / "interactive_grpo.sample.jsonl"


def _fingerprint_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith("fingerprint: ")]
    assert len(lines) == 1, out
    return lines[0]


def test_build_twice_prints_the_same_fingerprint(tmp_path, capsys):
    out = tmp_path / "D"
    assert cli.main(["build", "--seed", "7", "--tasks", "60", "--out", str(out)]) == 0
    first = capsys.readouterr().out
    assert cli.main(["build", "--seed", "7", "--tasks", "60", "--out", str(out)]) == 0
    second = capsys.readouterr().out
    line = _fingerprint_line(first)
    assert re.fullmatch(r"fingerprint: [0-9a-f]{16}", line)
    assert _fingerprint_line(second) == line
    assert first == second  # stats lines too
    assert "train: 48 tasks" in first and "test: 12 tasks" in first
    assert "5 categories, 22 sub-categories, 24 safe tasks" in first
    assert f"written to {out}" in first
    # what was written is what was printed
    assert line == f"fingerprint: {fingerprint(datasets.load_from_disk(str(out)))}"
    assert json.loads((out / "inquirebench.json").read_text())["fingerprint"] == line.split()[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]


def test_build_train_values(tmp_path, capsys):
    """--train-values procedural changes the training split only; the default is "fixed"."""
    assert (
        cli.main(["build", "--seed", "7", "--tasks", "60", "--out", str(tmp_path / "F"), "--train-values", "fixed"])
        == 0
    )
    fixed = _fingerprint_line(capsys.readouterr().out)
    assert fixed == "fingerprint: c312df88948221a3"  # build_dataset(7, 60) before train_values existed
    assert (
        cli.main(
            ["build", "--seed", "7", "--tasks", "60", "--out", str(tmp_path / "P"), "--train-values", "procedural"]
        )
        == 0
    )
    assert _fingerprint_line(capsys.readouterr().out) != fixed
    a, b = datasets.load_from_disk(str(tmp_path / "F")), datasets.load_from_disk(str(tmp_path / "P"))
    assert fingerprint(datasets.DatasetDict(test=a["test"])) == fingerprint(datasets.DatasetDict(test=b["test"]))
    with pytest.raises(SystemExit) as exc:
        cli.main(["build", "--out", str(tmp_path / "X"), "--train-values", "composed"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.slow
def test_build_400_tasks_of_seed_7_keeps_its_fingerprint(tmp_path, capsys):
    """The README's example build: its fingerprint is pinned (the default training values)."""
    assert cli.main(["build", "--seed", "7", "--tasks", "400", "--out", str(tmp_path / "D")]) == 0
    assert _fingerprint_line(capsys.readouterr().out) == "fingerprint: 95510773c73f1320"


def test_validate_clean_fixture_exits_0(capsys):
    assert cli.main(["validate", str(TASKS)]) == 0
    out = capsys.readouterr().out
    assert "InquireMobile tasks: 10 rows, 10 ok, 0 skipped as bad" in out
    assert "intension" in out and "(= intent)" in out


def test_validate_grpo_fixture_reports_frames(capsys):
    assert cli.main(["validate", str(GRPO)]) == 0
    out = capsys.readouterr().out
    assert "4 rows, 4 ok" in out
    assert "inconsistent 1" in out and "original" in out


def _broken_copy(tmp_path: Path, line_no: int, key: str, value) -> Path:
    lines = TASKS.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[line_no - 1])
    row[key] = value
    lines[line_no - 1] = json.dumps(row, ensure_ascii=False)
    path = tmp_path / "tasks_broken.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("line_no,key,value", [(4, "need_login", "yes"), (7, "category", "danger"), (10, "apps", [])])
def test_validate_broken_row_names_line_and_field(tmp_path, capsys, line_no, key, value):
    path = _broken_copy(tmp_path, line_no, key, value)
    code = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code != 0
    assert f"{path}:{line_no}: field '{key}'" in err


def test_validate_skip_bad_lists_the_row(tmp_path, capsys):
    path = _broken_copy(tmp_path, 4, "need_login", "yes")
    assert cli.main(["validate", str(path), "--skip-bad"]) == 0
    out = capsys.readouterr().out
    assert "10 rows, 9 ok, 1 skipped as bad" in out and "bad line 4 field 'need_login'" in out


def test_validate_missing_file_exits_2(tmp_path, capsys):
    assert cli.main(["validate", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_unknown_command_exits_with_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_profile_prints_settings(capsys):
    assert cli.main(["profile", "smoke"]) == 0
    settings = json.loads(capsys.readouterr().out)
    assert settings["name"] == "smoke" and settings["benchmark_tasks"] == 36


def _explained(out: str) -> tuple[str, dict[str, tuple[str, str, str, str]]]:
    """The header and, per field, (value, source, affects, help) from `inquire profile --explain`."""
    lines = out.splitlines()
    fields = {}
    for head, help_line in zip(lines[1::2], lines[2::2]):
        m = re.fullmatch(r"(\w+) = (.*)  \[(default|profile|override)\]  \w+  affects: ([\w, ]+)", head)
        if m is None:
            break  # the legend of `affects` words follows the fields
        assert help_line.startswith("    ") and help_line.strip(), help_line
        fields[m[1]] = (m[2], m[3], m[4], help_line.strip())
    return lines[0], fields


def test_profile_explain_prints_help_value_source_and_affects(capsys):
    assert cli.main(["profile", "cpu", "--explain", "--set", "grpo_lr=1e-4", "--set", "sft_tasks=7"]) == 0
    out = capsys.readouterr().out
    header, fields = _explained(out)
    from inquire_lib.profiles import explain

    rows = explain(apply_overrides("cpu", {"grpo_lr": 1e-4, "sft_tasks": 7}))
    n = {s: sum(r["source"] == s for r in rows) for s in ("default", "profile")}
    assert header == (
        f"profile cpu: {len(rows)} fields, {n['default']} default, {n['profile']} from the profile, "
        "3 overridden (--set)"
    )  # the two --set fields and `overrides`, which records them
    assert len(fields) == len(rows) >= 100 and n["profile"] >= 30
    assert fields["grpo_lr"] == (
        "0.0001",
        "override",
        "grpo, task_grpo",
        "the learning rate of stages 2 and 3 (TRL: learning_rate)",
    )
    assert fields["sft_tasks"][:3] == ("7", "override", "data, sft, dagger")
    assert fields["sft_steps"][:2] == ("150", "profile")
    assert fields["seed"][:3] == ("0", "default", "data, tokenizer, base_agent, checkpoints, eval")
    assert fields["model"][:2] == ('"tiny:cpu"', "default")
    assert fields["cpu_bf16"][:2] == ("true", "profile")
    assert any(ln.startswith("  eval: the settings in every evaluation's read-back key") for ln in out.splitlines())
    # each field names the settings class that declares it
    assert "\nsft_steps = 150  [profile]  SFTSettings  affects: sft\n" in out
    assert "\nmax_episode_steps = 15  [default]  EvalSettings  affects: task_grpo, eval\n" in out


def test_profile_explain_of_smoke_without_overrides(capsys):
    assert cli.main(["profile", "smoke", "--explain"]) == 0
    header, fields = _explained(capsys.readouterr().out)
    assert header.endswith(", 0 overridden (--set)")
    assert fields["benchmark_tasks"][:2] == ("36", "profile") and fields["val_tasks"][:2] == ("4", "profile")
    assert fields["benchmark_tasks"][3].endswith("`test_split_tasks`) (here 29 + 7)")
    assert fields["lora_targets"][0] == '["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]'


def test_train_with_overrides_writes_into_the_run_they_name(tmp_path, capsys, monkeypatch):
    """`inquire train --set` trains into `artifacts/<profile>/runs/<the overrides' name>/`, as `inquire run`
    and a notebook opened with OVERRIDES do, never over the default run's checkpoint of the same name;
    without overrides, or with $INQUIRE_RUN_NAME set, the run is that one."""
    from types import SimpleNamespace

    from inquire_lib.runs.paths import artifacts_dir
    from inquire_lib.training import sft

    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path / "artifacts"))
    seen = []

    def fake_sft(profile, name, **_kw):
        seen.append(artifacts_dir(profile) / name)
        return SimpleNamespace(path=str(seen[-1]), log_history=[{"loss": 1.0}], n_examples=8, seconds=0.1)

    monkeypatch.setattr(sft, "sft", fake_sft)
    for env, argv in [
        (None, ["--set", "sft_lr=1e-4", "--set", "sft_steps=7"]),
        (None, []),
        ("mine", ["--set", "sft_lr=1e-4"]),
    ]:
        # empty counts as unset; monkeypatch's first record of it restores the caller's value (the CLI sets it)
        monkeypatch.setenv("INQUIRE_RUN_NAME", env or "")
        assert cli.main(["train", "sft", "--profile", "smoke", *argv]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1])["path"] == str(seen[-1])
    smoke = tmp_path / "artifacts" / "smoke"
    assert seen == [
        smoke / "runs" / "sft_lr=0.0001_sft_steps=7" / "sft_full",
        smoke / "sft_full",
        smoke / "runs" / "mine" / "sft_full",
    ]


def test_base_agent_command(tmp_path, capsys, monkeypatch):
    """`inquire base-agent`: stage 0 alone (the shipped copy or trained), --export writes the shipped
    copy with its manifest; refusals are one line."""
    from inquire_lib.training import sft, shipped

    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "assets")
    calls = []

    def fake_base_agent(profile, rebuild=None):
        calls.append((profile.name, profile.train_values, rebuild))
        out = tmp_path / "cache" / sft.base_agent_dir(profile).name
        out.mkdir(parents=True, exist_ok=True)
        (out / shipped.WEIGHTS).write_bytes(b"weights")
        (out / "config.json").write_text("{}")
        return str(out)

    monkeypatch.setattr(sft, "base_agent", fake_base_agent)
    monkeypatch.setattr("inquire_lib.training.models.model_path", lambda _p: str(tmp_path / "tok"))
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")

    assert cli.main(["base-agent", "--profile", "smoke"]) == 0
    assert capsys.readouterr().out.startswith("base agent: ")
    assert (
        cli.main(["base-agent", "--profile", "smoke", "--set", "train_values=procedural", "--rebuild", "--export"]) == 0
    )
    out = capsys.readouterr().out
    assert calls == [("smoke", "fixed", None), ("smoke", "procedural", True)]
    name = sft.base_agent_dir(apply_overrides("smoke", {"train_values": "procedural"})).name
    manifest = json.loads((tmp_path / "assets" / name / "manifest.json").read_text())
    assert f"sha256 {manifest['sha256']}" in out and manifest["train_values"] == "procedural"
    assert manifest["command"] == "inquire base-agent --profile smoke --set train_values=procedural --rebuild --export"
    # installed by its content key; an override's agent is no profile's own start
    shaped = apply_overrides("smoke", {"train_values": "procedural"})
    assert manifest["key"] == sft.base_agent_key(shaped) and name == f"base-agent-{manifest['key']}"
    assert manifest["profile"] == "" and manifest["settings"]["train_values"] == "procedural"
    assert "seconds" not in manifest  # the fake agent has no trainer record
    assert (
        "device" not in manifest and manifest["exported_on"]["cpu_kind"] == cpu_kind()
    )  # so the exporter names its own
    # what the trainer recorded (threads, seconds) and the curriculum settings go into the manifest
    trained_on = {"cpu_kind": "avx2", "cpu_model": "elsewhere", "cpu_flags": ["avx2"]}
    record = {"seconds": 12.5, "torch_threads": 3, "device": trained_on}
    (tmp_path / "cache" / name / "inquire_train.json").write_text(json.dumps(record))
    assert (
        cli.main(["base-agent", "--profile", "smoke", "--set", "train_values=procedural", "--rebuild", "--export"]) == 0
    )
    manifest = json.loads((tmp_path / "assets" / name / "manifest.json").read_text())
    assert (manifest["seconds"], manifest["torch_threads"]) == (12.5, 3)
    assert manifest["device"] == trained_on and "exported_on" not in manifest  # the training machine, not this one
    assert not set(cli.STAGE0_RECORDED) & set(manifest)  # smoke leaves stage 0's data and start at their defaults
    sets = ["--set", "train_values=procedural", "--set", "base_agent_tasks=5", "--set", "open_oversample=3"]
    assert cli.main(["base-agent", "--profile", "smoke", *sets, "--rebuild", "--export"]) == 0
    name = sft.base_agent_dir(
        apply_overrides("smoke", {"train_values": "procedural", "base_agent_tasks": 5, "open_oversample": 3})
    ).name
    manifest = json.loads((tmp_path / "assets" / name / "manifest.json").read_text())
    assert {k: manifest.get(k) for k in cli.STAGE0_RECORDED} == {
        "base_agent_init": None,
        "base_agent_tasks": 5,
        "copy_drill_tasks": None,
        "recovery_drill_tasks": None,
        "open_oversample": 3,
    }

    for argv, pattern in [
        (["base-agent", "--profile", "nope"], r"^inquire base-agent: unknown profile 'nope'; choose one of "),
        (["base-agent", "--profile", "gpu"], r"^inquire base-agent: profile gpu starts from .* it has no stage 0$"),
        (
            ["base-agent", "--profile", "smoke", "--set", "train_values=x"],
            r"^inquire base-agent: profile field 'train_values' takes one of fixed, procedural, got 'x'$",
        ),
    ]:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and re.match(pattern, err), err


def test_a_reader_that_stops_early_gets_no_error_line():
    """`inquire profile cpu --explain | head -2`: the pipe closes before the output ends; the command says
    nothing on stderr and exits 0."""
    cmd = f"{sys.executable} -m inquire_lib.cli profile cpu --explain | head -2"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0].startswith("profile cpu: ") and len(done.stdout.splitlines()) == 2
    assert done.stderr == "" and done.returncode == 0


def test_a_later_stage_ships_what_all_its_sittings_saw_and_cost():
    from inquire_lib.training.shipped_stages import later_extent

    small = apply_overrides("small", {})
    # stage 3 resumed from its third step: the record's episodes and seconds are the last sitting's
    resumed = {"seconds": 1293.1, "seconds_total": 2241.3, "episodes": 8}
    assert later_extent("task_grpo", resumed, 4, small) == {
        "examples": 4 * 2 * 4,
        "examples_note": "episodes played",
        "seconds": 2241.3,
    }
    once = later_extent("grpo", {"seconds": 1463.0}, 30, small)
    assert (once["examples"], once["seconds"]) == (60, 1463.0)


@pytest.mark.slow
def test_evaluate_scores_named_checkpoints_into_the_run_the_overrides_name(tmp_path, capsys, monkeypatch):
    """`inquire evaluate`: a checkpoint is looked up by name in the default run's artifacts and scored at step and
    task level into the run its overrides name (here the older user), the tables printed with question quality;
    a checkpoint that does not exist is one line and exit 2."""
    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("INQUIRE_RUN_NAME", "")
    smoke = ["--profile", "smoke", "--set", "eval_tasks=2", "--set", "eval_inquiry_steps=2"]
    assert cli.main(["evaluate", "untrained", *smoke, "--run", "content"]) == 0
    assert cli.main(["evaluate", "untrained", *smoke, "--set", "user_answers=any", "--run", "older"]) == 0
    out = capsys.readouterr().out
    for run in ("content", "older"):
        metrics = tmp_path / "runs" / "smoke" / run / "metrics"
        step = json.loads((metrics / "step_untrained.json").read_text())
        task = json.loads((metrics / "task_untrained.json").read_text())
        assert step["overall"]["n"] > 0 and task["overall"]["n"] == 2
        assert {"asks_answered", "uiq"} <= set(task["overall"]) and {"asks_answered", "uiq"} <= set(step["overall"])
    assert out.count("| checkpoint | steps | format |") == 2 and out.count("| checkpoint | tasks | SR |") == 2
    assert "asks answered | UIQ |" in out
    assert cli.main(["evaluate", "grpo_full", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grpo_full" in err[0] and "has not been trained" in err[0]


def test_evaluate_asking_writes_both_families_curves_from_one_pass(tmp_path, capsys, monkeypatch):
    """`inquire evaluate --level asking`: both askers' curves on the test steps, their AUCs and the sentence read
    off them, into the run's metrics. The untrained smoke model never writes the fork, so learned asking never
    asks (AUC one half, all ties) while every step gets a confidence score."""
    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("INQUIRE_RUN_NAME", "")
    smoke = [
        "--profile",
        "smoke",
        "--set",
        "eval_tasks=2",
        "--set",
        "eval_inquiry_steps=2",
        "--set",
        "eval_max_new_tokens=12",
    ]
    assert cli.main(["evaluate", "untrained", *smoke, "--level", "asking", "--run", "asking"]) == 0
    out = capsys.readouterr().out
    c = json.loads((tmp_path / "runs" / "smoke" / "asking" / "metrics" / "asking_untrained.json").read_text())
    n = c["learned"]["n"]
    assert n > 0 and c["confidence"]["n"] == n and len(c["confidence"]["scores"]) == n
    assert c["learned"]["n_inquiry"] == c["confidence"]["n_inquiry"] > 0
    assert c["learned"]["fork_reached"] == 0 and c["learned"]["auc"]["value"] == 0.5
    assert c["device"]["cpu_kind"] and c["verdict"].startswith("untrained: AUC learned 0.50 (")
    assert "learned AUC" in out and c["verdict"] in out


@pytest.mark.slow
def test_evaluate_choose_plays_validation_and_reports_the_chosen_test_row(tmp_path, capsys, monkeypatch):
    """`inquire evaluate --level choose`: each checkpoint played online on the validation tasks (under the run's
    validation/ folder), the highest task SR chosen with a tie going to the earlier name, and the chosen one's
    test-split row once the run has played it there; a second choice reads every play back."""
    from inquire_lib.stages import evaluate as stage_evaluation
    from inquire_lib.training.models import model_path

    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("INQUIRE_RUN_NAME", "")
    smoke = ["--profile", "smoke", "--set", "val_tasks=2", "--set", "max_episode_steps=2"]
    smoke += ["--set", "eval_max_new_tokens=8", "--set", "eval_tasks=2", "--run", "choice"]
    twin = f"twin={model_path(apply_overrides('smoke', {}))}"
    assert cli.main(["evaluate", "untrained", twin, *smoke, "--level", "choose"]) == 0
    run = tmp_path / "runs" / "smoke" / "choice"
    choice = json.loads((run / "metrics" / "chain_choice.json").read_text())
    assert choice["validation_tasks"] == 2 and choice["chosen"] == "untrained" and choice["test"] is None
    assert list(choice["validation"]) == ["untrained", "twin"]
    assert choice["validation"]["untrained"] == choice["validation"]["twin"]  # the same weights: a tie
    assert set(choice["validation"]["twin"]) == {"success_rate", "isr", "unsafe_rate", "needless_rate"}
    val = json.loads((run / "validation" / "smoke" / "choice" / "metrics" / "task_twin.json").read_text())
    assert val["overall"]["n"] == 2 and not (run / "metrics" / "task_twin.json").exists()
    assert "chosen: untrained; on the test split: not played" in capsys.readouterr().out
    assert cli.main(["evaluate", "untrained", *smoke, "--level", "task"]) == 0
    monkeypatch.setattr(stage_evaluation, "loaded", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("loaded")))
    assert cli.main(["evaluate", "untrained", twin, *smoke, "--level", "choose"]) == 0
    choice = json.loads((run / "metrics" / "chain_choice.json").read_text())
    test = json.loads((run / "metrics" / "task_untrained.json").read_text())["overall"]
    assert choice["test"]["success_rate"] == test["success_rate"] and choice["test"]["unsafe_rate"]["value"] is not None
