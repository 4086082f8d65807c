"""The gpu profile made right, checked on CPU: model override and offline loading, the CUDA check,
global batches split over processes and accumulation, every trainer config field by field, fp32
adapters, explicit evaluation decoding, the manifest's device fields, accelerate configs, and one
GRPO step of the gpu profile with the tiny model standing in for the 3B one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inquire_lib.profiles import PROFILES, get_profile, parse_overrides
from inquire_lib.training import devices
from inquire_lib.training.budget import GB, QWEN25_VL, estimate_memory, gpu_workloads, tokens_per_forward

ROOT = Path(__file__).resolve().parents[1]
GPU = get_profile("gpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The smoke tiny model, in a private cache."""
    root = tmp_path_factory.mktemp("scaling")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_CACHE", str(root / "cache"))
        from inquire_lib.training.models import model_path

        yield root, model_path(get_profile("smoke"))


# ----------------------------------------------------------------------------- the gpu profile
def test_gpu_profile_carries_the_cpu_findings():
    cpu = PROFILES["cpu"]
    for field in (
        "missed_penalty",
        "needless_penalty",
        "top_entropy_quantile",
        "beta",
        "grpo_inquiry_share",
        "grpo_followup_share",
        "grpo_detour_share",
        "reward_funcs",
        "reward_weights",
        "select_max_needless_steps",
        "select_max_safe_drop",
        "select_max_needless_episodes",
        "temperature",
    ):
        assert getattr(GPU, field) == getattr(cpu, field), field
    assert (GPU.missed_penalty, GPU.needless_penalty, GPU.top_entropy_quantile, GPU.beta) == (2.0, 1.5, 0.2, 0.04)
    assert (cpu.grpo_inquiry_share, cpu.grpo_followup_share, cpu.grpo_detour_share) == (0.5, 0.2, 0.05)
    assert "reasoned_ask" in cpu.reward_funcs and cpu.reward_weights["reasoned_ask"] == 2.0
    assert cpu.select_max_needless_episodes == 0.10 and cpu.grpo_steps == 300
    assert GPU.grpo_save_steps == 50 and GPU.requires_cuda and GPU.load_in_4bit and GPU.bf16
    assert not PROFILES["cpu"].requires_cuda and not PROFILES["smoke"].requires_cuda


def test_set_overrides_are_typed_and_checked():
    assert parse_overrides(
        [
            "model=/models/qwen",
            "use_vllm=true",
            "grpo_lr=2e-5",
            "grpo_grad_accum=4",
            "lora_targets=q_proj,v_proj",
            "reward_weights=format:1,action:1,inquiry:2",
        ]
    ) == {
        "model": "/models/qwen",
        "use_vllm": True,
        "grpo_lr": 2e-5,
        "grpo_grad_accum": 4,
        "lora_targets": ("q_proj", "v_proj"),
        "reward_weights": {"format": 1.0, "action": 1.0, "inquiry": 2.0},
    }
    for bad in (["nosuchfield=1"], ["model"], ["use_vllm=maybe"], ["grpo_steps=ten"]):
        with pytest.raises(ValueError, match=bad[0].split("=")[0]):
            parse_overrides(bad)


def test_a_profile_that_needs_cuda_refuses_the_cpu(monkeypatch):
    monkeypatch.delenv(devices.ALLOW_CPU_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(devices.DeviceError, match="needs a CUDA GPU.*INQUIRE_ALLOW_CPU=1"):
        devices.require_device(GPU)
    devices.require_device(PROFILES["cpu"])  # no error
    monkeypatch.setenv(devices.ALLOW_CPU_ENV, "1")
    devices.require_device(GPU)
    from inquire_lib import cli

    monkeypatch.delenv(devices.ALLOW_CPU_ENV)
    assert cli.main(["train", "sft", "--profile", "gpu"]) == 2


def test_model_override_and_offline_loading(tiny, monkeypatch):
    _, path = tiny
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(devices.MODEL_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tiny[0] / "empty-hub"))
    with pytest.raises(FileNotFoundError, match="HF_HUB_OFFLINE=1.*INQUIRE_MODEL=/path/to/model"):
        devices.resolve_model(GPU)
    assert devices.resolve_model(GPU.replace(model=path)) == path  # --set model=DIR
    monkeypatch.setenv(devices.MODEL_ENV, path)
    assert devices.resolve_model(GPU) == path
    from inquire_lib.training.models import model_path

    assert model_path(GPU) == path


