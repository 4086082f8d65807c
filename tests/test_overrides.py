"""Profile overrides: typed parsing, one-line refusals naming the key, default run names, and the
`inquire run --set/--name` and `inquire profile --set` front ends (refused before any kernel starts)."""

from __future__ import annotations

import json

import pytest

from inquire_lib import cli
from inquire_lib.profiles import (
    OverrideError,
    apply_overrides,
    check_overrides,
    default_run_name,
    get_profile,
    overridable_fields,
    parse_overrides,
)
from inquire_lib.runs import paths
from inquire_lib.training.sft import base_agent_dir, base_agent_key, run_key, stage_inquiry_share


def test_parse_overrides_types_every_kind():
    got = parse_overrides(
        [
            "grpo_lr=1e-4",
            "missed_penalty=2",
            "grpo_steps=30",
            "use_a11y=false",
            "model=tiny:cpu",
            "reward_weights=format:1,action:1,inquiry:2",
            "train_seed=none",
            "lora_targets=q_proj,v_proj",
            "grpo_followup_share=0.25",
        ]
    )
    assert got == {
        "grpo_lr": 0.0001,
        "missed_penalty": 2.0,
        "grpo_steps": 30,
        "use_a11y": False,
        "model": "tiny:cpu",
        "reward_weights": {"format": 1.0, "action": 1.0, "inquiry": 2.0},
        "train_seed": None,
        "lora_targets": ("q_proj", "v_proj"),
        "grpo_followup_share": 0.25,
    }
    assert isinstance(got["missed_penalty"], float) and isinstance(got["grpo_steps"], int)
    assert parse_overrides(["grpo_lr=1", "grpo_lr=3e-4"]) == {"grpo_lr": 0.0003}  # the last one wins
    assert parse_overrides(["grpo_followup_share=none"]) == {"grpo_followup_share": None}


@pytest.mark.parametrize(
    "items,pattern",
    [
        (
            ["grpo_lrr=1e-4"],
            r"^unknown profile field 'grpo_lrr' \(did you mean grpo_lr\?\); valid fields: a11y_coords, .*grpo_lr, ",
        ),
        (["grpo_lr=abc"], r"^profile field 'grpo_lr' takes a float, got 'abc'$"),
        (["grpo_steps=2.5"], r"^profile field 'grpo_steps' takes an int, got '2.5'$"),
        (["grpo_followup_share=half"], r"^profile field 'grpo_followup_share' takes a float or none, got 'half'$"),
        (["use_a11y=maybe"], r"^profile field 'use_a11y' takes a bool \(true/false\), got 'maybe'$"),
        (["name=cpu"], r"^unknown profile field 'name'"),
        (["reward_weights=1,1,2"], r"^profile field 'reward_weights' takes name:value pairs"),
        (["grpo_lr"], r"^override 'grpo_lr' is not KEY=VALUE"),
    ],
)
def test_bad_overrides_fail_in_one_line_naming_the_key(items, pattern):
    with pytest.raises(OverrideError, match=pattern) as info:
        parse_overrides(items)
    assert "\n" not in str(info.value)


def test_python_values_are_checked_as_strictly():
    assert check_overrides({"missed_penalty": 2, "grpo_steps": 3}) == {"grpo_steps": 3, "missed_penalty": 2.0}
    for bad, pattern in [
        ({"grpo_lr": "1e-4"}, "'grpo_lr' takes a float, got '1e-4'"),
        ({"grpo_steps": True}, "'grpo_steps' takes an int, got True"),
        ({"use_think": 1}, "'use_think' takes a bool, got 1"),
        ({"reward_weights": {"format": "x"}}, "'reward_weights' takes a list of float"),
        ({"reward_weights": [1.0]}, "'reward_weights' takes a non-empty dict of str to float"),
        ({"lora_targets": ["q", 1]}, "'lora_targets' takes a list of str"),
        ({"nope": 1}, "unknown profile field 'nope'"),
    ]:
        with pytest.raises(OverrideError, match=pattern):
            check_overrides(bad)
    with pytest.raises(OverrideError, match="must be a dict"):
        check_overrides([("grpo_lr", 1e-4)])
    assert not {"name", "overrides"} & set(overridable_fields())
    assert len(overridable_fields()) == len(get_profile("cpu").to_dict()) - 2
    with pytest.raises(OverrideError, match="unknown profile field 'overrides'"):
        check_overrides({"overrides": []})


def test_apply_overrides_records_them_and_keeps_the_rest():
    smoke = get_profile("smoke")
    p = apply_overrides("smoke", {"grpo_lr": 1e-4, "missed_penalty": 2})
    assert (p.grpo_lr, p.missed_penalty, p.overrides) == (1e-4, 2.0, (("grpo_lr", 1e-4), ("missed_penalty", 2.0)))
    assert p.replace(grpo_lr=smoke.grpo_lr, missed_penalty=smoke.missed_penalty, overrides=()) == smoke
    assert apply_overrides("smoke", None) is smoke and apply_overrides("smoke", {}) is smoke
    # an internal replace (an ablation variant) keeps the recorded overrides
    assert p.replace(use_a11y=False).overrides == p.overrides
    assert p.to_dict()["overrides"] == (("grpo_lr", 1e-4), ("missed_penalty", 2.0))


