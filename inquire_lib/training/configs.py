"""One builder per trainer config, from a profile: what the library trains with and what the
benchmarks' bare-TRL baselines train with are the same objects.

- `sft_config`: TRL `SFTConfig` of stage 0 (base agent) and stage 1 (SFT);
- `grpo_config`: TRL `GRPOConfig` of stage 2 (action-level GRPO);
- `task_grpo_config`: TRL `GRPOConfig` of stage 3 (task-level GRPO in PhoneEnv);
- `lora_config`, `quantization_config`: the PEFT adapter and the 4-bit loading a profile asks for.

Batches are global: each builder splits the profile's batch over the processes ($WORLD_SIZE, or
`processes`) and the stage's gradient accumulation (`devices.batch_kwargs`).

Defaults live in `Profile` only. A setting that is TRL's own names, in its metadata, the TRL field it
fills for each builder (`"trl": {"grpo_config": "beta", ...}`); `trl_kwargs` hands those on, so a builder lists
only what it computes. What is kept beside a checkpoint is the config's own dict (`config_record`), so a recorded
run says every setting TRL ran with under TRL's own name.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..profiles import GRPOSettings, ModelSettings, Profile, StageSettings, fields_affecting
from .devices import batch_kwargs, vllm_kwargs

# the profile fields that shape stage 2 (the GRPO notebook shows and records them): the GRPOConfig's
# inputs, the rewards' penalties, the prompt mix and the checkpoint choice on validation, as their
# metadata says (`profiles.AFFECTS`)
GRPO_SETTINGS = fields_affecting("grpo")
# config fields that do not change what is trained (progress bars follow the CI variable)
_NOT_RECORDED = ("disable_tqdm",)


def trl_kwargs(profile: Profile, builder: str) -> dict:
    """The TRL config fields `builder` ("sft_config", "grpo_config", "task_grpo_config") takes straight from the
    profile: each setting whose metadata names the TRL field it fills for that builder, under TRL's name."""
    return {
        f.metadata["trl"][builder]: getattr(profile, f.name)
        for f in dataclasses.fields(profile)
        if builder in f.metadata.get("trl", {})
    }


def train_seed(profile: StageSettings) -> int:
    """The seed of a training run: `train_seed` where set (ablation and GRPO seeds), else the profile's seed."""
    return profile.seed if profile.train_seed is None else profile.train_seed


def _common(profile: StageSettings) -> dict:
    """Settings every trainer of the workbench shares: device, precision, logging, seed."""
    import torch

    from ..runs.hardware import uses_bf16

    cpu = not torch.cuda.is_available()
    return {
        "use_cpu": cpu,
        "bf16": uses_bf16(profile),
        "report_to": [],
        "seed": train_seed(profile),
        "activation_checkpointing": profile.gradient_checkpointing,
        "dataloader_num_workers": 0,
        "disable_tqdm": os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"},
    }


def lora_config(profile: ModelSettings, modules_to_save: tuple[str, ...] = ()):
    """The PEFT LoRA adapter on the language model's projections; `modules_to_save` are trained in
    full beside it and saved with it (stage 0 of a pretrained model: its new vision tower, "visual")."""
    from peft import LoraConfig

    return LoraConfig(
        r=profile.lora_r,
        lora_alpha=profile.lora_alpha,
        lora_dropout=profile.lora_dropout,
        target_modules=r".*language_model.*\.(" + "|".join(profile.lora_targets) + ")$",
        modules_to_save=list(modules_to_save) or None,
        task_type="CAUSAL_LM",
    )


def quantization_config(profile: ModelSettings):
    """4-bit NF4 with double quantisation (the vision tower and the head stay in full precision),
    or None when the profile loads full weights."""
    if not profile.load_in_4bit:
        return None
    import torch
    from transformers import BitsAndBytesConfig

    compute = torch.bfloat16 if (profile.bf16 and torch.cuda.is_available()) else torch.float32
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=compute,
        bnb_4bit_use_double_quant=True,
        llm_int8_skip_modules=["model.visual", "visual", "lm_head"],
    )


