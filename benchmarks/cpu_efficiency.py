"""How well training uses this CPU: threads, processes and bf16 for SFT and GRPO, against the
machine's measured matmul peak.

In one run, settings interleaved (a, b, c, ... then the next stage), on the profile's real model and
data (the cpu profile's tiny Qwen2.5-VL, full weights, its training records):
- the matmul peak: a 1024^3 torch matmul, fp32 and bf16, 1 and 2 threads (GFLOP/s);
- SFT examples/s and GRPO seconds/step for: 1 thread fp32, 2 threads fp32, 1 and 2 threads bf16
  autocast (`cpu_bf16`), and 2 processes x 1 thread with DDP (torchrun, gloo), fp32 and bf16;
- model FLOP utilisation (MFU) of SFT: 6 x trainable parameters x tokens per second (the usual
  forward + backward count; attention's own FLOPs and the vision tower's patches are not counted)
  over the peak of the same precision and thread count;
- the bf16 loss curve against fp32 (same seed, same batches): sound when the mean absolute
  difference per step is at most `LOSS_TOLERANCE` of the fp32 loss and the last 10 steps' means
  differ by at most the same share.

    python benchmarks/cpu_efficiency.py [--profile cpu] [--steps 50] [--grpo-steps 4]

Writes benchmarks/results/cpu_efficiency.json. Checkpoints go to a temporary INQUIRE_ARTIFACTS.
Run it on an idle machine: every other process takes cores from the settings being compared.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import RESULTS, finish, private_artifacts, step_timer, train_runtime

OUT = RESULTS / "cpu_efficiency.json"
LOSS_TOLERANCE = 0.03  # bf16 vs fp32: relative loss difference accepted as numerically sound
SETTINGS = [  # name, processes, threads per process, bf16
    ("1 thread fp32", 1, 1, False),
    ("2 threads bf16", 1, 2, True),
    ("2 threads fp32", 1, 2, False),
    ("1 thread bf16", 1, 1, True),
    ("DDP 2x1 fp32", 2, 1, False),
    ("DDP 2x1 bf16", 2, 1, True),
]
REWARDS = ("format", "action", "inquiry")


def matmul_peak(n: int = 1024, seconds: float = 1.0) -> dict:
    """GFLOP/s of an n x n x n matmul per (dtype, threads): the best of three timings of as many
    matmuls as fill about `seconds` (emulated bf16 runs ~100x slower than fp32, so a fixed count
    would take minutes there)."""
    import torch

    out = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
            t0 = time.perf_counter()
            a @ b  # warm-up, and the count that fills `seconds`
            repeats = max(1, min(50, round(seconds / max(time.perf_counter() - t0, 1e-6))))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(repeats):
                    a @ b
                best = min(best, time.perf_counter() - t0)
            out[f"{name}_{threads}t"] = round(2 * n**3 * repeats / best / 1e9, 1)
    return out


def settings(native_bf16: bool) -> tuple[list, list]:
    """The settings to measure and those skipped with why: bf16 autocast only where the CPU multiplies
    bf16 natively (elsewhere the profile trains in fp32 anyway, `runs.hardware.uses_bf16`)."""
    run = [s for s in SETTINGS if native_bf16 or not s[3]]
    skipped = [
        {
            "setting": s[0],
            "why": "no native bf16 on this CPU (AVX-512 BF16 / AMX): autocast would be "
            "emulated, and the profile trains in fp32 here",
        }
        for s in SETTINGS
        if s not in run
    ]
    return run, skipped


def _profile(profile_name: str, threads: int, bf16: bool):
    from inquire_lib.profiles import get_profile

    return get_profile(profile_name).replace(torch_threads=threads, cpu_bf16=bf16)


def _sft_one_process(profile, records, steps: int, name: str) -> dict:
    from inquire_lib.training.sft import sft

    timer = step_timer()
    t0 = time.perf_counter()
    res = sft(profile, name=name, max_steps=steps, train=records, callbacks=[timer], inquiry_share=1.0)
    return {"log_history": res.log_history, "step_times": timer.times, "wall_s": time.perf_counter() - t0}


def _launch(stage: str, profile_name: str, threads: int, bf16: bool, steps: int, name: str, start: str | None) -> dict:
    """One stage in two CPU processes under torchrun (DDP over gloo); its JSON line back. Not
    `accelerate launch --cpu`: that starts a single process whatever `--num_processes` says."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "inquire_lib.cli",
        "train",
        stage,
        "--profile",
        profile_name,
        "--name",
        name,
        "--max-steps",
        str(steps),
        "--set",
        f"torch_threads={threads}",
        "--set",
        f"cpu_bf16={bf16}",
    ]
    if start:
        cmd += ["--start-from", start]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun failed ({proc.returncode}): {proc.stderr[-3000:]}")
    line = json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")))
    if line["processes"] != 2:
        raise RuntimeError(f"expected 2 training processes, the run reports {line['processes']}")
    return {**line, "wall_s": wall}


