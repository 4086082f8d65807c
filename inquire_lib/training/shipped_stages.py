"""Shipped stage results: a later stage's trained adapter kept in the repository as stage 0's agents are,
so that a stage that costs more than a sitting is paid once.

`assets/stages/<stage>-<key>/` holds either a finished result (`kind` "final": the adapter) or a long run's
last complete checkpoint (`kind` "resume": adapter, scheduler, RNG and trainer state; the optimizer's moments
start anew), with a manifest: the stage's content key (`stage_key`: the resolved settings that shaped it under its start's key),
those settings, the command that trains it, the data fingerprint, the step and examples seen, the training
seconds and the machine. Every file's sha256 is checked before use; a file that differs is one line naming
it, never used. A stage finds its shipped result by its key only, so a result made under other settings is
never served.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from ..profiles import UNNAMED_OVERRIDES, DataSettings, Profile, TaskGRPOSettings, fields_affecting
from ..runs.integrity import finished_output, read_marker, sha256_file, write_marker
from ..runs.keys import settings_key
from ..runs.paths import REPO_ROOT, atomic_dir
from .configs import train_seed

STAGES_ROOT = REPO_ROOT / "assets" / "stages"
# what a stage's settings are read from (`profiles.AFFECTS`), beside the data and the numerics all stages share
STAGE_KINDS = {"sft_full": "sft", "sft_weak": "sft", "grpo_full": "grpo", "grpo_weak": "grpo", "grpo_task": "task_grpo"}
# a GRPO stage's extra training seeds (`stages.grpo_seeds`): `<stage>_s<k>`, trained with the training seed + k
SEED_NAME = re.compile(r"^(grpo_full|grpo_weak)_s([1-9][0-9]*)$")
# a stage 2 result is the checkpoint its validation pass chose (`training.selection`), so the settings of that
# evaluation shape it too
SETTING_KINDS = {"sft": ("sft",), "grpo": ("grpo", "eval"), "task_grpo": ("task_grpo",)}
FINAL_FILES = ("adapter_model.safetensors", "adapter_config.json")
# beside a finished adapter: its training record (log history, samples; a GRPO stage's choice on validation and
# its ask bias) and the selection's validation curve, which the notebooks plot without training again
RECORD_FILES = ("inquire_train.json", "selection.json")
# a resume point leaves out the optimizer's moments (`optimizer.pt`, twice the adapter: over the repository's
# 25 MB a file); the trainer starts them anew where it goes on, with the step restored, and the schedule is
# brought to that step (`weights.schedule_from_step_callback`: the trainer loads scheduler.pt only beside optimizer.pt)
RESUME_FILES = (
    *FINAL_FILES,
    "scheduler.pt",
    "rng_state.pth",
    "trainer_state.json",
    "training_args.bin",
)
MAX_BYTES = 80 * 1024 * 1024  # one shipped result, all its files


def kind_of(name: str) -> str | None:
    """The stage kind of a run named `name` ("sft", "grpo", "task_grpo"): a recipe stage's or a GRPO stage's
    extra seed's; None for any other run (a control, an ablation point), which is never shipped."""
    return STAGE_KINDS.get(name) or ("grpo" if SEED_NAME.match(name) else None)


def seed_of(name: str) -> tuple[str, int]:
    """(the stage, the seed offset) of a run name: `grpo_weak_s2` is ("grpo_weak", 2), `grpo_weak` ("grpo_weak", 0)."""
    found = SEED_NAME.match(name)
    return (found.group(1), int(found.group(2))) if found else (name, 0)


def seeded(profile: Profile, stage: str) -> Profile:
    """The profile a stage named `stage` was trained with: an extra seed's run (`grpo_weak_s1`) has the training
    seed + its offset, as `stages.grpo_seeds` and `inquire train grpo --seed K` train it."""
    offset = seed_of(stage)[1]
    return profile.replace(train_seed=train_seed(profile) + offset) if offset else profile


class ShippedStageError(ValueError):
    """A shipped stage result that cannot be used: a file missing or not the one its manifest names."""


def stage_settings(profile: Profile, stage: str, steps: int, inquiry_share: float) -> dict:
    """The resolved settings that shape `stage`: its own fields, the data's and the numerics', and the steps
    and inquiry share the run was given; not the thread counts (`profiles.UNNAMED_OVERRIDES`)."""
    return {
        "stage": stage,
        "steps": steps,
        "inquiry_share": inquiry_share,
        **{f: getattr(profile, f) for f in stage_fields(stage)},
    }


def stage_fields(stage: str) -> tuple[str, ...]:
    """The profile fields a stage's key reads: its own kinds', the data's and the numerics' (`profiles.AFFECTS`),
    not the thread counts (`profiles.UNNAMED_OVERRIDES`)."""
    kinds = ("data", "checkpoints", *SETTING_KINDS[kind_of(stage)])
    return tuple(f for f in fields_affecting(*kinds) if f not in UNNAMED_OVERRIDES)


