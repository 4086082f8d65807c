"""Seconds per GRPO step of `inquire_lib.training.train.grpo` against a bare TRL `GRPOTrainer`.

Both start from the same SFT output (made here with `train.sft(profile, max_steps=2)`, an adapter
on the base agent when the profile uses LoRA), train on the same records with the same reward
functions (`rewards.build_reward_funcs`) and settings, in the same process, interleaved (ours,
bare, ours, bare, ...). Seconds per step = train_runtime / max_steps, train_runtime as the trainer
reports it; the median time of a step (first step excluded) is reported too.

    python benchmarks/grpo_step.py [--profile smoke] [--steps 8] [--repeats 3] [--threads 1]

Writes benchmarks/results/grpo_step.json. Checkpoints go to a temporary INQUIRE_ARTIFACTS.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import step_timer, train_runtime  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "grpo_step.json"
REQUIRED_RATIO = 1.05  # ours / bare seconds per step
REWARDS = ("format", "action", "inquiry")


def run_ours(profile, start: str, records, steps: int, name: str) -> dict:
    from inquire_lib.training import train

    timer = step_timer()
    res = train.grpo(profile, start=start, name=name, max_steps=steps, train=records, reward_names=REWARDS,
                     callbacks=[timer])
    return {"log_history": res.log_history, "step_times": timer.times}


def run_bare(profile, base: str, start: str, records, steps: int, out_dir: Path) -> dict:
    """A plain TRL GRPOTrainer with the settings `train.grpo` derives from the profile."""
    import torch
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor, BitsAndBytesConfig
    from trl import GRPOConfig, GRPOTrainer

    from inquire_lib.training.models import model_path
    from inquire_lib.agent.rewards import build_reward_funcs
    from inquire_lib.training.train import grpo_save_kwargs

    torch.set_num_threads(profile.torch_threads)
    cuda = torch.cuda.is_available()
    kwargs = {"dtype": torch.float32}
    if profile.load_in_4bit:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32,
            bnb_4bit_use_double_quant=True, llm_int8_skip_modules=["visual", "model.visual", "lm_head"])
    if cuda:
        kwargs["device_map"] = {"": 0}
    adapter = (Path(start) / "adapter_config.json").exists()
    model = AutoModelForImageTextToText.from_pretrained(base if adapter else start, **kwargs)
    if adapter:
        model = PeftModel.from_pretrained(model, start, is_trainable=True)
    processor = AutoProcessor.from_pretrained(model_path(profile))
    processor.tokenizer.padding_side = "left"
    peft_config = None
    if profile.lora and not adapter:
        peft_config = LoraConfig(
            r=profile.lora_r, lora_alpha=profile.lora_alpha, lora_dropout=profile.lora_dropout, task_type="CAUSAL_LM",
            target_modules=r".*language_model.*\.(" + "|".join(profile.lora_targets) + ")$")
    config = GRPOConfig(
        output_dir=str(out_dir), max_steps=steps, learning_rate=profile.grpo_lr, lr_scheduler_type="constant",
        per_device_train_batch_size=profile.grpo_prompts_per_step * profile.num_generations,
        num_generations=profile.num_generations, max_completion_length=profile.max_completion_length,
        temperature=profile.temperature, beta=profile.beta, reward_weights=list(profile.reward_weights[:len(REWARDS)]),
        top_entropy_quantile=profile.top_entropy_quantile, num_iterations=profile.grpo_iterations,
        logging_steps=1, **grpo_save_kwargs(profile, steps), report_to=[], seed=profile.seed,
        gradient_checkpointing=profile.gradient_checkpointing, log_completions=False, dataloader_num_workers=0,
        disable_tqdm=True, use_cpu=not cuda, bf16=bool(profile.bf16 and cuda),
    )
    timer = step_timer()
    trainer = GRPOTrainer(model=model, args=config, train_dataset=records, processing_class=processor,
                          reward_funcs=build_reward_funcs(REWARDS, profile), peft_config=peft_config,
                          callbacks=[timer])
    trainer.train()
    return {"log_history": trainer.state.log_history, "step_times": timer.times}


def summarise(who: str, out: dict, steps: int) -> dict:
    runtime = train_runtime(out["log_history"])
    later = sorted(out["step_times"][1:] or out["step_times"])
    steps_logged = [e for e in out["log_history"] if "reward" in e]
    return {"who": who, "train_runtime_s": round(runtime, 4), "seconds_per_step": round(runtime / steps, 4),
            "median_step_s": round(statistics.median(later), 4),
            # load from other processes only adds time: the fast steps are the least disturbed view
            "p20_step_s": round(later[len(later) // 5], 4), "loadavg_1m": round(os.getloadavg()[0], 2),
            "steps_timed": len(out["step_times"]),
            "mean_reward": round(statistics.fmean(e["reward"] for e in steps_logged), 4) if steps_logged else None,
            "mean_completion_length": round(statistics.fmean(e["completions/mean_length"] for e in steps_logged
                                                             if "completions/mean_length" in e), 2)
            if any("completions/mean_length" in e for e in steps_logged) else None}


def run(profile_name: str = "smoke", steps: int = 8, repeats: int = 3, threads: int = 1,
        out: Path | None = OUT) -> dict:
    os.environ.setdefault("CI", "1")  # no progress bars in either trainer
    artifacts = Path(tempfile.mkdtemp(prefix="inquire-bench-grpo-"))
    os.environ["INQUIRE_ARTIFACTS"] = str(artifacts)
    try:
        import torch

        from inquire_lib.training import train
        from inquire_lib.training.models import base_of
        from inquire_lib.profiles import get_profile
        from inquire_lib.runs.notebooks import write_json_atomic

        profile = get_profile(profile_name).replace(torch_threads=threads)
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        start = train.sft(profile, name="bench_sft_start", max_steps=2).path
        start_s = time.perf_counter() - t0
        base = base_of(start, profile)
        records = train.training_records(train.benchmark(profile)["train"], profile, 1.0)
        records = records.remove_columns(["completion"])
        runs = []
        for i in range(repeats):
            ours = run_ours(profile, start, records, steps, name=f"bench_ours_{i}")
            runs.append(summarise("ours", ours, steps))
            print(f"[{i}] ours {runs[-1]['seconds_per_step']:.3f} s/step", flush=True)
            bare = run_bare(profile, base, start, records, steps, artifacts / "bare" / str(i))
            runs.append(summarise("bare", bare, steps))
            print(f"[{i}] bare {runs[-1]['seconds_per_step']:.3f} s/step", flush=True)
        med = lambda who, key: statistics.median(r[key] for r in runs if r["who"] == who)  # noqa: E731
        ours_s, bare_s = med("ours", "seconds_per_step"), med("bare", "seconds_per_step")
        ratio = ours_s / bare_s
        # each ours run against the bare run right after it: the closest in machine load
        pairs = [o["train_runtime_s"] / b["train_runtime_s"] for o, b in zip(runs[0::2], runs[1::2])]
        result = {
            "benchmark": "grpo_step", "profile": profile.name, "model": profile.model, "lora": profile.lora,
            "load_in_4bit": profile.load_in_4bit, "steps": steps, "repeats": repeats, "torch_threads": threads,
            "prompts_per_step": profile.grpo_prompts_per_step, "num_generations": profile.num_generations,
            "max_completion_length": profile.max_completion_length, "beta": profile.beta, "rewards": list(REWARDS),
            "top_entropy_quantile": profile.top_entropy_quantile, "num_iterations": profile.grpo_iterations,
            "n_train_records": len(records), "start": "sft output, 2 steps", "start_seconds": round(start_s, 2),
            "runs": runs,
            "ours_seconds_per_step": round(ours_s, 4), "bare_seconds_per_step": round(bare_s, 4),
            "ratio": round(ratio, 4), "required_ratio": REQUIRED_RATIO, "meets_requirement": ratio <= REQUIRED_RATIO,
            "median_step_ratio": round(med("ours", "median_step_s") / med("bare", "median_step_s"), 4),
            "p20_step_ratio": round(med("ours", "p20_step_s") / med("bare", "p20_step_s"), 4),
            "pair_ratios": [round(p, 4) for p in pairs],
            "machine": {"platform": platform.platform(), "python": platform.python_version(),
                        "cpu_count": os.cpu_count(), "cuda": torch.cuda.is_available(), "torch": torch.__version__},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if out is not None:
            write_json_atomic(out, result)
        return result
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="ours/bare pairs, interleaved")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 leaves a core to others)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    r = run(a.profile, a.steps, a.repeats, a.threads, Path(a.out))
    print(f"GRPO seconds/step: ours {r['ours_seconds_per_step']:.3f}, bare TRL {r['bare_seconds_per_step']:.3f}, "
          f"ratio ours/bare {r['ratio']:.3f} (required <= {REQUIRED_RATIO}: "
          f"{'ok' if r['meets_requirement'] else 'NOT MET'}); by median step {r['median_step_ratio']:.3f}, "
          f"by 20th-percentile step {r['p20_step_ratio']:.3f}, pairs {r['pair_ratios']}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