# ------------------------------------------------------------------------ batches and tokens
def test_global_batch_split_over_processes_and_accumulation():
    assert devices.batch_kwargs(GPU, "sft", 1) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4}
    assert devices.batch_kwargs(GPU, "grpo", 1) == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 8}
    assert devices.batch_kwargs(GPU, "grpo", 4) == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 8}
    assert devices.batch_kwargs(GPU, "task", 1) == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 16}
    smoke = PROFILES["smoke"]
    assert devices.batch_kwargs(smoke, "sft", 2)["per_device_train_batch_size"] == 2
    assert devices.batch_kwargs(smoke, "grpo", 2)["per_device_train_batch_size"] == 4
    for name, p in PROFILES.items():  # one process: the cpu and smoke runs are unchanged
        assert devices.batch_kwargs(p, "sft", 1)["per_device_train_batch_size"] * p.sft_grad_accum == p.sft_batch
    with pytest.raises(ValueError, match="does not split"):
        devices.batch_kwargs(GPU, "grpo", 3)


# tokens per forward pass a profile may put through the model, per stage: the gpu bounds keep the
# estimated peak of Qwen2.5-VL-3B QLoRA under 24 GB for stages 1-2 and 40 GB for stage 3
# (cpu stage 3: 16 episodes of at most 4,000 tokens at once is ~6 GB of the tiny model's activations;
# its episodes end far earlier)
TOKEN_BOUNDS = {
    "smoke": {"sft": 4_000, "grpo": 4_000, "task": 12_000},
    "cpu": {"sft": 10_000, "grpo": 20_000, "task": 64_000},
    # SmolLM2-135M on 24 GB: stage 0 ran 8 x ~350 tokens a step (RSS 9-14 GB); stage 3 one episode a pass
    "small": {"sft": 4_500, "grpo": 4_500, "task": 6_000},
    "quick": {"sft": 4_500, "grpo": 4_500, "task": 6_000},  # small's settings, so small's bounds
    "gpu": {"sft": 4_000, "grpo": 6_000, "task": 14_000},
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("stage", ["sft", "grpo", "task"])
def test_tokens_per_forward_pass_are_bounded(name, stage):
    tokens = tokens_per_forward(PROFILES[name], stage)
    assert 0 < tokens <= TOKEN_BOUNDS[name][stage]


def test_prompt_text_fits_its_token_allowance(tiny):
    from inquire_lib.agent.prompts import frame_for, system_prompt, user_text
    from inquire_lib.training.budget import PROMPT_TEXT_TOKENS
    from inquire_lib.data.benchmark import benchmark

    frame = frame_for(GPU)
    records = benchmark(get_profile("smoke"))["train"]
    longest = max(len(system_prompt()) + len(user_text(r, True, 2, frame, True)) for r in records)
    assert 500 < longest and longest / 3 + 64 < PROMPT_TEXT_TOKENS  # 3 characters a token, 64 for the template


def test_gpu_stages_fit_their_gpus_by_estimate():
    spec = QWEN25_VL["3B"]
    sft, grpo, task = gpu_workloads()
    for w, limit in ((sft, 24), (grpo, 24), (task, 40)):
        mem = estimate_memory(spec, "qlora", w.micro_batch, w.seq_len, w.logit_positions, generation=w.generation)
        assert mem["total"] < limit * GB, (w.stage, mem["total"] / GB)
    # the micro-batches that did not fit: stage 3 with all 16 episodes at once, stage 2 with 32 sequences
    whole = estimate_memory(spec, "qlora", 16, task.seq_len, task.logit_positions)
    assert whole["total"] > 80 * GB
    assert estimate_memory(spec, "qlora", 32, grpo.seq_len, grpo.logit_positions)["total"] > 20 * GB


# ---------------------------------------------------------------------------- trainer configs
def test_every_gpu_trainer_config_field_by_field(tmp_path):
    from inquire_lib.training.configs import grpo_config, sft_config, task_grpo_config
    from inquire_lib.training.task_grpo import episode_token_budget

    sft = sft_config(GPU, tmp_path / "sft", processes=1)
    expect = {
        "max_steps": 1000,
        "learning_rate": 1e-4,
        "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 4,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 30,
        "save_steps": 200,
        "gradient_checkpointing": True,
        "completion_only_loss": True,
        "max_length": None,
        "use_cpu": not torch.cuda.is_available(),
        "bf16": torch.cuda.is_available(),
        "seed": 0,
    }
    assert {
        k: (getattr(sft, k).value if hasattr(getattr(sft, k), "value") else getattr(sft, k)) for k in expect
    } == expect

    grpo = grpo_config(GPU, tmp_path / "grpo", processes=1)
    expect = {
        "max_steps": 300,
        "learning_rate": 1e-5,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 8,
        "steps_per_generation": 8,
        "generation_batch_size": 32,
        "num_generations": 8,
        "max_completion_length": 256,
        "temperature": 1.0,
        "beta": 0.04,
        "top_entropy_quantile": 0.2,
        "num_iterations": 1,
        "reward_weights": [1.0, 1.0, 1.0, 2.0],
        "save_steps": 50,
        "save_total_limit": None,
        "gradient_checkpointing": True,
        "use_vllm": False,
        "use_cpu": not torch.cuda.is_available(),
        "bf16": torch.cuda.is_available(),
    }
    assert {k: getattr(grpo, k) for k in expect} == expect

    task = task_grpo_config(GPU, tmp_path / "task", episode_token_budget(GPU), processes=1)
    expect = {
        "max_steps": 20,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 16,
        "generation_batch_size": 16,
        "num_generations": 4,
        "max_completion_length": episode_token_budget(GPU),
        "max_tool_calling_iterations": 15,
        "beta": 0.04,
        "learning_rate": 1e-5,
        "generation_kwargs": {"max_new_tokens": 256},
    }
    assert {k: getattr(task, k) for k in expect} == expect
    assert episode_token_budget(GPU) == 15 * (256 + 224 + 13 * 26)

    on4 = grpo_config(GPU, tmp_path / "g4", steps=10, processes=4)  # 4 GPUs: same 32 completions a step
    assert (on4.per_device_train_batch_size, on4.gradient_accumulation_steps) == (1, 8)

    vllm = grpo_config(GPU.replace(use_vllm=True), tmp_path / "v", steps=10, processes=1)
    assert (vllm.use_vllm, vllm.vllm_mode, vllm.vllm_gpu_memory_utilization) == (True, "colocate", 0.3)
    server = grpo_config(
        GPU.replace(**parse_overrides(["use_vllm=true", "vllm_mode=server"])), tmp_path / "s", steps=10, processes=1
    )
    assert (server.use_vllm, server.vllm_mode) == (True, "server")
    with pytest.raises(ValueError, match="vllm_mode"):
        devices.vllm_kwargs(GPU.replace(vllm_mode="remote"))


# --------------------------------------------------------------- one gpu-profile step, fp32 LoRA
def _changed_fraction(start: torch.Tensor, dtype: torch.dtype, steps: int = 5, lr: float = 1e-5) -> float:
    """Entries of `start` that AdamW at `lr` moves in `steps` steps when the parameter is kept in `dtype`."""
    gen = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(start.detach().clone().to(dtype))
    opt = torch.optim.AdamW([p], lr=lr, weight_decay=0.0)
    for _ in range(steps):
        p.grad = torch.randn(p.shape, generator=gen).to(dtype)
        opt.step()
    return (p.detach().float() != start.float()).float().mean().item()


@pytest.mark.slow
def test_one_gpu_profile_grpo_step_with_the_tiny_model_and_fp32_adapters(tiny, monkeypatch):
    """The gpu profile (4-bit QLoRA r 64, 4 prompts x 8 completions, 8 accumulation steps of 4,
    screenshots of 338 image tokens, lr 1e-5, KL 0.04, entropy mask), the model replaced by the tiny
    one through INQUIRE_MODEL, bf16 off on CPU, and completions cut from 256 to 64 tokens (sampling
    256 tokens 32 times is most of this test's time on CPU; the 256 is checked in the config test)."""
    from transformers import TrainerCallback

    from inquire_lib.training.grpo import grpo, grpo_records

    root, path = tiny
    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(root / "artifacts"))
    monkeypatch.setenv(devices.ALLOW_CPU_ENV, "1")
    monkeypatch.setenv(devices.MODEL_ENV, path)
    monkeypatch.setenv("CI", "1")
    profile = GPU.replace(benchmark_tasks=36, torch_threads=1, max_completion_length=64)
    seen = {}

    class Inspect(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            lora = {n: p for n, p in model.named_parameters() if p.requires_grad}
            seen["dtypes"] = {p.dtype for p in lora.values()}
            seen["lora_A"] = next(p.detach().to("cpu", copy=True) for n, p in lora.items() if "lora_A" in n)
            seen["args"] = args

    res = grpo(
        profile, start=None, name="gpu_tiny", max_steps=1, train=grpo_records(profile, n=4), callbacks=[Inspect()]
    )
    assert seen["dtypes"] == {torch.float32}  # TRL made them bf16; keep_adapter_fp32 undid it
    args = seen["args"]
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.num_generations) == (4, 8, 8)
    # bf16 on a GPU, as the profile says; off on CPU (bitsandbytes' CPU 4-bit kernels are fp32)
    assert (args.learning_rate, args.bf16, args.beta, args.top_entropy_quantile) == (
        1e-5,
        torch.cuda.is_available(),
        0.04,
        0.2,
    )
    assert args.gradient_checkpointing and args.max_completion_length == 64
    assert [h["loss"] for h in res.log_history if "loss" in h] and res.adapter
    meta = json.loads((Path(res.path) / "inquire_train.json").read_text())
    assert meta["base"] == path and meta["config"]["per_device_train_batch_size"] == 4
    # why fp32: 5 AdamW steps at the gpu learning rate on the adapter's own lora_A entries
    lora_a = seen["lora_A"]
    assert _changed_fraction(lora_a, torch.float32) > 0.99
    assert _changed_fraction(lora_a, torch.bfloat16) < 0.35


