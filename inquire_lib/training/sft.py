"""Stage 0 and stage 1: the cached base agent and SFT, with TRL's `SFTTrainer`.

- `base_agent`: the tiny model trained once (full weights) on every gold step except the
  inquiries, so it acts and never asks, as a pretrained GUI model does before the inquiry recipe;
- `sft`: from the base agent (or the profile's checkpoint) on prompt/completion records with
  images; the loss is the cross-entropy of the completion tokens only (pre-action reasoning + tool
  call). LoRA where the profile asks for it (QLoRA on a 4-bit base), full training otherwise.
Both resume from their last checkpoint and record their config beside the final model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import datasets
import torch

from ..agent.prompts import frame_for, to_training_record
from ..data.benchmark import benchmark, benchmark_fingerprint, sft_split
from ..profiles import (
    BaseAgentSettings,
    fields_affecting,
    get_profile,
    ModelSettings,
    Profile,
    SFTSettings,
    StageSettings,
)
from ..runs.integrity import last_complete_checkpoint
from ..runs.keys import settings_key
from ..runs.paths import artifacts_dir, cache_dir, copy_dir_atomic
from ..runs.tracking import trainer_tracking, use_tracking
from . import shipped_stages
from .configs import config_record, lora_config, sft_config
from .devices import is_main_process, wait_for_everyone
from .fit import TrainResult, fit
from .models import (
    CUT_ONLY,
    TOKENIZER_FIELDS,
    base_of,
    load_checkpoint,
    load_model_and_processor,
    model_path,
)


def _keep(rec_id: str, fraction: float, seed: int) -> bool:
    """Deterministic subsampling by id, independent of dataset order."""
    if fraction >= 1.0:
        return True
    h = int(hashlib.sha256(f"{seed}:{rec_id}".encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < fraction


def training_records(
    ds: datasets.Dataset, profile: StageSettings, inquiry_share: float = 1.0, oversample: int = 1
) -> datasets.Dataset:
    """Step records -> TRL records; keeps only `inquiry_share` of the steps whose gold is call_user,
    and repeats each kept one `oversample` times (inquiries are ~10% of the steps; a base agent that
    never asks needs them more often to learn the new behaviour). Screenshots pass through as their
    stored PNG bytes (decoding and re-encoding thousands of images would dominate the preparation)."""
    if inquiry_share < 1.0:
        ds = ds.filter(
            lambda req, rid: not req or _keep(rid, inquiry_share, profile.seed),
            input_columns=["inquiry_required", "id"],
        )
    ds = _with_repeats(ds, [i for i, req in enumerate(ds["inquiry_required"]) if req], oversample)
    raw = datasets.Image(decode=False)
    ds = ds.cast_column("screenshot", raw).cast_column("prev_screenshot", raw)
    frame = frame_for(profile)
    keep = [
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
    ]
    out = ds.map(
        lambda r: to_training_record(r, profile, frame),
        remove_columns=[c for c in ds.column_names if c not in keep],
        keep_in_memory=True,
        desc="training records",
    )
    return out.cast_column("images", datasets.List(datasets.Image()))


# the profile fields that shape the base agent, as their metadata says (`profiles.AFFECTS`): its cache and
# shipped copy are named by the content key of their values (`base_agent_key`)
BASE_AGENT_FIELDS = fields_affecting("base_agent")


def stage0_records(profile: BaseAgentSettings) -> datasets.Dataset:
    """Stage 0's data: every training step except the inquiries (of the benchmark's training split,
    or of `base_agent_tasks` fresh tasks when the profile asks for them), plus the copy drill and the
    recovery drill when the profile asks for them (`copy_drill_tasks`, `recovery_drill_tasks`; the
    trainer's sampler mixes them)."""
    from ..data.benchmark import copy_drill, recovery_drill, stage0_tasks

    steps = stage0_tasks(profile) if profile.base_agent_tasks > 0 else benchmark(profile)["train"]
    parts = [_with_repeated_opens(training_records(steps, profile, 0.0, 1), profile.open_oversample)]
    if profile.copy_drill_tasks > 0:
        parts.append(training_records(copy_drill(profile), profile, 0.0, 1))
    if profile.recovery_drill_tasks > 0:
        parts.append(training_records(recovery_drill(profile), profile, 0.0, 1))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def _with_repeats(ds: datasets.Dataset, rows: list[int], times: int) -> datasets.Dataset:
    """`ds` with each of `rows` `times` times: the originals in order, then the repeats (the trainer's
    sampler shuffles)."""
    return ds if times <= 1 else ds.select(list(range(len(ds))) + rows * (times - 1))


def _with_repeated_opens(records: datasets.Dataset, times: int) -> datasets.Dataset:
    """`records` with each `open` step (the app choice) `times` times."""
    if times < 1:
        raise ValueError(f"open_oversample must be at least 1, got {times}")
    if times == 1:  # the default: no pass over the column
        return records
    opens = [i for i, a in enumerate(records["gold_action"]) if json.loads(a)["action"] == "open"]
    return _with_repeats(records, opens, times)


def base_agent_source(profile: Profile) -> Profile:
    """The profile whose stage 0 this one starts from: itself, or the profile `base_agent_from` names
    with this one's seed and its overrides of `BASE_AGENT_FIELDS` (so `quick` shares `cpu`'s shipped
    base agent, and an override that shapes the base agent still gets one of its own)."""
    if not profile.base_agent_from:
        return profile
    from ..profiles import apply_overrides

    shaping = {k: v for k, v in profile.overrides if k in BASE_AGENT_FIELDS}
    return apply_overrides(get_profile(profile.base_agent_from).replace(seed=profile.seed), shaping)


def base_agent_settings(profile: Profile) -> dict:
    """The resolved settings that shape the profile's base agent: every `BASE_AGENT_FIELDS` value of the
    profile it takes stage 0 from (`base_agent_source`) but the start (`base_agent_init`, its parent). The
    generator's code is not in it: that names the data caches (`data.benchmark.generator_key`), and what an
    agent was trained on is checked by the data fingerprint its manifest records."""
    source = base_agent_source(profile)
    return {f: getattr(source, f) for f in BASE_AGENT_FIELDS if f != "base_agent_init"}


def base_agent_key(profile: Profile) -> str:
    """The base agent's content key: its settings (`base_agent_settings`) under the agent it continues
    (`base_agent_init`, itself a base agent's folder name). Computing it reads the profile only."""
    return settings_key(base_agent_settings(profile), parent=base_agent_source(profile).base_agent_init)


def base_agent_dir(profile: Profile) -> Path:
    """Where the profile's base agent is cached: `models/base-agent-<key>` (`base_agent_key`), so profiles
    that resolve to the same stage-0 settings share it and a changed setting, default or override, never
    reuses an agent made under another."""
    return cache_dir() / "models" / f"base-agent-{base_agent_key(profile)}"


def find_base_agent(profile: Profile, rebuild: bool = False) -> str | None:
    """The profile's base agent where a complete one is cached here (None where none is, or where `rebuild`
    sets aside a shipped copy installed earlier): reads, never installs or trains."""
    from ..runs.integrity import check_cache
    from . import shipped
    from .weights import check_weights

    path = base_agent_dir(profile)
    adopt = lambda: (path / "config.json").exists() and check_weights(path) > 0  # noqa: E731
    if check_cache(path, adopt=adopt) and not (rebuild and shipped.is_shipped_copy(path)):
        return str(path)
    return None


def install_base_agent(profile: Profile) -> str | None:
    """The shipped base agent of the profile's stage-0 settings, installed into the cache when its hashes match
    (None where none is shipped for these settings): never trains."""
    from . import shipped

    path = base_agent_dir(profile)
    if _install_shipped(path, profile) and shipped.is_shipped_copy(path):
        return str(path)
    return None


def base_agent_path(profile: str | Profile) -> str | None:
    """Where the profile's base agent is, found or installed from its shipped copy, for a look-up that must not
    train (`training.checkpoints.checkpoint_path`); None where the profile starts from a real checkpoint. One
    line naming the command that trains it where neither is there."""
    profile = base_agent_source(get_profile(profile))
    if profile.base_agent_steps <= 0:
        return None
    found = find_base_agent(profile) or install_base_agent(profile)
    if found is None:
        raise FileNotFoundError(
            f"{base_agent_dir(profile)}: profile {profile.name!r} has no base agent here and none is shipped for its "
            f"settings; `inquire base-agent --profile {profile.name}` trains it"
        )
    return found


def base_agent(profile: str | Profile, progress_callbacks=None, rebuild: bool | None = None) -> str | None:
    """Stage 0: the cached base agent (`find_base_agent`), else its shipped copy (`install_base_agent`), else
    trained here (full weights, no LoRA) on every gold step except the inquiries, so it acts well and never
    asks, as a pretrained GUI model does before the inquiry recipe. `rebuild` (default:
    $INQUIRE_REBUILD_BASE_AGENT set, not 0) asks to train it here, which also sets aside a shipped copy
    installed earlier. Trained with `base_agent_threads` torch threads (0: `torch_threads`). Returns its path,
    or None when the profile starts from a real checkpoint."""
    profile = base_agent_source(get_profile(profile))
    if profile.base_agent_steps <= 0:
        return None
    from . import shipped

    if rebuild is None:
        rebuild = os.environ.get("INQUIRE_REBUILD_BASE_AGENT", "") not in ("", "0")
    path = base_agent_dir(profile)
    found = find_base_agent(profile, rebuild) or (None if rebuild else install_base_agent(profile))
    if found is not None:
        return found
    if not rebuild and not any(k in BASE_AGENT_FIELDS for k, _ in profile.overrides):
        # no override asked for another stage 0, yet the shipped one does not match: its settings changed
        shipped.refuse_stale(profile.name, path.name, base_agent_settings(profile))
    # a model from scratch trains every weight; a pretrained one a LoRA adapter and its new vision tower
    pretrained = is_pretrained(profile)
    plain = profile.replace(
        lora=pretrained, load_in_4bit=False, torch_threads=profile.base_agent_threads or profile.torch_threads
    )
    start = base_agent_init(profile)
    if pretrained and start is not None:
        # continue the earlier agent's own adapter (LoRA and vision tower) on the graft, so that the result is
        # again one adapter, merged and shipped like the first
        start = str(Path(start) / shipped.ADAPTER)
    res = _run_sft(
        plain,
        start=start,
        out_dir=cache_dir() / "runs" / path.name,
        inquiry_share=0.0,
        train=stage0_records(plain),
        steps=profile.base_agent_steps,
        lr=profile.base_agent_lr,
        warmup=max(1, profile.base_agent_steps // 20),
        resume=True,
        callbacks=progress_callbacks,
        modules_to_save=("visual",) if pretrained else (),
    )
    if is_main_process():
        if pretrained:
            merge_adapter(plain, res.path, path)
        else:
            copy_dir_atomic(res.path, path)  # replaces a cache that failed its check, whole; the marker comes along
        shutil.rmtree(cache_dir() / "runs" / path.name, ignore_errors=True)
    wait_for_everyone()
    return str(path)


def _install_shipped(path: Path, profile: Profile) -> bool:
    """Install the shipped base agent named like `path` there (the main process; the others wait);
    whether `path` now holds a complete agent."""
    from ..runs.integrity import is_complete
    from . import shipped

    if is_main_process():
        merge = (
            (lambda adapter, out: merge_adapter(profile, adapter, out, publish=False))
            if is_pretrained(profile)
            else None
        )
        shipped.install(path.name, model_path(profile), path, merge=merge)
    wait_for_everyone()
    return is_complete(path)


def is_pretrained(profile: ModelSettings) -> bool:
    """Whether the profile's model is a pretrained language model grafted offline (`training.pretrained`)."""
    from .pretrained import PRETRAINED

    return profile.model in PRETRAINED


def merge_adapter(profile: Profile, adapter: str | Path, dest: str | Path, publish: bool = True) -> Path:
    """The profile's base model with the stage-0 `adapter` (LoRA and the trained vision tower) merged in,
    as a full model folder at `dest` that later stages start from like any base agent; the adapter
    itself is kept in `dest/adapter` (what `shipped.export` ships). With `publish` (the default)
    `dest` appears whole with its marker; without, `dest` is a folder being written by the caller."""
    from peft import PeftModel

    from ..runs.integrity import write_marker
    from ..runs.paths import atomic_dir
    from . import shipped

    model, _ = load_model_and_processor(profile.replace(load_in_4bit=False))
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()

    def write(folder: Path) -> None:
        merged.save_pretrained(folder)
        keep = folder / shipped.ADAPTER
        if Path(adapter).resolve() != keep.resolve():
            keep.mkdir(exist_ok=True)
            for name in (shipped.ADAPTER_WEIGHTS, *shipped.ADAPTER_CONFIGS):
                shutil.copyfile(Path(adapter) / name, keep / name)
        meta = Path(adapter) / "inquire_train.json"
        if meta.exists() and not (folder / "inquire_train.json").exists():
            shutil.copyfile(meta, folder / "inquire_train.json")

    if not publish:
        write(Path(dest))
        return Path(dest)
    with atomic_dir(dest) as tmp:
        write(tmp)
        write_marker(tmp)
    return Path(dest)


def base_agent_init(profile: Profile) -> str | None:
    """The base agent stage 0 continues from (`base_agent_init`, a cache folder name), installed from
    `assets/base_agents/` when a shipped one of that name has matching hashes; None: from scratch."""
    name = profile.base_agent_init
    if not name:
        return None
    from ..runs.integrity import check_cache
    from . import shipped

    path = cache_dir() / "models" / name
    # the shipped agents were trained with the tokenizer's defaults; a profile that changes only how
    # text is cut (`models.CUT_ONLY`: the same ids) can start from them too
    plain = profile.replace(**{f: TOKENIZER_FIELDS[f][0] for f in CUT_ONLY})
    if not (
        check_cache(path) or _install_shipped(path, profile) or (plain != profile and _install_shipped(path, plain))
    ):
        raise FileNotFoundError(
            f"base_agent_init={name!r}: no complete base agent at {path} and no shipped one "
            f"of that name whose hashes match {shipped.SHIPPED_ROOT}"
        )
    return str(path)


def sft(
    profile: str | Profile,
    name: str = "sft",
    inquiry_share: float | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    train: datasets.Dataset | None = None,
    callbacks=None,
    start: str | None = None,
    rebuild: bool | None = None,
) -> TrainResult:
    """Stage 1, from `start` (a full model folder), else the base agent (or the profile's
    checkpoint). Writes `artifacts/<profile>/<name>/` (checkpoints inside) and returns the final
    path: an adapter with LoRA, else a full model. From the base agent, a result shipped for exactly these
    settings (`shipped_stages`) is installed instead of trained, and a shipped resume point is gone on
    from, unless `rebuild` (default: `name` in $INQUIRE_REBUILD, or "all" there) asks to train it here."""
    profile = get_profile(profile)
    share = stage_inquiry_share(profile, name) if inquiry_share is None else inquiry_share
    steps = max_steps or profile.sft_steps
    out_dir = artifacts_dir(profile) / name
    key = run_key(profile, name, steps, share) if start is None and train is None else None
    if key is not None and not shipped_stages.rebuilds(name, rebuild):
        shipped = _from_shipped(profile, name, steps, share, out_dir)
        if isinstance(shipped, TrainResult):
            return shipped
        resume = resume or shipped  # a shipped resume point was put in place: go on from it
    return _run_sft(
        profile,
        start=start or base_agent(profile),
        out_dir=out_dir,
        inquiry_share=share,
        steps=steps,
        lr=profile.sft_lr,
        warmup=profile.sft_warmup_steps,
        resume=resume,
        train=train,
        callbacks=callbacks,
        track=name,
        key=key,
    )


def run_key(profile: Profile, name: str, steps: int, share: float) -> str | None:
    """The content key of stage 1's run `name` from the base agent (`shipped_stages.stage_key`: its resolved
    settings under the base agent's key), which its checkpoints record and a resume checks; None for a run
    that is not one of the recipe's stages (e.g. the equal-compute control). Reads the profile only."""
    if shipped_stages.kind_of(name) != "sft":
        return None
    settings = shipped_stages.stage_settings(profile, name, steps, share)
    return shipped_stages.stage_key(settings, base_agent_key(profile))


def stage_inquiry_share(profile: SFTSettings, name: str) -> float:
    """The share of inquiry steps stage 1 keeps for the run `name`: the weak inquirer's (`weak_inquiry_share`)
    for sft_weak, else every one the profile keeps (`sft_inquiry_share`)."""
    return profile.weak_inquiry_share if name == "sft_weak" else profile.sft_inquiry_share


def _from_shipped(profile: Profile, name: str, steps: int, share: float, out_dir: Path) -> TrainResult | bool:
    """The shipped result of this stage for these settings, installed into `out_dir`: a finished one is
    returned; a shipped resume point is the checkpoint the trainer goes on from (True); False: none."""
    if shipped_stages.kind_of(name) != "sft":
        return False
    settings = shipped_stages.stage_settings(profile, name, steps, share)
    manifest = shipped_stages.find(name, settings, base_agent_key(profile))
    if manifest is None:
        return False
    if manifest["kind"] == "final":
        return shipped_stages.install_final(profile, name, manifest["key"], out_dir, base_agent_path(profile))
    shipped_stages.check_data(manifest, benchmark_fingerprint(profile))
    have = last_complete_checkpoint(out_dir)
    if have is None or int(Path(have).name.split("-")[-1]) < manifest["step"]:
        shipped_stages.install(manifest, out_dir, base=base_agent_path(profile))
    return True


def _run_sft(
    profile: Profile,
    start: str | None,
    out_dir: Path,
    inquiry_share: float,
    steps: int,
    lr: float,
    warmup: int,
    resume: bool = False,
    train: datasets.Dataset | None = None,
    callbacks=None,
    track: str | None = None,
    modules_to_save: tuple[str, ...] = (),
    key: str | None = None,
) -> TrainResult:
    """Supervised fine-tuning into `out_dir`; logs to the run's tracker as stage `track` (None: not tracked);
    `key`: the run's content key, recorded in its checkpoints and checked on resume (`fit.fit`)."""
    from trl import SFTTrainer

    torch.set_num_threads(profile.torch_threads)
    oversample = profile.sft_inquiry_oversample if inquiry_share > 0 else 1
    train = train if train is not None else training_records(sft_split(profile), profile, inquiry_share, oversample)
    if start is not None and (Path(start) / "adapter_config.json").exists():
        # continue training an adapter (DAgger rounds): the adapter itself, on the model it was trained on
        model, processor = load_checkpoint(profile, start, trainable=True)
        peft_config, base = None, base_of(start, profile)
    else:
        model, processor = load_model_and_processor(profile, checkpoint=start, trainable=True)
        peft_config, base = (
            (lora_config(profile, modules_to_save) if profile.lora else None),
            start or model_path(profile),
        )
    config = sft_config(profile, out_dir, steps=steps, lr=lr, warmup=warmup)
    record = config_record(config)  # what is trained, not where it is logged
    with trainer_tracking(profile, track) as tracking:
        trainer = SFTTrainer(
            model=model,
            args=use_tracking(config, tracking),
            train_dataset=train,
            processing_class=processor,
            peft_config=peft_config,
            callbacks=callbacks,
        )
    final, seconds = fit(
        trainer,
        out_dir,
        resume,
        meta=lambda _folder, seconds: {
            "stage": "sft",
            "profile": profile.name,
            "inquiry_share": inquiry_share,
            "adapter": profile.lora,
            "start": start or model_path(profile),
            "base": base,
            "seconds": seconds,
            "n_examples": len(train),
            "steps": steps,
            "config": record,
            "torch_threads": profile.torch_threads,
            "log_history": trainer.state.log_history,
            **({"key": key} if key else {}),
        },
        key=key,
    )
    return TrainResult(str(final), profile.lora, trainer.state.log_history, len(train), seconds)
