"""`inquire ship STAGE`: a later stage's result under assets/stages/ with its manifest: an SFT stage's finished
adapter or the last complete checkpoint of a run that has not finished (to go on from in another sitting), a GRPO
stage's or stage 3's finished result."""

from __future__ import annotations

import json
from pathlib import Path

from .common import UsageError, run_settings, settings_or_usage

# the command that trains a later stage, and the runs it starts from where the run's record names no other
LATER_COMMANDS = {"grpo": "grpo", "task_grpo": "task-grpo"}


def register(sub, debug) -> None:
    sh = sub.add_parser(
        "ship",
        help="ship a stage's result (or a run's last complete checkpoint) under assets/stages/ with its manifest",
        parents=[debug],
    )
    sh.add_argument(
        "stage",
        help="the stage whose result is shipped: sft_full, sft_weak, grpo_full, grpo_weak (and their seeds, "
        "e.g. grpo_weak_s1), grpo_task",
    )
    run_settings(sh, "the overrides the stage was trained with")
    sh.add_argument(
        "--paused-seconds",
        type=float,
        default=0.0,
        help="seconds the run was stopped (e.g. SIGSTOP) in the sitting being shipped, left out of its training seconds",
    )
    sh.set_defaults(fn=_ship)


def _ship(args) -> int:
    """Ship a later stage's result under assets/stages/: its finished adapter, or the last complete
    checkpoint of a run that has not finished (to go on from in another sitting), with its manifest."""
    from ..runs.paths import artifacts_dir, run_named_by_overrides
    from ..training import shipped_stages

    profile = settings_or_usage(args.profile, args.set)
    run_named_by_overrides(profile)
    out_dir = artifacts_dir(profile) / args.stage
    if shipped_stages.kind_of(args.stage) is None:
        raise UsageError(
            f"{args.stage}: not a stage that ships ({', '.join(shipped_stages.STAGE_KINDS)}, or a GRPO stage's seed "
            "such as grpo_weak_s1)"
        )
    if shipped_stages.kind_of(args.stage) != "sft":
        return _ship_later(profile, args.stage, out_dir)
    return _ship_sft(profile, args.stage, out_dir, args.paused_seconds)


def _ship_sft(profile, stage: str, out_dir: Path, paused_seconds: float) -> int:
    """An SFT stage's finished adapter, or its run's last complete checkpoint, with the sittings it was trained in
    (those of the resume point it went on from, where one is shipped under the same key, come first)."""
    from ..data.benchmark import benchmark_fingerprint
    from ..profiles import UNNAMED_OVERRIDES
    from ..runs.hardware import device_stamp
    from ..runs.integrity import finished_output, last_complete_checkpoint, read_marker
    from ..training import shipped_stages
    from ..training.sft import base_agent_key, run_key, stage_inquiry_share

    final = out_dir / "final"
    source = final if finished_output(final) else last_complete_checkpoint(out_dir)
    if source is None:
        raise UsageError(f"{out_dir}: no finished result and no complete checkpoint to ship")
    source = Path(source)
    share = stage_inquiry_share(profile, stage)
    trained = json.loads((final / "inquire_train.json").read_text()) if source == final else {}
    state = json.loads((source / "trainer_state.json").read_text()) if (source / "trainer_state.json").exists() else {}
    per_step = profile.sft_batch  # the global batch of one optimizer step (accumulation splits it)
    step = trained.get("steps", state.get("global_step"))
    sets = "".join(f" --set {k}={v}" for k, v in profile.overrides if k not in UNNAMED_OVERRIDES)
    share_arg = "" if stage == "sft_full" else f" --name {stage} --inquiry-share {share}"
    settings = shipped_stages.stage_settings(profile, stage, profile.sft_steps, share)
    # the resume point this run went on from, when one is shipped under the same key: its sittings go on in this one
    parent, device = base_agent_key(profile), trained.get("device", device_stamp())
    marker = read_marker(source) or {}
    made, key = marker.get("key"), run_key(profile, stage, profile.sft_steps, share)
    if made != key:
        raise UsageError(
            f"{source}: made under settings key {made or 'unrecorded'}, these settings' key is {key}: ship it with "
            "the settings it was trained with (--profile, --set)"
        )
    previous = shipped_stages.find(stage, settings, parent)
    total = trained.get("seconds_total", marker.get("seconds") or 0.0)
    sat = shipped_stages.sittings(previous, step, total, device, paused_seconds)
    kept = {k: previous[k] for k in ("schedule_note",) if previous and k in previous}
    m = shipped_stages.ship(
        source,
        stage,
        settings,
        parent,
        command=f"inquire train sft --profile {profile.name}{sets}{share_arg} --resume",
        extra={
            "step": step,  # a finished result's marker holds no step; its training record does
            "profile": profile.name,
            "data_fingerprint": benchmark_fingerprint(profile),
            "examples": step * per_step if step is not None else None,
            "of_steps": profile.sft_steps,
            "device": device,
            "seconds": round(sum(float(x["seconds"] or 0.0) for x in sat), 1),
            "seconds_note": "training seconds, summed over the sittings; the seconds a sitting was stopped are left out",
            "sittings": sat,
            **kept,
        },
    )
    print(
        f"shipped {m['kind']} of {stage} at step {m['step']} ({m['bytes']} bytes) to {shipped_stages.STAGES_ROOT / m['name']}"
    )
    return 0