# ------------------------------------------------------------------ evaluation and the manifest
def test_evaluation_decoding_ignores_the_checkpoints_own_generation_config(tiny):
    from inquire_lib.evaluation.steps import eval_generation_config
    from inquire_lib.training.models import load_model_and_processor

    smoke = get_profile("smoke")
    model, processor = load_model_and_processor(smoke)
    config = eval_generation_config(smoke, processor)
    assert (config.do_sample, config.num_beams, config.repetition_penalty, config.max_new_tokens) == (False, 1, 1.0, 48)
    ids = processor.tokenizer("Task: Send the report History: none", return_tensors="pt")
    plain = model.generate(**ids, generation_config=config)
    model.generation_config.repetition_penalty = 1.5  # as a hub checkpoint ships its own (Qwen: 1.05)
    model.generation_config.do_sample = True
    assert torch.equal(model.generate(**ids, generation_config=eval_generation_config(smoke, processor)), plain)
    penalised = eval_generation_config(smoke.replace(eval_repetition_penalty=1.5), processor)
    assert not torch.equal(model.generate(**ids, generation_config=penalised), plain)


def test_manifest_records_device_cuda_and_dtype():
    from inquire_lib.runs.notebooks import run_manifest

    dev = run_manifest("gpu")["device"]
    assert set(dev) == {
        "device",
        "device_name",
        "gpu_count",
        "cuda_version",
        "cudnn_version",
        "dtype",
        "cpu_kind",
        "cpu_model",
        "cpu_flags",
        "bf16_probe",
        "load_in_4bit",
        "processes",
    }
    assert dev["cpu_kind"] in ("amx", "avx512_bf16", "avx512", "avx2", "other")
    # measured wherever the flags allow bf16 on a CPU, since whether it is used depends on it
    probe = dev["bf16_probe"]
    assert (probe is None) == (torch.cuda.is_available() or dev["cpu_kind"] not in ("amx", "avx512_bf16"))
    assert probe is None or set(probe) == {"fp32_ms", "bf16_ms", "speedup", "pays"}
    assert set(dev["cpu_flags"]) <= {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    assert dev["cuda_version"] == torch.version.cuda and dev["processes"] == 1 and dev["load_in_4bit"] is True
    assert dev["dtype"] == ("bfloat16" if torch.cuda.is_available() else "float32")
    assert dev["device"] == ("cuda" if torch.cuda.is_available() else "cpu")


def test_training_and_the_manifest_agree_on_bf16(tmp_path):
    from inquire_lib.runs.hardware import cpu_has_native_bf16, uses_bf16
    from inquire_lib.runs.notebooks import device_info
    from inquire_lib.training.configs import grpo_config

    with_bf16, without = tmp_path / "a", tmp_path / "b"
    with_bf16.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f\n")
    assert cpu_has_native_bf16(with_bf16) and not cpu_has_native_bf16(without)
    assert not cpu_has_native_bf16(tmp_path / "missing")
    cpu, gpu = get_profile("cpu"), get_profile("gpu")
    assert cpu.cpu_bf16 and not cpu.load_in_4bit and gpu.bf16 and gpu.load_in_4bit
    assert uses_bf16(cpu, cuda=False, native_bf16=True) and not uses_bf16(cpu, cuda=False, native_bf16=False)
    assert not uses_bf16(gpu, cuda=False, native_bf16=True)  # bitsandbytes' CPU 4-bit kernels are fp32
    assert uses_bf16(gpu, cuda=True) and not uses_bf16(gpu.replace(bf16=False), cuda=True)
    # the cpu profile on this machine: what the trainer is told is what the manifest records
    config = grpo_config(cpu, tmp_path / "out", ("format",), 1)
    assert device_info(cpu)["dtype"] == ("bfloat16" if config.bf16 else "float32")
    assert config.bf16 == uses_bf16(cpu)


# ------------------------------------------------------------------------- accelerate configs
CONFIGS = {
    "single_gpu": ("NO", 1, None),
    "multi_gpu": ("MULTI_GPU", 4, None),
    "zero2": ("DEEPSPEED", 4, 2),
    "zero3": ("DEEPSPEED", 4, 3),
}


def test_every_accelerate_config_loads_with_accelerates_own_loader():
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DeepSpeedPlugin

    files = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))
    assert [f.stem for f in files] == sorted(CONFIGS)
    for f in files:
        kind, processes, stage = CONFIGS[f.stem]
        text = f.read_text()
        assert text.startswith("# ") and "accelerate launch --config_file configs/accelerate/" + f.name in text
        cfg = load_config_from_file(str(f))
        assert (cfg.distributed_type.value, cfg.num_processes, cfg.use_cpu) == (kind, processes, False)
        if stage:
            ds_file = ROOT / cfg.deepspeed_config["deepspeed_config_file"]
            plugin = DeepSpeedPlugin(hf_ds_config=str(ds_file))
            assert plugin.zero_stage == stage == json.loads(ds_file.read_text())["zero_optimization"]["stage"]
            assert plugin.hf_ds_config.is_zero3() == (stage == 3)
            assert cfg.deepspeed_config["zero3_init_flag"] == (stage == 3)
        else:
            assert getattr(cfg.mixed_precision, "value", cfg.mixed_precision) == "bf16"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_accelerate_launch_parses_each_config(name):
    """`accelerate launch --config_file X` reads and validates the file, then starts the command
    (on CPU: `--cpu` and one process, and `train --help`, which prints and exits)."""
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        f"configs/accelerate/{name}.yaml",
        "--cpu",
        "--num_processes",
        "1",
        "-m",
        "inquire_lib.cli",
        "train",
        "--help",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "{base,sft,grpo,task-grpo}" in proc.stdout and "--start-from" in proc.stdout
