"""Thin wrappers that build TRL configs from a profile and run TRL's trainers.

- `sft`: stage 1, TRL `SFTTrainer` on prompt/completion records with images; the loss is the
  cross-entropy of the completion tokens only (pre-action reasoning + tool call). LoRA where the
  profile asks for it (QLoRA on a 4-bit base), full training otherwise.
- `grpo`: stage 2, TRL `GRPOTrainer`: for each prompt, `num_generations` sampled completions are
  scored by the verifiable rewards of `rewards.py`; the policy gradient uses group-normalised
  advantages, with a KL penalty of weight `beta` to the starting policy (0 drops the reference).
Both are resumable from their last checkpoint and return where the result lies and the log history.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import datasets
import torch

from ..data.benchmark import load_or_build
from .models import base_of, disable_bnb_cpu_repack, load_model_and_processor, model_path
from ..profiles import Profile, get_profile
from ..agent.prompts import frame_for, to_training_record
from ..runs.paths import artifacts_dir, atomic_dir, cache_dir

@dataclass
class TrainResult:
    path: str  # a full model dir, or an adapter dir when `adapter` is True
    adapter: bool
    log_history: list
    n_examples: int
    seconds: float
    samples: list | None = None  # GRPO: the last generation batch with its rewards


def benchmark(profile: Profile) -> datasets.DatasetDict:
    return load_or_build(profile.seed, profile.train_tasks + profile.test_tasks)


def _keep(rec_id: str, fraction: float, seed: int) -> bool:
    """Deterministic subsampling by id, independent of dataset order."""
    if fraction >= 1.0:
        return True
    h = int(hashlib.sha256(f"{seed}:{rec_id}".encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < fraction


def training_records(ds: datasets.Dataset, profile: Profile, inquiry_fraction: float = 1.0,
                     oversample: int = 1) -> datasets.Dataset:
    """Step records -> TRL records; keeps only `inquiry_fraction` of the steps whose gold is call_user,
    and repeats each kept one `oversample` times (inquiries are ~10% of the steps; a base agent that
    never asks needs them more often to learn the new behaviour). Screenshots pass through as their
    stored PNG bytes (decoding and re-encoding thousands of images would dominate the preparation)."""
    if inquiry_fraction < 1.0:
        ds = ds.filter(lambda req, rid: not req or _keep(rid, inquiry_fraction, profile.seed),
                       input_columns=["inquiry_required", "id"])
    if oversample > 1:
        required = [i for i, req in enumerate(ds["inquiry_required"]) if req]
        ds = ds.select(list(range(len(ds))) + required * (oversample - 1))
    raw = datasets.Image(decode=False)
    ds = ds.cast_column("screenshot", raw).cast_column("prev_screenshot", raw)
    frame = frame_for(profile)
    keep = ["prompt", "completion", "images", "gold_action", "gold_bbox", "inquiry_required", "frame_w", "frame_h",
            "category", "subcategory", "id"]
    out = ds.map(lambda r: to_training_record(r, profile, frame), remove_columns=[c for c in ds.column_names if c not in keep],
                 keep_in_memory=True, desc="training records")
    return out.cast_column("images", datasets.List(datasets.Image()))


def grpo_records(profile: Profile, n: int | None = None) -> datasets.Dataset:
    """The GRPO prompt set: inquiry situations are ~10% of all steps, too rare for a few hundred
    prompts to teach when to ask; so a share `grpo_inquiry_share` of the prompts are steps that
    require an inquiry, the same share are the steps right after the user answered (where asking
    again is needless), and the rest are other steps. Deterministic for a profile."""
    import random

    ds = benchmark(profile)["train"]
    n = n or profile.grpo_steps * profile.grpo_prompts_per_step
    required, after, other = [], [], []
    for i, (req, hist) in enumerate(zip(ds["inquiry_required"], ds["history"])):
        (required if req else after if hist and hist[-1].startswith("asked:") else other).append(i)
    rng = random.Random(f"grpo:{profile.seed}")
    k = round(n * profile.grpo_inquiry_share)
    pick = lambda pool, m: [rng.choice(pool) for _ in range(m)] if pool else []
    idx = pick(required, k) + pick(after, k) + pick(other, max(0, n - 2 * k))
    rng.shuffle(idx)
    return training_records(ds.select(idx), profile, 1.0)


def _device_kwargs(profile: Profile) -> dict:
    cpu = not torch.cuda.is_available()
    return {"use_cpu": cpu, "bf16": bool(profile.bf16 and not cpu)}


def _lora_config(profile: Profile):
    from peft import LoraConfig
    return LoraConfig(r=profile.lora_r, lora_alpha=profile.lora_alpha, lora_dropout=profile.lora_dropout,
                      target_modules=r".*language_model.*\.(" + "|".join(profile.lora_targets) + ")$",
                      task_type="CAUSAL_LM")


def fit(trainer, out_dir: Path, resume: bool) -> tuple[Path, float]:
    """Train (from the last checkpoint in `out_dir` when resuming), save to `out_dir/final`;
    returns that path and the training seconds."""
    import time

    disable_bnb_cpu_repack(trainer.model)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=_last_checkpoint(out_dir) if resume else None)
    seconds = time.time() - t0
    final = out_dir / "final"
    trainer.save_model(str(final))
    return final, seconds


def _last_checkpoint(out_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint
    return get_last_checkpoint(str(out_dir)) if out_dir.exists() else None


BASE_AGENT_VERSION = 1  # bump when the world, prompts or recipe change what the base agent learns


def base_agent(profile: str | Profile, progress_callbacks=None) -> str | None:
    """Stage 0: the cached base agent, trained once (full weights, no LoRA) on every gold step
    except the inquiries, so it acts well and never asks, as a pretrained GUI model does before the
    inquiry recipe. Returns its path, or None when the profile starts from a real checkpoint."""
    profile = get_profile(profile)
    if profile.base_agent_steps <= 0:
        return None
    path = cache_dir() / "models" / f"base-agent-{profile.name}-s{profile.seed}-v{BASE_AGENT_VERSION}"
    if (path / "config.json").exists():
        return str(path)
    plain = profile.replace(lora=False, load_in_4bit=False)
    res = _run_sft(plain, start=None, out_dir=cache_dir() / "runs" / path.name, inquiry_fraction=0.0,
                   steps=profile.base_agent_steps, lr=profile.base_agent_lr, warmup=max(1, profile.base_agent_steps // 20),
                   resume=True, callbacks=progress_callbacks)
    with atomic_dir(path) as tmp:
        shutil.copytree(res.path, tmp, dirs_exist_ok=True)
    shutil.rmtree(cache_dir() / "runs" / path.name, ignore_errors=True)
    return str(path)


def sft(profile: str | Profile, name: str = "sft", inquiry_fraction: float | None = None, resume: bool = False,
        max_steps: int | None = None, train: datasets.Dataset | None = None, callbacks=None) -> TrainResult:
    """Stage 1, from the base agent (or the profile's checkpoint). Writes `artifacts/<profile>/<name>/`
    (checkpoints inside) and returns the final path: an adapter with LoRA, else a full model."""
    profile = get_profile(profile)
    fraction = profile.sft_inquiry_fraction if inquiry_fraction is None else inquiry_fraction
    return _run_sft(profile, start=base_agent(profile), out_dir=artifacts_dir(profile) / name, inquiry_fraction=fraction,
                    steps=max_steps or profile.sft_steps, lr=profile.sft_lr, warmup=profile.sft_warmup_steps,
                    resume=resume, train=train, callbacks=callbacks)


def _run_sft(profile: Profile, start: str | None, out_dir: Path, inquiry_fraction: float, steps: int, lr: float,
             warmup: int, resume: bool = False, train: datasets.Dataset | None = None, callbacks=None) -> TrainResult:
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(profile.torch_threads)
    oversample = profile.sft_inquiry_oversample if inquiry_fraction > 0 else 1
    train = train if train is not None else training_records(benchmark(profile)["train"], profile, inquiry_fraction, oversample)
    model, processor = load_model_and_processor(profile, checkpoint=start, trainable=True)
    config = SFTConfig(
        output_dir=str(out_dir), max_steps=steps, per_device_train_batch_size=profile.sft_batch, learning_rate=lr,
        lr_scheduler_type="cosine", warmup_steps=warmup, weight_decay=0.0,
        logging_steps=max(1, steps // 50), save_steps=profile.sft_save_steps, save_total_limit=2,
        gradient_checkpointing=profile.gradient_checkpointing, max_length=None, report_to=[], seed=profile.seed if profile.train_seed is None else profile.train_seed,
        dataloader_num_workers=0, completion_only_loss=True, disable_tqdm=bool(os.environ.get("CI")),
        **_device_kwargs(profile),
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=train, processing_class=processor,
                         peft_config=_lora_config(profile) if profile.lora else None, callbacks=callbacks)
    final, seconds = fit(trainer, out_dir, resume)
    (final / "inquire_train.json").write_text(json.dumps({
        "stage": "sft", "profile": profile.name, "inquiry_fraction": inquiry_fraction, "adapter": profile.lora,
        "start": start or model_path(profile), "base": start or model_path(profile), "seconds": seconds,
        "n_examples": len(train), "steps": steps}))
    return TrainResult(str(final), profile.lora, trainer.state.log_history, len(train), seconds)


# the profile fields that shape stage 2, shown and recorded by notebook 03
GRPO_SETTINGS = ("grpo_steps", "grpo_prompts_per_step", "num_generations", "grpo_lr", "temperature", "beta",
                 "top_entropy_quantile", "missed_penalty", "needless_penalty", "grpo_inquiry_share", "grpo_save_steps",
                 "val_tasks", "select_max_needless", "select_max_safe_drop")
# the GRPOConfig fields recorded beside a GRPO checkpoint (what a re-run must match)
GRPO_KNOBS = ("max_steps", "learning_rate", "per_device_train_batch_size", "num_generations", "temperature", "beta",
              "top_entropy_quantile", "num_iterations", "loss_type", "max_completion_length", "reward_weights", "seed")


def grpo_save_kwargs(profile: Profile, steps: int) -> dict:
    """Checkpointing of a GRPO run: every `grpo_save_steps` steps, all kept for validation to choose
    from (`selection.py`); without it, a third of the run, the last two kept for resuming."""
    if profile.grpo_save_steps:
        return {"save_steps": profile.grpo_save_steps, "save_total_limit": None}
    return {"save_steps": max(1, steps // 3), "save_total_limit": 2}


def grpo(profile: str | Profile, start: str | None, name: str = "grpo", resume: bool = False,
         max_steps: int | None = None, train: datasets.Dataset | None = None, reward_names=("format", "action", "inquiry"),
         callbacks=None, reuse: bool = False) -> TrainResult:
    """Stage 2 from the checkpoint `start` (an SFT output: adapter or full model).

    Each step samples `num_generations` completions for each of `grpo_prompts_per_step` prompts at
    `temperature`, scores them with the named rewards (weighted by `profile.reward_weights`), and
    maximises the clipped, group-normalised advantage objective; `beta` > 0 adds a KL penalty.
    With `top_entropy_quantile` < 1 only the completion tokens whose entropy is in that top quantile
    of the batch carry the loss: the forking tokens (ask or act, which target) learn, while the
    near-deterministic format tokens are left alone. `grpo_iterations` > 1 reuses each generated
    batch for that many optimisation passes.

    With `reuse`, a finished run in `artifacts/<profile>/<name>` from the same start with the same
    settings is returned as recorded (log history and samples included) instead of being retrained.
    """
    from trl import GRPOConfig, GRPOTrainer

    from ..agent.rewards import build_reward_funcs

    profile = get_profile(profile)
    torch.set_num_threads(profile.torch_threads)
    train = train if train is not None else grpo_records(profile)
    train = train.remove_columns([c for c in ("completion",) if c in train.column_names])
    out_dir = artifacts_dir(profile) / name
    is_adapter = start is not None and (Path(start) / "adapter_config.json").exists()
    steps = max_steps or profile.grpo_steps
    config = GRPOConfig(
        output_dir=str(out_dir), max_steps=steps, learning_rate=profile.grpo_lr, lr_scheduler_type="constant",
        per_device_train_batch_size=profile.grpo_prompts_per_step * profile.num_generations,
        num_generations=profile.num_generations, max_completion_length=profile.max_completion_length,
        temperature=profile.temperature, beta=profile.beta, top_entropy_quantile=profile.top_entropy_quantile,
        num_iterations=profile.grpo_iterations, reward_weights=list(profile.reward_weights[:len(reward_names)]),
        logging_steps=1, **grpo_save_kwargs(profile, steps), report_to=[],
        seed=profile.seed if profile.train_seed is None else profile.train_seed,
        gradient_checkpointing=profile.gradient_checkpointing, log_completions=False, dataloader_num_workers=0,
        disable_tqdm=bool(os.environ.get("CI")), **_device_kwargs(profile),
    )
    knobs = {k: getattr(config, k) for k in GRPO_KNOBS}
    if reuse and (done := _finished_run(out_dir, start, list(reward_names), knobs, len(train))):
        return done
    shutil.rmtree(out_dir / "selected", ignore_errors=True)  # chosen among the checkpoints of an older run
    from .models import load_checkpoint
    model, processor = load_checkpoint(profile, start, trainable=True)
    processor.tokenizer.padding_side = "left"
    peft_config = _lora_config(profile) if (profile.lora and not is_adapter) else None
    trainer = GRPOTrainer(model=model, args=config, train_dataset=train, processing_class=processor,
                          reward_funcs=build_reward_funcs(reward_names, profile), peft_config=peft_config,
                          callbacks=callbacks)
    final, seconds = fit(trainer, out_dir, resume)
    adapter = (final / "adapter_config.json").exists()
    samples = _last_samples(trainer)
    (final / "inquire_train.json").write_text(json.dumps({
        "stage": "grpo", "profile": profile.name, "start": start, "adapter": adapter, "base": base_of(start, profile),
        "seconds": seconds, "rewards": list(reward_names), "config": knobs, "n_examples": len(train),
        "log_history": trainer.state.log_history, "samples": samples}, default=str))
    return TrainResult(str(final), adapter, trainer.state.log_history, len(train), seconds, samples)


def _finished_run(out_dir: Path, start: str | None, reward_names: list, knobs: dict, n_examples: int) -> TrainResult | None:
    """The recorded result of a finished GRPO run with exactly these inputs, else None."""
    meta = out_dir / "final" / "inquire_train.json"
    if not meta.exists():
        return None
    rec = json.loads(meta.read_text())
    same = (rec.get("start") == start and rec.get("rewards") == reward_names and rec.get("n_examples") == n_examples
            and json.loads(json.dumps(knobs, default=str)) == rec.get("config"))
    if not same or "log_history" not in rec:
        return None
    return TrainResult(str(out_dir / "final"), rec["adapter"], rec["log_history"], n_examples, rec["seconds"], rec["samples"])


def _last_samples(trainer) -> list[dict]:
    """The trainer's buffer of its last generation batch (prompts, completions, rewards, advantages)."""
    logs = getattr(trainer, "_logs", None) or {}
    completions = list(logs.get("completion", []))
    rewards = {k: list(v) for k, v in logs.get("rewards", {}).items()}
    advantages = list(logs.get("advantages", []))
    out = []
    for i, c in enumerate(completions):
        text = c if isinstance(c, str) else (c[0]["content"] if isinstance(c[0].get("content"), str) else
                                             "".join(part.get("text", "") for part in c[0]["content"]))
        out.append({"completion": text, "rewards": {k: v[i] for k, v in rewards.items() if i < len(v)},
                    "advantage": advantages[i] if i < len(advantages) else float("nan")})
    return out