def test_default_run_names():
    assert default_run_name(None) == default_run_name({}) == "default"
    assert default_run_name({"missed_penalty": 2, "grpo_lr": 1e-4}) == "grpo_lr=0.0001_missed_penalty=2"
    assert default_run_name({"model": "org/model name"}) == "model=org-model-name"
    assert default_run_name({"torch_threads": 1}) == "default"  # threads change the speed, not the result
    assert default_run_name({"torch_threads": 1, "grpo_lr": 1e-4}) == "grpo_lr=0.0001"
    long_a = default_run_name({"model": "x" * 100})
    long_b = default_run_name({"model": "x" * 100 + "y"})
    assert len(long_a) == 80 and long_a != long_b and long_a[:71] == long_b[:71]
    for name in ("default", "grpo_lr=0.0001_missed_penalty=2", long_a):
        assert paths.check_run_name(name) == name
    for bad in ("", "../up", ".hidden", "a/b", "x" * 121):
        with pytest.raises(ValueError, match="run name"):
            paths.check_run_name(bad)


def test_runs_keep_their_folders_apart(monkeypatch, tmp_path):
    for variable, _ in paths.FOLDERS.values():
        monkeypatch.setenv(variable, str(tmp_path / variable))
    monkeypatch.delenv(paths.RUN_NAME[0], raising=False)
    assert paths.run_name() == "default"
    assert paths.artifacts_dir("smoke") == tmp_path / "INQUIRE_ARTIFACTS" / "smoke"
    assert paths.figures_dir("smoke") == tmp_path / "INQUIRE_FIGURES" / "smoke"
    monkeypatch.setenv(paths.RUN_NAME[0], "a")
    assert paths.run_dir("smoke") == tmp_path / "INQUIRE_RUNS" / "smoke" / "a"
    assert paths.artifacts_dir("smoke") == tmp_path / "INQUIRE_ARTIFACTS" / "smoke" / "runs" / "a"
    assert paths.figures_dir("smoke") == tmp_path / "INQUIRE_FIGURES" / "smoke" / "runs" / "a"
    assert paths.run_dir("smoke", name="b") == tmp_path / "INQUIRE_RUNS" / "smoke" / "b"
    monkeypatch.setenv(paths.RUN_NAME[0], "../escape")
    with pytest.raises(ValueError, match="run name"):
        paths.run_dir("smoke")


def test_the_base_agent_is_named_by_the_content_of_its_settings(monkeypatch, tmp_path):
    """One folder per resolved stage-0 settings, however the profile was made: an override, a `replace` or an
    edited default of a shaping field all name another folder; a field of a later stage never does."""
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    smoke = get_profile("smoke")
    plain = base_agent_dir(smoke)
    assert plain == tmp_path / "models" / f"base-agent-{base_agent_key(smoke)}" and len(base_agent_key(smoke)) == 12
    assert base_agent_dir(apply_overrides("smoke", {"grpo_lr": 1e-4, "sft_lr": 1e-3})) == plain
    assert base_agent_dir(smoke.replace(torch_threads=7, eval_tasks=3)) == plain
    shaped = base_agent_dir(apply_overrides("smoke", {"base_agent_steps": 8}))
    assert shaped != plain and shaped == base_agent_dir(smoke.replace(base_agent_steps=8))
    assert base_agent_dir(apply_overrides("smoke", {"base_agent_steps": 9})) != shaped
    # setting a field to the value it has is the same agent: the key reads values, not how they were set
    assert base_agent_dir(apply_overrides("smoke", {"base_agent_steps": smoke.base_agent_steps})) == plain
    assert base_agent_dir(smoke.replace(use_a11y=False)) != plain
    assert base_agent_dir(smoke.replace(seed=1)) != plain
    # the parent is part of the key: the same settings continued from another agent are another agent
    assert base_agent_dir(smoke.replace(base_agent_init="base-agent-x")) != plain


def test_small_starts_from_its_shipped_curriculum_agent(monkeypatch, tmp_path):
    """small's stage-0 fields are its curriculum agent's, and the folder they name is the one shipped."""
    from inquire_lib.profiles import CPU_BASE_AGENT_CURRICULUM, SMALL_BASE_AGENT_CURRICULUM
    from inquire_lib.training import shipped

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    small, cpu = get_profile("small"), get_profile("cpu")
    assert {k: getattr(small, k) for k in SMALL_BASE_AGENT_CURRICULUM} == SMALL_BASE_AGENT_CURRICULUM
    for profile in (small, cpu):
        manifest = json.loads((shipped.SHIPPED_ROOT / base_agent_dir(profile).name / "manifest.json").read_text())
        assert manifest["key"] == base_agent_key(profile) and manifest["profile"] == profile.name
    assert base_agent_dir(apply_overrides(small, {"sft_steps": 5, "grpo_lr": 1e-4})) == base_agent_dir(small)
    more = base_agent_dir(apply_overrides(small, {"base_agent_steps": 60}))
    assert more != base_agent_dir(small)
    # the cpu curriculum continues the cpu profile's own agent, by the name that agent is cached under
    assert CPU_BASE_AGENT_CURRICULUM["base_agent_init"] == base_agent_dir(cpu).name