def sft_config(
    profile: Profile,
    out_dir: str | Path,
    steps: int | None = None,
    lr: float | None = None,
    warmup: int | None = None,
    processes: int | None = None,
):
    """SFT on the completion tokens only, cosine schedule; `steps`, `lr` and `warmup` default to
    stage 1's (`sft_steps`, `sft_lr`, `sft_warmup_steps`); the base agent passes its own."""
    from trl import SFTConfig

    steps = steps or profile.sft_steps
    kwargs = trl_kwargs(profile, "sft_config")  # max_steps, learning_rate, warmup_steps, save_steps
    kwargs.update(max_steps=steps)
    kwargs.update({} if lr is None else {"learning_rate": lr})
    kwargs.update({} if warmup is None else {"warmup_steps": warmup})
    return SFTConfig(
        output_dir=str(out_dir),
        **kwargs,
        **batch_kwargs(profile, "sft", processes),
        lr_scheduler_type="cosine",
        weight_decay=0.0,
        logging_steps=max(1, steps // 50),
        # a run that saves part-way keeps every checkpoint: they are the points of its learning curve
        # (`evaluation.fork_curve`); one that saves only at its end keeps the trainer's usual two
        save_total_limit=None if profile.sft_save_steps < steps else 2,
        max_length=None,
        completion_only_loss=True,
        **_common(profile),
    )


def grpo_save_kwargs(profile: GRPOSettings, steps: int) -> dict:
    """Checkpointing of a GRPO run: every `grpo_save_steps` steps, all kept for validation to choose
    from (`training.selection`); without it, a third of the run, the last two kept for resuming."""
    if profile.grpo_save_steps:
        return {"save_steps": profile.grpo_save_steps, "save_total_limit": None}
    return {"save_steps": max(1, steps // 3), "save_total_limit": 2}


def reward_weights(profile: GRPOSettings, reward_names) -> list[float]:
    """The weight of each named reward, in the order of `reward_names`: the profile's `reward_weights`, 1.0
    for a reward it does not name (TRL's own default), so a new reward needs no weight to be summed."""
    return [float(profile.reward_weights.get(n, 1.0)) for n in reward_names]


def grpo_config(
    profile: Profile, out_dir: str | Path, reward_names=None, steps: int | None = None, processes: int | None = None
):
    """Action-level GRPO: `grpo_prompts_per_step` prompts x `num_generations` completions a step,
    constant learning rate `grpo_lr`, KL weight `beta`, loss on the `top_entropy_quantile` tokens."""
    from trl import GRPOConfig

    steps = steps or profile.grpo_steps
    reward_names = profile.reward_funcs if reward_names is None else reward_names
    return GRPOConfig(
        output_dir=str(out_dir),
        # learning_rate, num_generations, max_completion_length, temperature, beta, top_entropy_quantile,
        # num_iterations, loss_type, scale_rewards
        **{**trl_kwargs(profile, "grpo_config"), "max_steps": steps},
        lr_scheduler_type="constant",
        **batch_kwargs(profile, "grpo", processes),
        reward_weights=reward_weights(profile, reward_names),
        logging_steps=1,
        log_completions=False,
        **grpo_save_kwargs(profile, steps),
        **vllm_kwargs(profile),
        **_common(profile),
    )


def task_grpo_config(
    profile: Profile,
    out_dir: str | Path,
    max_completion_length: int,
    steps: int | None = None,
    processes: int | None = None,
):
    """Task-level GRPO: `task_num_generations` episodes per task, at most `max_episode_steps` tool
    calls each; `max_completion_length` is the whole episode's token budget, each turn's answer is
    bounded like a stage 1-2 completion."""
    from trl import GRPOConfig

    steps = steps or profile.task_grpo_steps
    return GRPOConfig(
        output_dir=str(out_dir),
        # learning_rate, num_generations, max_tool_calling_iterations, temperature, beta, loss_type, scale_rewards
        **{**trl_kwargs(profile, "task_grpo_config"), "max_steps": steps},
        lr_scheduler_type="constant",
        **batch_kwargs(profile, "task", processes),
        max_completion_length=max_completion_length,
        logging_steps=1,
        save_steps=max(1, steps // 3),
        save_total_limit=2,
        log_completions=False,
        generation_kwargs={"max_new_tokens": profile.max_completion_length},
        **_common(profile),
    )


def config_record(config) -> dict:
    """The config's own dict as plain JSON (what is kept beside a checkpoint and compared on reuse)."""
    record = {k: v for k, v in config.to_dict().items() if k not in _NOT_RECORDED}
    return json.loads(json.dumps(record, default=str))