def stage_key(settings: dict, parent: str) -> str:
    """The content key of a stage's result: its settings under the key of what it started from."""
    return settings_key(settings, parent)


def start_key(start: str | Path | None) -> str | None:
    """The content key a checkpoint's completeness marker records (a stage output trained or installed under
    one); None for the untrained model or a checkpoint without one."""
    return (read_marker(start) or {}).get("key") if start is not None else None


def result_key(profile: Profile, stage: str, steps: int, start: str | Path | None) -> str | None:
    """The content key of a later stage's result `stage` (GRPO, stage 3) trained for `steps` from the checkpoint
    `start`: its settings under the start's key; None for a run that is not one of the recipe's stages or a start
    without a key, which is then trained and never shipped."""
    parent = start_key(start)
    if kind_of(stage) in (None, "sft") or parent is None:
        return None
    return stage_key(stage_settings(profile, stage, steps, None), parent)


def rebuilds(stage: str, rebuild: bool | None = None) -> bool:
    """Whether `stage` is trained here even where a result is shipped: `rebuild`, else $INQUIRE_REBUILD
    (stage names, comma-separated, or "all")."""
    if rebuild is not None:
        return rebuild
    asked = {s.strip() for s in os.environ.get("INQUIRE_REBUILD", "").split(",") if s.strip()}
    return stage in asked or "all" in asked


def later_extent(kind: str, record: dict, steps: int, profile: TaskGRPOSettings) -> dict:
    """What a later stage's finished run saw and cost over all its sittings, for its manifest: GRPO's prompts
    (each with `num_generations` completions), stage 3's episodes (`task_num_generations` per task, each step's
    tasks `grpo_prompts_per_step`), and the training seconds of every sitting (`seconds_total`; a run never
    resumed records only `seconds`). The record's own `episodes` counts only the last sitting's."""
    prompts = steps * profile.grpo_prompts_per_step
    return {
        "examples": prompts * profile.task_num_generations if kind == "task_grpo" else prompts,
        "examples_note": "episodes played" if kind == "task_grpo" else "prompts, each with num_generations completions",
        "seconds": record.get("seconds_total", record.get("seconds")),
    }


def folder_of(stage: str, key: str, root: str | Path | None = None) -> Path:
    return Path(STAGES_ROOT if root is None else root) / f"{stage}-{key}"


def ship(
    source: str | Path,
    stage: str,
    settings: dict,
    parent: str,
    command: str,
    extra: dict | None = None,
    root: str | Path | None = None,
) -> dict:
    """Copy a finished stage output (`final/`) or a complete trainer checkpoint (`checkpoint-N/`) into its
    shipped folder, written whole or not at all; returns the manifest."""
    source = Path(source)
    kind = "resume" if (source / "trainer_state.json").exists() else "final"
    wanted = RESUME_FILES if kind == "resume" else (*FINAL_FILES, *RECORD_FILES)
    names = [n for n in wanted if (source / n).exists()]
    missing = sorted(set(FINAL_FILES) - set(names))
    if missing:
        raise ShippedStageError(f"{source}: no {missing[0]}; only an adapter stage can be shipped")
    size = sum((source / n).stat().st_size for n in names)
    if size > MAX_BYTES:
        raise ShippedStageError(f"{source}: {size} bytes, more than the {MAX_BYTES} a shipped stage may hold")
    key = stage_key(settings, parent)
    marker = read_marker(source) or {}
    manifest = {
        "name": folder_of(stage, key).name,
        "stage": stage,
        "kind": kind,
        "key": key,
        "parent": parent,
        "command": command,
        "step": marker.get("step"),
        "seconds": marker.get("seconds"),
        **(extra or {}),
        "settings": json.loads(json.dumps(settings, default=str)),
        "files": {n: sha256_file(source / n) for n in names},
        "bytes": size,
    }
    with atomic_dir(folder_of(stage, key, root)) as tmp:
        for n in names:
            shutil.copyfile(source / n, tmp / n)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def sittings(previous: dict | None, step: int, seconds: float, device: dict, paused: float = 0.0) -> list[dict]:
    """The sittings a result was trained in, oldest first: those of the resume point it went on from
    (`previous`, its manifest, or None), then this one, from that point's step to `step`, with the machine
    it ran on and its training seconds (`seconds` is the run's total, `paused` the seconds it was stopped in
    this sitting, left out)."""
    done, before = [], 0.0
    if previous is not None:
        done = [dict(s) for s in previous.get("sittings", [])] or [
            {
                "steps": [0, previous["step"]],
                "device": previous.get("device"),
                "seconds": previous.get("seconds"),
                **({"note": previous["seconds_note"]} if "seconds_note" in previous else {}),
            }
        ]
        before = float(previous.get("seconds") or 0.0)
    first = done[-1]["steps"][1] if done else 0
    if step > first:
        here = round(float(seconds) - paused - before, 1)
        done.append({"steps": [first, step], "device": device, "seconds": here, "paused_seconds": round(paused, 1)})
    return done