def test_train_values_is_checked_and_shapes_the_base_agent(monkeypatch, tmp_path):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    assert get_profile("smoke").train_values == "fixed" and get_profile("cpu").train_values == "procedural"
    assert parse_overrides(["train_values=procedural"]) == {"train_values": "procedural"}
    with pytest.raises(OverrideError, match=r"^profile field 'train_values' takes one of fixed, procedural, got 'x'$"):
        parse_overrides(["train_values=x"])
    plain = base_agent_dir(get_profile("smoke"))
    assert base_agent_dir(apply_overrides("smoke", {"train_values": "fixed"})) == plain  # the value it has
    proc = base_agent_dir(apply_overrides("smoke", {"train_values": "procedural"}))
    # however the profile was made, the two settings never share a base agent
    assert proc != plain and base_agent_dir(get_profile("smoke").replace(train_values="procedural")) == proc


def test_cli_refuses_bad_settings_before_any_kernel(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path))
    assert cli.main(["run", "--profile", "smoke", "--set", "grpo_lrr=1e-4"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and err.startswith("inquire run: unknown profile field 'grpo_lrr'") and "grpo_lr," in err
    )
    assert cli.main(["run", "--profile", "smoke", "--set", "missed_penalty=high"]) == 2
    assert capsys.readouterr().err == "inquire run: profile field 'missed_penalty' takes a float, got 'high'\n"
    assert cli.main(["run", "--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err
    assert cli.main(["run", "--profile", "smoke", "--name", "../x"]) == 2
    assert "run name '../x'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_profile_shows_overrides(capsys):
    assert cli.main(["profile", "smoke", "--set", "grpo_lr=1e-4"]) == 0
    settings = json.loads(capsys.readouterr().out)
    assert settings["grpo_lr"] == 0.0001 and settings["overrides"] == [["grpo_lr", 0.0001]]
    assert settings["sft_steps"] == get_profile("smoke").sft_steps


def test_quick_is_served_by_smalls_shipped_base_agent_and_stages(monkeypatch, tmp_path):
    """`quick` keeps every setting that shapes `small`'s stages, so it finds the same shipped base agent and
    each stage's shipped result by content key (no training of its own but the short runs); an override
    that shapes stage 0 gives the agent `small` gets with it."""
    from inquire_lib.training import shipped_stages

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    quick, small = get_profile("quick"), get_profile("small")
    assert base_agent_dir(quick) == base_agent_dir(small) == tmp_path / "models" / "base-agent-162ff4abfc0b"
    assert (
        base_agent_dir(apply_overrides("quick", {"base_agent_steps": 8}))
        == base_agent_dir(apply_overrides("small", {"base_agent_steps": 8}))
        != base_agent_dir(small)
    )
    keys = {}
    for stage in ("sft_full", "sft_weak"):
        keys[stage] = run_key(quick, stage, quick.sft_steps, stage_inquiry_share(quick, stage))
    for stage, start in (("grpo_full", "sft_full"), ("grpo_weak", "sft_weak"), ("grpo_task", "grpo_full")):
        steps = quick.task_grpo_steps if stage == "grpo_task" else quick.grpo_steps
        keys[stage] = shipped_stages.stage_key(shipped_stages.stage_settings(quick, stage, steps, None), keys[start])
    shipped = {p.name for p in shipped_stages.STAGES_ROOT.iterdir()}
    assert {f"{stage}-{key}" for stage, key in keys.items()} <= shipped
    # how many GRPO seeds a run trains is not what one run is: the shipped stage serves any count
    seeds = apply_overrides("quick", {"grpo_seeds": 3})
    assert shipped_stages.stage_settings(seeds, "grpo_weak", seeds.grpo_steps, None) == shipped_stages.stage_settings(
        quick, "grpo_weak", quick.grpo_steps, None
    )
    # a setting that shapes stage 1 changes every key below it: nothing shipped is served for it
    other = apply_overrides("quick", {"sft_lr": 1e-4})
    assert f"sft_full-{run_key(other, 'sft_full', other.sft_steps, 1.0)}" not in shipped


def test_cli_refuses_an_unknown_field_in_one_line(capsys):
    assert cli.main(["profile", "smoke", "--set", "val_task=40"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown profile field 'val_task' (did you mean val_tasks?)" in err


def test_split_sizes_are_the_real_ones():
    cpu, smoke = get_profile("cpu"), get_profile("smoke")
    assert (cpu.benchmark_tasks, cpu.train_split_tasks, cpu.test_split_tasks) == (2120, 1696, 424)
    assert (smoke.benchmark_tasks, smoke.train_split_tasks, smoke.test_split_tasks) == (36, 29, 7)
    assert get_profile("cpu", benchmark_tasks=500).test_split_tasks == 100