def _ship_later(profile, stage: str, out_dir) -> int:
    """Ship a later stage's finished result (GRPO: the checkpoint chosen on validation where a choice was
    made, else the last; stage 3: its final), keyed by its settings under its start's key."""
    from ..data.benchmark import benchmark_fingerprint
    from ..profiles import UNNAMED_OVERRIDES
    from ..runs.hardware import device_stamp
    from ..runs.integrity import finished_output, read_marker
    from ..training import shipped_stages

    kind = shipped_stages.kind_of(stage)
    base_name, offset = shipped_stages.seed_of(stage)
    profile = shipped_stages.seeded(profile, stage)  # the run of an extra seed was trained with the seed it names
    source = next((out_dir / f for f in ("selected", "final") if finished_output(out_dir / f)), None)
    if source is None:
        raise UsageError(f"{out_dir}: no finished result to ship (a later stage ships once it has finished)")
    record = json.loads((source / "inquire_train.json").read_text())
    steps = record.get("config", {}).get("max_steps")
    key = shipped_stages.result_key(profile, stage, steps, record.get("start"))
    made = (read_marker(source) or {}).get("key")
    if key is None or made != key:
        raise UsageError(
            f"{source}: made under settings key {made or 'unrecorded'}, these settings and its start give "
            f"{key or 'none (its start has no content key)'}: ship it with the settings it was trained with (--profile, --set)"
        )
    start_name = Path(record["start"]).parent.name
    sets = "".join(f" --set {k}={v}" for k, v in profile.overrides if k not in UNNAMED_OVERRIDES)
    select = " --select" if source.name == "selected" else ""
    m = shipped_stages.ship(
        source,
        stage,
        shipped_stages.stage_settings(profile, stage, steps, None),
        shipped_stages.start_key(record["start"]),
        command=f"inquire train {LATER_COMMANDS[kind]} --profile {profile.name}{sets} --name {base_name} --start "
        f"{start_name}{select}{f' --seed {offset}' if offset else ''}",
        extra={
            "step": steps,
            "profile": profile.name,
            "start": start_name,
            "data_fingerprint": benchmark_fingerprint(profile),
            **shipped_stages.later_extent(kind, record, steps, profile),
            "of_steps": steps,
            "device": record.get("device") or device_stamp(),
            "seconds_note": "training seconds; the choice on validation is not counted",
            **({"selected_step": record.get("selected_step"), "ask_bias": record.get("ask_bias")} if select else {}),
        },
    )
    print(f"shipped {m['kind']} of {stage} ({m['bytes']} bytes) to {shipped_stages.STAGES_ROOT / m['name']}")
    return 0