def _tokens_per_s(log_history: list[dict], runtime: float) -> float | None:
    tokens = [e["num_tokens"] for e in log_history if "num_tokens" in e]
    return tokens[-1] / runtime if tokens else None


def sft_runs(profile_name: str, steps: int, params: int, peak: dict, chosen: list) -> list[dict]:
    import torch

    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.training.sft import training_records

    base = _profile(profile_name, 1, False)
    records = training_records(benchmark(base)["train"], base, 1.0, base.sft_inquiry_oversample)
    rows, tokens_seen = [], None
    for name, procs, threads, bf16 in chosen:
        profile = _profile(profile_name, threads, bf16)
        from inquire_lib.runs.hardware import uses_bf16

        if procs == 1:
            torch.set_num_threads(threads)
            out = _sft_one_process(profile, records, steps, f"bench_sft_{len(rows)}")
            runtime, losses = train_runtime(out["log_history"]), [e["loss"] for e in out["log_history"] if "loss" in e]
            tps = _tokens_per_s(out["log_history"], runtime)
            tokens_seen = tps * runtime if tps else tokens_seen
            times = sorted(out["step_times"][1:])
            median_step = statistics.median(times)
        else:
            out = _launch("sft", profile_name, threads, bf16, steps, f"bench_sft_{len(rows)}", None)
            runtime, losses, median_step = out["seconds"], out["loss"], None
            # the same seed and batches as the one-process rows: their token count over this runtime
            tps = tokens_seen / runtime if tokens_seen else None
        precision = "bf16" if (bf16 and uses_bf16(profile)) else "fp32"
        eps = steps * profile.sft_batch / runtime
        row = {
            "setting": name,
            "stage": "sft",
            "processes": procs,
            "threads_per_process": threads,
            "precision": precision,
            "steps": steps,
            "batch": profile.sft_batch,
            "train_runtime_s": round(runtime, 2),
            "examples_per_s": round(eps, 3),
            "median_step_s": round(median_step, 4) if median_step else None,
            "loss": [round(x, 5) for x in losses],
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        if tps is not None:
            flops = 6 * params * tps
            row.update(
                tokens_per_s=round(tps, 1),
                model_gflop_s=round(flops / 1e9, 2),
                mfu=round(flops / 1e9 / peak[f"{precision}_{procs * threads}t"], 4),
            )
        rows.append(row)
        print(f"sft  {name:16s} {eps:6.2f} ex/s  final loss {losses[-1] if losses else None}", flush=True)
    return rows


def grpo_runs(profile_name: str, steps: int, chosen: list) -> list[dict]:
    import torch

    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.training.grpo import grpo
    from inquire_lib.training.sft import sft, training_records

    base = _profile(profile_name, 2, False)
    start = sft(base, name="bench_grpo_start", max_steps=2).path
    records = training_records(benchmark(base)["train"], base, 1.0).remove_columns(["completion"])
    rows = []
    for name, procs, threads, bf16 in chosen:
        profile = _profile(profile_name, threads, bf16)
        if procs == 1:
            torch.set_num_threads(threads)
            timer = step_timer()
            res = grpo(
                profile,
                start=start,
                name=f"bench_grpo_{len(rows)}",
                max_steps=steps,
                train=records,
                reward_names=REWARDS,
                callbacks=[timer],
            )
            runtime = train_runtime(res.log_history)
            times = sorted(timer.times[1:] or timer.times)
            median_step = statistics.median(times)
        else:
            out = _launch("grpo", profile_name, threads, bf16, steps, f"bench_grpo_{len(rows)}", start)
            runtime, median_step = out["seconds"], None
        rows.append(
            {
                "setting": name,
                "stage": "grpo",
                "processes": procs,
                "threads_per_process": threads,
                "bf16": bf16,
                "steps": steps,
                "seconds_per_step": round(runtime / steps, 3),
                "median_step_s": round(median_step, 3) if median_step else None,
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        )
        print(f"grpo {name:16s} {runtime / steps:6.2f} s/step", flush=True)
    return rows


def loss_agreement(fp32: list[float], bf16: list[float]) -> dict:
    n = min(len(fp32), len(bf16))
    rel = [abs(a - b) / max(abs(a), 1e-8) for a, b in zip(fp32[:n], bf16[:n])]
    tail = lambda xs: statistics.fmean(xs[max(0, n - 10) : n])  # noqa: E731
    tail_rel = abs(tail(fp32) - tail(bf16)) / max(tail(fp32), 1e-8)
    return {
        "steps": n,
        "mean_relative_difference": round(statistics.fmean(rel), 5),
        "max_relative_difference": round(max(rel), 5),
        "last10_relative_difference": round(tail_rel, 5),
        "tolerance": LOSS_TOLERANCE,
        "sound": statistics.fmean(rel) <= LOSS_TOLERANCE and tail_rel <= LOSS_TOLERANCE,
    }


def run(profile_name: str = "cpu", steps: int = 50, grpo_steps: int = 4, out: Path | None = OUT) -> dict:
    with private_artifacts("inquire-bench-cpu-"):
        from inquire_lib.profiles import get_profile
        from inquire_lib.runs.hardware import cpu_has_native_bf16
        from inquire_lib.training.models import load_checkpoint, model_path, n_params

        profile = get_profile(profile_name)
        model, _ = load_checkpoint(profile, model_path(profile))
        params = n_params(model)
        del model
        peak = matmul_peak()
        print("matmul peak GFLOP/s:", peak, flush=True)
        chosen, skipped = settings(cpu_has_native_bf16())
        sft_rows = sft_runs(profile_name, steps, params, peak, chosen)
        grpo_rows = grpo_runs(profile_name, grpo_steps, chosen)
        by = lambda rows, s: next(r for r in rows if r["setting"] == s)  # noqa: E731
        base_sft, base_grpo = by(sft_rows, "1 thread fp32"), by(grpo_rows, "1 thread fp32")
        for r in sft_rows:
            r["speedup"] = round(r["examples_per_s"] / base_sft["examples_per_s"], 3)
        for r in grpo_rows:
            r["time_ratio"] = round(r["seconds_per_step"] / base_grpo["seconds_per_step"], 3)
        best_sft = max(sft_rows, key=lambda r: r["examples_per_s"])
        best_grpo = min(grpo_rows, key=lambda r: r["seconds_per_step"])
        result = {
            "benchmark": "cpu_efficiency",
            "profile": profile_name,
            "params": params,
            "native_bf16": cpu_has_native_bf16(),
            "flop_count": "6 x params x tokens (forward + backward of every parameter; attention scores not counted)",
            "matmul_peak_gflop_s": peak,
            "sft": sft_rows,
            "grpo": grpo_rows,
            "skipped": skipped,
            "bf16_vs_fp32_loss_1_thread": (
                loss_agreement(base_sft["loss"], by(sft_rows, "1 thread bf16")["loss"]) if not skipped else None
            ),
            "bf16_vs_fp32_loss_2_threads": (
                loss_agreement(by(sft_rows, "2 threads fp32")["loss"], by(sft_rows, "2 threads bf16")["loss"])
                if not skipped
                else None
            ),
            "best_sft": {"setting": best_sft["setting"], "speedup": best_sft["speedup"], "required": 3.0},
            "best_grpo": {"setting": best_grpo["setting"], "time_ratio": best_grpo["time_ratio"], "required": 0.5},
        }
        return finish(result, profile, out)


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--steps", type=int, default=50, help="SFT steps per setting (the loss curves' length)")
    ap.add_argument("--grpo-steps", type=int, default=4)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    r = run(a.profile, a.steps, a.grpo_steps, Path(a.out))
    print(f"best SFT: {r['best_sft']}; best GRPO: {r['best_grpo']}")
    print(f"bf16 loss vs fp32: {r['bf16_vs_fp32_loss_2_threads']}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
