"""Where a run trains: the device check, the split of a global batch over processes and
micro-batches, fp32 adapters and vLLM generation (whether to train in bf16 is `runs.hardware`'s call,
made once for training and for the manifest that records it).

The stage functions (`sft.py`, `grpo.py`, `task_grpo.py`) run unchanged in one process (notebooks) or
in N processes started by `accelerate launch` or `torchrun` (the `inquire train` command); TRL and
accelerate do the distribution. What a profile states is the *global* batch of an optimizer step
(`sft_batch` sequences, `grpo_prompts_per_step x num_generations` completions), so a run on N
processes takes the same optimizer steps on the same number of examples as a run on one:

    per-device batch = global batch / (processes x gradient accumulation steps)
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..profiles import GRPOSettings, ModelSettings, Profile, StageSettings

ALLOW_CPU_ENV = "INQUIRE_ALLOW_CPU"  # "1": run a profile that requires CUDA on CPU anyway (tests)
MODEL_ENV = "INQUIRE_MODEL"  # a local folder (or hub id) that replaces a non-tiny profile's model


class DeviceError(RuntimeError):
    pass


def world_size() -> int:
    """Processes of this run: $WORLD_SIZE as `accelerate launch` and `torchrun` set it, else 1."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1")))


def is_main_process() -> bool:
    """Rank 0 of a multi-process run (or the only process): the one that writes metadata."""
    return int(os.environ.get("RANK", "0")) == 0


def wait_for_everyone() -> None:
    """A barrier across the processes of a run; nothing in one process."""
    if world_size() > 1:
        from accelerate import PartialState

        PartialState().wait_for_everyone()


def require_device(profile: StageSettings) -> None:
    """Raise DeviceError when the profile needs CUDA and none works (instead of a silent fp32 CPU
    run that would take days); $INQUIRE_ALLOW_CPU=1 allows it (the tiny model standing in)."""
    if not profile.requires_cuda or torch.cuda.is_available() or os.environ.get(ALLOW_CPU_ENV) == "1":
        return
    raise DeviceError(
        f"profile {profile.name!r} needs a CUDA GPU and torch sees none (torch {torch.__version__}, "
        f"built for CUDA {torch.version.cuda or 'none'}). Check `nvidia-smi` and that torch is a CUDA build; "
        f"use the cpu or smoke profile on CPU, or set {ALLOW_CPU_ENV}=1 to run it on CPU anyway."
    )


def per_device_batch(global_batch: int, grad_accum: int = 1, processes: int | None = None) -> int:
    """The micro-batch of one forward pass on one process; the split must be exact."""
    processes = world_size() if processes is None else processes
    share = processes * grad_accum
    if global_batch % share:
        raise ValueError(
            f"a global batch of {global_batch} does not split over {processes} process(es) x "
            f"{grad_accum} accumulation step(s); change the batch or the accumulation"
        )
    return global_batch // share


def batch_kwargs(profile: Profile, stage: str, processes: int | None = None) -> dict:
    """`per_device_train_batch_size` and `gradient_accumulation_steps` of a TRL config for a stage
    ("sft", "grpo", "task"): the profile's global batch split over processes and accumulation. For
    GRPO the batch counts completions and TRL generates one whole optimizer step's completions at
    once (`steps_per_generation` defaults to the accumulation), as in one process."""
    if stage == "sft":
        total, accum = profile.sft_batch, profile.sft_grad_accum
    elif stage == "grpo":
        total, accum = profile.grpo_prompts_per_step * profile.num_generations, profile.grpo_grad_accum
    elif stage == "task":
        total, accum = profile.grpo_prompts_per_step * profile.task_num_generations, profile.task_grad_accum
    else:
        raise ValueError(f"unknown stage {stage!r}")
    return {
        "per_device_train_batch_size": per_device_batch(total, accum, processes),
        "gradient_accumulation_steps": accum,
    }


def vllm_kwargs(profile: GRPOSettings) -> dict:
    """TRL's vLLM switches for GRPO generation, from the profile."""
    if profile.vllm_mode not in ("colocate", "server"):
        raise ValueError(f"vllm_mode must be 'colocate' or 'server', got {profile.vllm_mode!r}")
    out = {"use_vllm": profile.use_vllm}
    if profile.use_vllm:
        out["vllm_mode"] = profile.vllm_mode
        if profile.vllm_mode == "colocate":
            out["vllm_gpu_memory_utilization"] = profile.vllm_gpu_memory_utilization
    return out


def keep_adapter_fp32(model) -> int:
    """Cast every trainable parameter to fp32, in place; returns how many were cast.

    TRL casts the LoRA parameters of a quantised model to bf16 when it builds the trainer. An AdamW
    step at a small learning rate is then below bf16's resolution for most entries (at lr 1e-5 only
    17% of `lora_A` entries moved in 5 steps); fp32 master weights keep every update, and with bf16
    autocast the matmuls still run in bf16. Call after the trainer is built, before training.
    Under DeepSpeed ZeRO-3 nothing is cast: its parameter gathering needs one dtype throughout."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    if is_deepspeed_zero3_enabled():
        return 0
    n = 0
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
            n += 1
    return n


def token_mean_over_global_batch(trainer) -> None:
    """Make an SFTTrainer's loss the mean over every completion token of the optimizer step, across
    processes and accumulated micro-batches, as in one process with the whole batch.

    Qwen2.5-VL declares `accepts_loss_kwargs = False`, so `Trainer` neither counts the step's
    tokens nor passes the count on; TRL's SFT loss then averages each micro-batch on its own and
    DDP averages those means, which weighs a short micro-batch's tokens more (the first loss of a
    2-process smoke run was 6.6633 against 6.6678 in one process). TRL computes the loss itself
    from `num_items_in_batch`, so letting `Trainer` count is all it takes."""
    trainer.model_accepts_loss_kwargs = True


def prepare_trainer(trainer) -> None:
    """What every stage does to its trainer between building and training it: fp32 adapters, and
    for SFT the loss averaged over the whole step's tokens (see the two functions)."""
    from trl import SFTTrainer

    keep_adapter_fp32(trainer.model)
    if isinstance(trainer, SFTTrainer):
        token_mean_over_global_batch(trainer)


def resolve_model(profile: ModelSettings) -> str:
    """A non-tiny profile's model: $INQUIRE_MODEL when set, else the profile's `model`. With
    $HF_HUB_OFFLINE=1 a hub id must already be in the local cache; otherwise this says how to
    point at a local copy instead of failing deep inside `from_pretrained`."""
    source = os.environ.get(MODEL_ENV) or profile.model
    if Path(source).expanduser().is_dir():
        return str(Path(source).expanduser())
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        from huggingface_hub import snapshot_download

        try:
            return snapshot_download(source, local_files_only=True)
        except Exception as exc:  # not in the cache (or not a valid id)
            raise FileNotFoundError(
                f"model {source!r} is not a local folder and HF_HUB_OFFLINE=1 forbids a download "
                f"({type(exc).__name__}); point at a local copy with {MODEL_ENV}=/path/to/model or "
                f"`--set model=/path/to/model`"
            ) from None
    return source
