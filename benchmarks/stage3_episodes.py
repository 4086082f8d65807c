"""Stage 3's training episodes against the evaluation's, for the checkpoint stage 3 starts from, at temperature 0.

The same validation tasks are played twice from their first screens: once as stage 3 plays them with
`task_rollout` "reprompt" (`training.task_starts.training_rollouts`: the HF model being trained, greedy), once as
the evaluation plays them (`evaluation.episodes.run_episodes` with the profile's engine, as `inquire evaluate`
does). It reports each side's success rate with its Wilson interval, the episodes whose outcome differs (McNemar's
exact test on the pairs), the seconds an episode takes on each side (what one stage-3 episode costs here), and where
the evaluation's episodes first go wrong (`evaluation.failures`).

    .venv/bin/python benchmarks/stage3_episodes.py [--profile small] [--checkpoint grpo_full] [--tasks 80]

Writes benchmarks/results/stage3_episodes.<cpu kind>.json. The checkpoint is found or installed (never trained).
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import RESULTS, finish

from inquire_lib.data.benchmark import validation_tasks
from inquire_lib.evaluation import episodes
from inquire_lib.evaluation.failures import failure_markdown, failure_table
from inquire_lib.evaluation.metrics import wilson
from inquire_lib.profiles import apply_overrides, parse_overrides
from inquire_lib.runs.hardware import cpu_kind
from inquire_lib.stages.evaluate import played_digest
from inquire_lib.training.checkpoints import checkpoint_path
from inquire_lib.training.models import loaded
from inquire_lib.training.openvino import engine_loaded
from inquire_lib.training.task_starts import training_rollouts


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b and c discordant pairs (scipy's binomial test)."""
    from scipy.stats import binomtest

    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="small", help="the profile whose stage 3 is checked")
    ap.add_argument("--checkpoint", default="grpo_full", help="stage 3's start (the shipped grpo_full on small)")
    ap.add_argument(
        "--tasks", type=int, default=None, help="validation tasks played (default: the profile's val_tasks)"
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile field")
    ap.add_argument("--out", default=None, help="default: benchmarks/results/stage3_episodes.<cpu kind>.json")
    args = ap.parse_args(argv)
    profile = apply_overrides(args.profile, parse_overrides(args.set))
    tasks = validation_tasks(profile)[: args.tasks]
    path = checkpoint_path(profile, args.checkpoint)

    t0 = time.perf_counter()
    with loaded(profile, path) as m:
        train_side = training_rollouts(m.model, m.processor, profile, tasks)
    train_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    with (loaded if profile.eval_engine == "hf" else engine_loaded)(profile, path) as m:
        eval_side = episodes.run_episodes(episodes.model_policy(m.model, m.processor, profile), tasks, profile)
    eval_seconds = time.perf_counter() - t0

    ours = [bool(e["success"]) for e in train_side]
    theirs = [bool(e["success"]) for e in eval_side]
    b = sum(1 for x, y in zip(ours, theirs) if x and not y)
    c = sum(1 for x, y in zip(ours, theirs) if y and not x)
    same_answers = sum(
        [s["raw_output"] for s in x["steps"]] == [s["raw_output"] for s in y["steps"]]
        for x, y in zip(train_side, eval_side)
    )
    turns = lambda side: sum(e["n_steps"] for e in side)  # noqa: E731
    result = {
        "benchmark": "stage3_episodes",
        "what": "stage 3's training episodes (reprompt, HF, temperature 0) against the evaluation's (its engine), "
        "from the first screens of the same validation tasks",
        "profile": profile.name,
        "checkpoint": args.checkpoint,
        "model": played_digest(path, profile)[:16],
        "cpu_kind": cpu_kind(),
        "tasks": len(tasks),
        "training_rollouts": {
            "engine": "hf",
            "success": wilson(sum(ours), len(ours)),
            "turns": turns(train_side),
            "seconds": round(train_seconds, 1),
            "seconds_per_episode": round(train_seconds / len(tasks), 2),
        },
        "evaluation": {
            "engine": profile.eval_engine,
            "success": wilson(sum(theirs), len(theirs)),
            "turns": turns(eval_side),
            "seconds": round(eval_seconds, 1),
            "seconds_per_episode": round(eval_seconds / len(tasks), 2),
        },
        "pairs": {"training_only": b, "evaluation_only": c, "mcnemar_p": mcnemar_exact(b, c)},
        "episodes_with_identical_answers": same_answers,
        # where the evaluation's episodes first go wrong, and whether they come back (`evaluation.failures`)
        "failures": failure_table(eval_side),
    }
    out = RESULTS / f"stage3_episodes.{cpu_kind()}.json" if args.out is None else args.out
    finish(result, profile, out)
    for side in ("training_rollouts", "evaluation"):
        r = result[side]
        s = r["success"]
        print(
            f"{side:<18} {r['engine']:<9} success {s['k']}/{s['n']} = {s['value']:.2f} ({s['lo']:.2f}-{s['hi']:.2f}); "
            f"{r['turns']} turns, {r['seconds_per_episode']:.1f} s an episode"
        )
    print(f"pairs: training only {b}, evaluation only {c} (McNemar p = {result['pairs']['mcnemar_p']:.2f}); ", end="")
    print(f"{same_answers}/{len(tasks)} episodes with every answer identical")
    print(failure_markdown(result["failures"]))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
