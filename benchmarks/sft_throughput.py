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

OUT = ROOT / "benchmarks" / "results" / "sft_throughput.json"
REQUIRED_RATIO = 0.95  # ours / bare examples per second


def run_ours(profile, records, steps: int, name: str) -> dict:
    from inquire_lib.training import train

    timer = step_timer()
    res = train.sft(profile, name=name, max_steps=steps, train=records, callbacks=[timer])
    return {"log_history": res.log_history, "step_times": timer.times}


def run_bare(profile, start: str, records, steps: int, out_dir: Path) -> dict:
    """A plain TRL SFTTrainer with the settings `train.sft` derives from the profile."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForImageTextToText, AutoProcessor, BitsAndBytesConfig
    from trl import SFTConfig, SFTTrainer

    from inquire_lib.training.models import model_path

    torch.set_num_threads(profile.torch_threads)
    cuda = torch.cuda.is_available()
    kwargs = {"dtype": torch.float32}
    if profile.load_in_4bit:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32,
            bnb_4bit_use_double_quant=True, llm_int8_skip_modules=["visual", "model.visual", "lm_head"])
    if cuda:
        kwargs["device_map"] = {"": 0}
    model = AutoModelForImageTextToText.from_pretrained(start, **kwargs)
    processor = AutoProcessor.from_pretrained(model_path(profile))
    peft_config = LoraConfig(
        r=profile.lora_r, lora_alpha=profile.lora_alpha, lora_dropout=profile.lora_dropout, task_type="CAUSAL_LM",
        target_modules=r".*language_model.*\.(" + "|".join(profile.lora_targets) + ")$") if profile.lora else None
    config = SFTConfig(
        output_dir=str(out_dir), max_steps=steps, per_device_train_batch_size=profile.sft_batch,
        learning_rate=profile.sft_lr, lr_scheduler_type="cosine", warmup_steps=profile.sft_warmup_steps,
        weight_decay=0.0, logging_steps=max(1, steps // 50), save_steps=profile.sft_save_steps, save_total_limit=2,
        gradient_checkpointing=profile.gradient_checkpointing, max_length=None, report_to=[], seed=profile.seed,
        dataloader_num_workers=0, completion_only_loss=True, disable_tqdm=True, use_cpu=not cuda,
        bf16=bool(profile.bf16 and cuda),
    )
    timer = step_timer()
    trainer = SFTTrainer(model=model, args=config, train_dataset=records, processing_class=processor,
                         peft_config=peft_config, callbacks=[timer])
    trainer.train()
    return {"log_history": trainer.state.log_history, "step_times": timer.times}


def summarise(who: str, out: dict, steps: int, batch: int) -> dict:
    runtime = train_runtime(out["log_history"])
    later = sorted(out["step_times"][1:] or out["step_times"])
    return {"who": who, "train_runtime_s": round(runtime, 4), "examples_per_s": round(steps * batch / runtime, 3),
            "median_step_s": round(statistics.median(later), 5),
            # load from other processes only adds time: the fast steps are the least disturbed view
            "p20_step_s": round(later[len(later) // 5], 5), "loadavg_1m": round(os.getloadavg()[0], 2),
            "steps_timed": len(out["step_times"]),
            "final_loss": next((e["loss"] for e in reversed(out["log_history"]) if "loss" in e), None)}


def eval_throughput(profile, start: str, n: int, repeats: int) -> dict:
    """examples/s of `evaluate.generate`, batched (profile.eval_batch) vs one record at a time."""
    from inquire_lib.evaluation import steps as evaluate
    from inquire_lib.training import train
    from inquire_lib.training.models import load_checkpoint

    test = train.benchmark(profile)["test"]
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
        "records": len(records), "eval_batch": profile.eval_batch, "max_new_tokens": profile.eval_max_new_tokens,
        "batched_seconds": [round(s, 3) for s in seconds["batched"]],
        "single_seconds": [round(s, 3) for s in seconds["single"]],
        "batched_examples_per_s": round(len(records) / best["batched"], 3),
        "single_examples_per_s": round(len(records) / best["single"], 3),
        "speedup": round(best["single"] / best["batched"], 3),
        # left padding must not change greedy outputs much; a low share points at a padding bug
        "same_output_fraction": round(same / len(records), 3),
    }


def run(profile_name: str = "smoke", steps: int = 20, repeats: int = 4, threads: int = 1, eval_records: int = 32,
        out: Path | None = OUT) -> dict:
    os.environ.setdefault("CI", "1")  # no progress bars in either trainer
    artifacts = Path(tempfile.mkdtemp(prefix="inquire-bench-sft-"))
    os.environ["INQUIRE_ARTIFACTS"] = str(artifacts)
    try:
        import torch

        from inquire_lib.training import train
        from inquire_lib.profiles import get_profile
        from inquire_lib.runs.notebooks import write_json_atomic

        profile = get_profile(profile_name).replace(torch_threads=threads)
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        start = train.base_agent(profile)
        if start is None:
            from inquire_lib.training.models import model_path
            start = model_path(profile)
        base_s = time.perf_counter() - t0
        records = train.training_records(train.benchmark(profile)["train"], profile, profile.sft_inquiry_fraction)
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
            "benchmark": "sft_throughput", "profile": profile.name, "model": profile.model,
            "lora": profile.lora, "load_in_4bit": profile.load_in_4bit, "steps": steps, "batch": profile.sft_batch,
            "repeats": repeats, "torch_threads": threads, "n_train_records": len(records), "start": start,
            "base_agent_seconds": round(base_s, 2),
            "runs": runs,
            "ours_examples_per_s": round(ours_eps, 3), "bare_examples_per_s": round(bare_eps, 3),
            "ratio": round(ratio, 4), "required_ratio": REQUIRED_RATIO, "meets_requirement": ratio >= REQUIRED_RATIO,
            "step_time_ratio": round(step_ratio, 4), "p20_step_time_ratio": round(p20_ratio, 4),
            "pair_ratios": [round(p, 4) for p in pairs],
            "eval": ev,
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
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=4, help="ours/bare pairs, interleaved")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 leaves a core to others)")
    ap.add_argument("--eval-records", type=int, default=32)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    r = run(a.profile, a.steps, a.repeats, a.threads, a.eval_records, Path(a.out))
    print(f"SFT examples/s: ours {r['ours_examples_per_s']:.2f}, bare TRL {r['bare_examples_per_s']:.2f}, "
          f"ratio ours/bare {r['ratio']:.3f} (required >= {REQUIRED_RATIO}: "
          f"{'ok' if r['meets_requirement'] else 'NOT MET'}); by median step {r['step_time_ratio']:.3f}, "
          f"by 20th-percentile step {r['p20_step_time_ratio']:.3f}, pairs {r['pair_ratios']}")
    e = r["eval"]
    print(f"evaluate.generate on {e['records']} records: "
          f"batch {e['eval_batch']} {e['batched_examples_per_s']:.2f} ex/s, "
          f"batch 1 {e['single_examples_per_s']:.2f} ex/s, speedup x{e['speedup']:.2f}, "
          f"same outputs {e['same_output_fraction']:.2f}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
