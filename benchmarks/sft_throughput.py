"""SFT throughput of `inquire_lib.training.train.sft` against a bare TRL `SFTTrainer`, and batched evaluation.

Both trainers start from the same checkpoint (`train.base_agent(profile)`), train on the same
records (`train.training_records`) with the same batch size and settings, in the same process,
interleaved (ours, bare, ours, bare, ...) so that load from other processes hits both alike.
Throughput is examples/s = max_steps * batch / train_runtime, train_runtime as the trainer reports
it; the median time of a step (first step excluded) is reported too, as a less noisy second view.
Evaluation: `evaluate.generate` on the first test records, batch `profile.eval_batch` vs 1.

    python benchmarks/sft_throughput.py [--profile smoke] [--steps 20] [--repeats 4] [--threads 1]

Writes benchmarks/results/sft_throughput.json. Checkpoints go to a temporary INQUIRE_ARTIFACTS.
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

OUT = RESULTS / "sft_throughput.json"
REQUIRED_RATIO = 0.95  # ours / bare examples per second


def run_ours(profile, records, steps: int, name: str) -> dict:
    from inquire_lib.training.sft import sft

    timer = step_timer()
    res = sft(profile, name=name, max_steps=steps, train=records, callbacks=[timer])
    return {"log_history": res.log_history, "step_times": timer.times}


def run_bare(profile, start: str, records, steps: int, out_dir: Path) -> dict:
    """A plain TRL SFTTrainer with the config `training.sft` builds from the profile."""
    import torch
    from trl import SFTTrainer

    from inquire_lib.training.configs import lora_config, sft_config

    torch.set_num_threads(profile.torch_threads)
    model, processor, _ = bare_model(profile, start)
    timer = step_timer()
    trainer = SFTTrainer(
        model=model,
        args=sft_config(profile, out_dir, steps=steps),
        train_dataset=records,
        processing_class=processor,
        peft_config=lora_config(profile) if profile.lora else None,
        callbacks=[timer],
    )
    trainer.train()
    return {"log_history": trainer.state.log_history, "step_times": timer.times}


def summarise(who: str, out: dict, steps: int, batch: int) -> dict:
    runtime = train_runtime(out["log_history"])
    later = sorted(out["step_times"][1:] or out["step_times"])
    return {
        "who": who,
        "train_runtime_s": round(runtime, 4),
        "examples_per_s": round(steps * batch / runtime, 3),
        "median_step_s": round(statistics.median(later), 5),
        # load from other processes only adds time: the fast steps are the least disturbed view
        "p20_step_s": round(later[len(later) // 5], 5),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "steps_timed": len(out["step_times"]),
        "final_loss": next((e["loss"] for e in reversed(out["log_history"]) if "loss" in e), None),
    }


def eval_throughput(profile, start: str, n: int, repeats: int) -> dict:
    """examples/s of `evaluate.generate`, batched (profile.eval_batch) vs one record at a time."""
    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.evaluation import steps as evaluate
    from inquire_lib.training.models import load_checkpoint

    test = benchmark(profile)["test"]
    records = list(test.select(range(min(n, len(test)))))
    model, processor = load_checkpoint(profile, start)
    seconds = {"batched": [], "single": []}
    outputs = {}
    for _ in range(repeats):
        for kind, bs in (("batched", profile.eval_batch), ("single", 1)):
            t0 = time.perf_counter()
            outputs[kind] = evaluate.generate(model, processor, records, profile, batch_size=bs, progress=False)
            seconds[kind].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in seconds.items()}
    same = sum(a == b for a, b in zip(outputs["batched"], outputs["single"]))
    return {
        "records": len(records),
        "eval_batch": profile.eval_batch,
        "max_new_tokens": profile.eval_max_new_tokens,
        "batched_seconds": [round(s, 3) for s in seconds["batched"]],
        "single_seconds": [round(s, 3) for s in seconds["single"]],
        "batched_examples_per_s": round(len(records) / best["batched"], 3),
        "single_examples_per_s": round(len(records) / best["single"], 3),
        "speedup": round(best["single"] / best["batched"], 3),
        # left padding must not change greedy outputs much; a low share points at a padding bug
        "same_output_fraction": round(same / len(records), 3),
    }


def run(
    profile_name: str = "smoke",
    steps: int = 20,
    repeats: int = 4,
    threads: int = 1,
    eval_records: int = 32,
    out: Path | None = OUT,
    overrides=(),
) -> dict:
    with private_artifacts("inquire-bench-sft-") as artifacts:
        import torch

        from inquire_lib.data.benchmark import benchmark
        from inquire_lib.training.sft import base_agent, training_records

        profile = bench_profile(profile_name, overrides, threads)
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        start = base_agent(profile)
        if start is None:
            from inquire_lib.training.models import model_path

            start = model_path(profile)
        base_s = time.perf_counter() - t0
        records = training_records(benchmark(profile)["train"], profile, profile.sft_inquiry_share)
        runs = []
        for i in range(repeats):
            ours = run_ours(profile, records, steps, name=f"bench_ours_{i}")
            runs.append(summarise("ours", ours, steps, profile.sft_batch))
            print(f"[{i}] ours {runs[-1]['examples_per_s']:.1f} ex/s", flush=True)
            bare = run_bare(profile, start, records, steps, artifacts / "bare" / str(i))
            runs.append(summarise("bare", bare, steps, profile.sft_batch))
            print(f"[{i}] bare {runs[-1]['examples_per_s']:.1f} ex/s", flush=True)
        med = lambda who, key: statistics.median(r[key] for r in runs if r["who"] == who)  # noqa: E731
        ours_eps, bare_eps = med("ours", "examples_per_s"), med("bare", "examples_per_s")
        ratio = ours_eps / bare_eps
        step_ratio = med("bare", "median_step_s") / med("ours", "median_step_s")
        p20_ratio = med("bare", "p20_step_s") / med("ours", "p20_step_s")
        # each ours run against the bare run right after it: the closest in machine load
        pairs = [b["train_runtime_s"] / o["train_runtime_s"] for o, b in zip(runs[0::2], runs[1::2])]
        print("evaluation throughput ...", flush=True)
        ev = eval_throughput(profile, start, eval_records, repeats)
        result = {
            "benchmark": "sft_throughput",
            "profile": profile.name,
            "model": profile.model,
            "lora": profile.lora,
            "load_in_4bit": profile.load_in_4bit,
            "steps": steps,
            "batch": profile.sft_batch,
            "overrides": dict(profile.overrides),
            "repeats": repeats,
            "torch_threads": threads,
            "n_train_records": len(records),
            "start": start,
            "base_agent_seconds": round(base_s, 2),
            "runs": runs,
            "ours_examples_per_s": round(ours_eps, 3),
            "bare_examples_per_s": round(bare_eps, 3),
            "ratio": round(ratio, 4),
            "required_ratio": REQUIRED_RATIO,
            "meets_requirement": ratio >= REQUIRED_RATIO,
            "step_time_ratio": round(step_ratio, 4),
            "p20_step_time_ratio": round(p20_ratio, 4),
            "pair_ratios": [round(p, 4) for p in pairs],
            "eval": ev,
        }
        return finish(result, profile, out)


def main(argv=None) -> None:
    ap = trainer_parser(__doc__, steps=20, repeats=4, out=OUT)
    ap.add_argument("--eval-records", type=int, default=32)
    a = ap.parse_args(argv)
    r = run(a.profile, a.steps, a.repeats, a.threads, a.eval_records, Path(a.out), a.overrides)
    print(
        f"SFT examples/s: ours {r['ours_examples_per_s']:.2f}, bare TRL {r['bare_examples_per_s']:.2f}, "
        f"ratio ours/bare {r['ratio']:.3f} (required >= {REQUIRED_RATIO}: "
        f"{'ok' if r['meets_requirement'] else 'NOT MET'}); by median step {r['step_time_ratio']:.3f}, "
        f"by 20th-percentile step {r['p20_step_time_ratio']:.3f}, pairs {r['pair_ratios']}"
    )
    e = r["eval"]
    print(
        f"evaluate.generate on {e['records']} records: "
        f"batch {e['eval_batch']} {e['batched_examples_per_s']:.2f} ex/s, "
        f"batch 1 {e['single_examples_per_s']:.2f} ex/s, speedup x{e['speedup']:.2f}, "
        f"same outputs {e['same_output_fraction']:.2f}"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