def find(stage: str, settings: dict, parent: str, root: str | Path | None = None) -> dict | None:
    """The manifest of the result shipped for exactly these settings and start, or None."""
    path = folder_of(stage, stage_key(settings, parent), root) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def install_final(
    profile: DataSettings, stage: str, key: str, out_dir: str | Path, base: str | None, root: str | Path | None = None
):
    """A stage's finished result shipped under `key`, installed as `out_dir/final` on the model `base`
    (here, where its start was put) unless a finished one is there, and returned as the trainer's result (its
    recorded log history and samples); None where none is shipped, or only a resume point."""
    from ..data.benchmark import benchmark_fingerprint
    from .fit import TrainResult

    path = folder_of(stage, key, root) / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else None
    if manifest is None or manifest["kind"] != "final":
        return None
    check_data(manifest, benchmark_fingerprint(profile), root)
    final = Path(out_dir) / "final"
    if not finished_output(final) or (read_marker(final) or {}).get("key") != key:
        install(manifest, out_dir, base=base, root=root)
    rec = json.loads((final / RECORD_FILES[0]).read_text())
    print(f"{stage}: the shipped result installed ({manifest['command']}; {_took(manifest)} on {_machine(manifest)})")
    return TrainResult(
        str(final),
        True,
        rec.get("log_history", []),
        rec.get("n_examples", manifest.get("examples", 0)),
        0.0,
        rec.get("samples", []),
    )


def _took(manifest: dict) -> str:
    seconds = manifest.get("seconds")
    return "an unrecorded time" if not isinstance(seconds, (int, float)) else f"{seconds:.0f} s"


def _machine(manifest: dict) -> str:
    device = manifest.get("device") or {}
    return str(device.get("cpu_kind") or device.get("kind") or "an unrecorded machine")


def check_data(manifest: dict, fingerprint: str, root: str | Path | None = None) -> None:
    """Refuse, in one line, a shipped result trained on other data than this code generates for its settings."""
    made_on = manifest.get("data_fingerprint")
    if made_on is not None and made_on != fingerprint:
        where = Path(STAGES_ROOT if root is None else root) / manifest["name"] / "manifest.json"
        raise ShippedStageError(
            f"{where}: trained on data with fingerprint {made_on}, this code generates {fingerprint}; "
            f"train {manifest['stage']} here with --rebuild"
        )


def install(manifest: dict, out_dir: str | Path, base: str, root: str | Path | None = None) -> Path:
    """Put a shipped result into a stage's output folder after checking every file's sha256: a finished one
    as `final/` (with `inquire_train.json` naming its `base` and the manifest), a resume point as the
    `checkpoint-<step>` the trainer goes on from (with its completeness marker). Returns that folder."""
    src = Path(STAGES_ROOT if root is None else root) / manifest["name"]
    for name, digest in manifest["files"].items():
        path = src / name
        if not path.is_file() or sha256_file(path) != digest:
            raise ShippedStageError(f"{path}: missing or not the file {src / 'manifest.json'} names (sha256)")
    out_dir = Path(out_dir)
    dest = out_dir / ("final" if manifest["kind"] == "final" else f"checkpoint-{manifest['step']}")
    with atomic_dir(dest) as tmp:
        for name in manifest["files"]:
            shutil.copyfile(src / name, tmp / name)
        if manifest["kind"] == "final":
            trained = json.loads((tmp / RECORD_FILES[0]).read_text()) if RECORD_FILES[0] in manifest["files"] else {}
            record = {"stage": kind_of(manifest["stage"]), **trained, "base": base, "adapter": True}
            (tmp / RECORD_FILES[0]).write_text(json.dumps({**record, "shipped": manifest}))
            write_marker(tmp, key=manifest["key"])
        else:
            write_marker(tmp, step=manifest["step"], seconds=manifest["seconds"], key=manifest["key"])
    return dest


def provenance(path: str | Path | None) -> str:
    """One line saying where the checkpoint at `path` comes from: a shipped result (the command that trained it,
    the examples it saw, its training time and machines) or a run trained here (its steps, time and machine)."""
    record_path = Path(path) / RECORD_FILES[0] if path is not None else None
    if record_path is None or not record_path.is_file():
        return f"{path}: no training record (the untrained model or a checkpoint made elsewhere)"
    record = json.loads(record_path.read_text())
    m = record.get("shipped")
    if m is not None:
        kinds = sorted({str((s.get("device") or {}).get("cpu_kind")) for s in m.get("sittings", [])}) or [_machine(m)]
        seconds = float(m.get("seconds") or 0.0)
        return (
            f"shipped result {m['name']}: `{m['command']}`, {m.get('examples')} examples "
            f"({m.get('examples_note', 'training examples')}), {seconds / 3600:.2f} h of training on "
            f"{', '.join(kinds)}"
        )
    device = (record.get("device") or {}).get("cpu_kind", "an unrecorded machine")
    steps = record.get("steps") or (record.get("config") or {}).get("max_steps")
    return f"trained here: {steps} steps, {float(record.get('seconds') or 0.0):.0f} s on {device}"
