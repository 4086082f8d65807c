"""Seconds per GRPO step of `inquire_lib.training.train.grpo` against a bare TRL `GRPOTrainer`.

Both start from the same SFT output (made here with `train.sft(profile, max_steps=2)`, an adapter
on the base agent when the profile uses LoRA), train on the same records with the same reward
functions (`rewards.build_reward_funcs`) and settings, in the same process, interleaved (ours,
bare, ours, bare, ...). Seconds per step = train_runtime / max_steps, train_runtime as the trainer
reports it; the median time of a step (first step excluded) is reported too.

    python benchmarks/grpo_step.py [--profile smoke] [--steps 8] [--repeats 3] [--threads 1] [--set KEY=VALUE ...]

Both sum the profile's `reward_funcs` with its `reward_weights`; `--set` measures other settings (e.g. the
ones a GRPO stage is run with).

Writes benchmarks/results/grpo_step.json. Checkpoints go to a temporary INQUIRE_ARTIFACTS.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from _common import (
    RESULTS,
    bare_model,
    bench_profile,
    finish,
    private_artifacts,
    step_timer,
    train_runtime,
    trainer_parser,
)

OUT = RESULTS / "grpo_step.json"
REQUIRED_RATIO = 1.05  # ours / bare seconds per step


def run_ours(profile, start: str, records, steps: int, name: str) -> dict:
    from inquire_lib.training.grpo import grpo

    timer = step_timer()
    res = grpo(profile, start=start, name=name, max_steps=steps, train=records, callbacks=[timer])  # profile's rewards
    return {"log_history": res.log_history, "step_times": timer.times}


def run_bare(profile, base: str, start: str, records, steps: int, out_dir: Path) -> dict:
    """A plain TRL GRPOTrainer with the config `training.grpo` builds from the profile."""
    import torch
    from trl import GRPOTrainer

    from inquire_lib.agent.rewards import build_reward_funcs
    from inquire_lib.training.configs import grpo_config, lora_config

    torch.set_num_threads(profile.torch_threads)
    model, processor, adapter = bare_model(profile, start, base)
    processor.tokenizer.padding_side = "left"
    timer = step_timer()
    rewards = tuple(profile.reward_funcs)
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(profile, out_dir, rewards, steps),
        train_dataset=records,
        processing_class=processor,
        reward_funcs=build_reward_funcs(rewards, profile),
        peft_config=lora_config(profile) if profile.lora and not adapter else None,
        callbacks=[timer],
    )
    trainer.train()
    return {"log_history": trainer.state.log_history, "step_times": timer.times}


def summarise(who: str, out: dict, steps: int) -> dict:
    runtime = train_runtime(out["log_history"])
    later = sorted(out["step_times"][1:] or out["step_times"])
    steps_logged = [e for e in out["log_history"] if "reward" in e]
    return {
        "who": who,
        "train_runtime_s": round(runtime, 4),
        "seconds_per_step": round(runtime / steps, 4),
        "median_step_s": round(statistics.median(later), 4),
        # load from other processes only adds time: the fast steps are the least disturbed view
        "p20_step_s": round(later[len(later) // 5], 4),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "steps_timed": len(out["step_times"]),
        "mean_reward": round(statistics.fmean(e["reward"] for e in steps_logged), 4) if steps_logged else None,
        "mean_completion_length": round(
            statistics.fmean(e["completions/mean_length"] for e in steps_logged if "completions/mean_length" in e), 2
        )
        if any("completions/mean_length" in e for e in steps_logged)
        else None,
    }


def run(
    profile_name: str = "smoke",
    steps: int = 8,
    repeats: int = 3,
    threads: int = 1,
    out: Path | None = OUT,
    overrides=(),
) -> dict:
    with private_artifacts("inquire-bench-grpo-") as artifacts:
        import torch

        from inquire_lib.data.benchmark import benchmark
        from inquire_lib.training.models import base_of
        from inquire_lib.training.sft import sft, training_records

        profile = bench_profile(profile_name, overrides, threads)
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        start = sft(profile, name="bench_sft_start", max_steps=2).path
        start_s = time.perf_counter() - t0
        base = base_of(start, profile)
        records = training_records(benchmark(profile)["train"], profile, 1.0)
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
            "benchmark": "grpo_step",
            "profile": profile.name,
            "model": profile.model,
            "lora": profile.lora,
            "load_in_4bit": profile.load_in_4bit,
            "steps": steps,
            "repeats": repeats,
            "torch_threads": threads,
            "prompts_per_step": profile.grpo_prompts_per_step,
            "num_generations": profile.num_generations,
            "max_completion_length": profile.max_completion_length,
            "beta": profile.beta,
            "rewards": list(profile.reward_funcs),
            "reward_weights": {k: profile.reward_weights.get(k, 1.0) for k in profile.reward_funcs},
            "overrides": dict(profile.overrides),
            "top_entropy_quantile": profile.top_entropy_quantile,
            "num_iterations": profile.grpo_iterations,
            "n_train_records": len(records),
            "start": "sft output, 2 steps",
            "start_seconds": round(start_s, 2),
            "runs": runs,
            "ours_seconds_per_step": round(ours_s, 4),
            "bare_seconds_per_step": round(bare_s, 4),
            "ratio": round(ratio, 4),
            "required_ratio": REQUIRED_RATIO,
            "meets_requirement": ratio <= REQUIRED_RATIO,
            "median_step_ratio": round(med("ours", "median_step_s") / med("bare", "median_step_s"), 4),
            "p20_step_ratio": round(med("ours", "p20_step_s") / med("bare", "p20_step_s"), 4),
            "pair_ratios": [round(p, 4) for p in pairs],
        }
        return finish(result, profile, out)


def main(argv=None) -> None:
    ap = trainer_parser(__doc__, steps=8, repeats=3, out=OUT)
    a = ap.parse_args(argv)
    r = run(a.profile, a.steps, a.repeats, a.threads, Path(a.out), a.overrides)
    print(
        f"GRPO seconds/step: ours {r['ours_seconds_per_step']:.3f}, bare TRL {r['bare_seconds_per_step']:.3f}, "
        f"ratio ours/bare {r['ratio']:.3f} (required <= {REQUIRED_RATIO}: "
        f"{'ok' if r['meets_requirement'] else 'NOT MET'}); by median step {r['median_step_ratio']:.3f}, "
        f"by 20th-percentile step {r['p20_step_ratio']:.3f}, pairs {r['pair_ratios']}"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
