"""The `inquire` command: build, validate, run, report, train, export."""
from __future__ import annotations

import argparse
import json
import sys


def _build(args) -> int:
    from .data.benchmark import build_dataset, fingerprint, save_dataset, stats

    dd = build_dataset(args.seed, args.tasks)
    save_dataset(dd, args.out)
    st = stats(dd)
    for split, s in st.items():
        print(f"{split}: {s['tasks']} tasks, {s['steps']} steps, {s['inquiry_steps']} inquiry steps, "
              f"{s['n_categories']} categories, {s['n_subcategories']} sub-categories, {s['safe_tasks']} safe tasks, "
              f"{s['templates']} templates")
        print("  categories: " + ", ".join(f"{k} {v}" for k, v in s["categories"].items()))
    print(f"fingerprint: {fingerprint(dd)}")
    print(f"written to {args.out}")
    return 0


def _validate(args) -> int:
    from .data.external import validate_main

    return validate_main(args.file, args.image_root, args.skip_bad)


def _run(args) -> int:
    from .runs.notebooks import NotebookFailed, run_notebooks

    try:
        run_notebooks(args.profile, only=args.only or None)
    except NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _report(args) -> int:
    from .viz.report import report_main

    return report_main(args.run_dir, args.out, args.failures_only)


def _profile(args) -> int:
    from .profiles import get_profile

    print(json.dumps(get_profile(args.name).to_dict(), indent=1))
    return 0


STAGES = ("base", "sft", "grpo", "task-grpo")
DEFAULT_NAMES = {"sft": "sft_full", "grpo": "grpo_full", "task-grpo": "grpo_task"}


def _checkpoint(profile, start: str | None) -> str | None:
    """--start: a folder as is, else a named checkpoint of the profile (sft_full, grpo_full, ...)."""
    from pathlib import Path

    from .training.checkpoints import checkpoint_path

    if start is None or Path(start).exists():
        return start
    return checkpoint_path(profile, start)


def _train(args) -> int:
    """One stage in this process; under `accelerate launch` / `torchrun` each process runs this
    and TRL splits the batches. The data and the tiny model are prepared by rank 0 first."""
    from .data.benchmark import benchmark
    from .profiles import get_profile, parse_sets
    from .training import grpo as grpo_stage
    from .training import sft as sft_stage
    from .training.devices import is_main_process, require_device, world_size
    from .training.models import model_path

    try:
        profile = get_profile(args.profile, **parse_sets(args.set))
        require_device(profile)
    except (KeyError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if world_size() > 1:
        from accelerate import PartialState
        with PartialState().main_process_first():
            benchmark(profile)
            model_path(profile)
    name = args.name or DEFAULT_NAMES.get(args.stage)
    if args.stage == "base":
        res_path = sft_stage.base_agent(profile)
        print(f"base agent: {res_path}")
        return 0
    if args.stage == "sft":
        res = sft_stage.sft(profile, name=name, inquiry_fraction=args.inquiry_fraction, resume=args.resume,
                     max_steps=args.max_steps, start=_checkpoint(profile, args.start))
    elif args.stage == "grpo":
        res = grpo_stage.grpo(profile, start=_checkpoint(profile, args.start or "sft_full"), name=name, resume=args.resume,
                      max_steps=args.max_steps)
    else:
        from .training.task_grpo import grpo_task, warm_start
        start = _checkpoint(profile, args.start) if args.start else warm_start(profile)[1]
        res = grpo_task(profile, start=start, name=name, max_steps=args.max_steps, resume=args.resume)
    if is_main_process():
        losses = [round(h["loss"], 6) for h in res.log_history if "loss" in h]
        print(json.dumps({"stage": args.stage, "path": res.path, "processes": world_size(), "examples": res.n_examples,
                          "seconds": round(res.seconds, 1), "loss": losses}))
    return 0


def _export(args) -> int:
    from .training.export_verl import export_verl
    from .profiles import get_profile, parse_sets

    profile = get_profile(args.profile, **parse_sets(args.set))
    info = export_verl(profile, args.out, splits=args.splits)
    print(json.dumps(info, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="inquire", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="generate InquireBench as an HF DatasetDict")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--tasks", type=int, default=400)
    b.add_argument("--out", required=True)
    b.set_defaults(fn=_build)
    v = sub.add_parser("validate", help="check an InquireMobile-format .jsonl file")
    v.add_argument("file")
    v.add_argument("--image-root", default=None)
    v.add_argument("--skip-bad", action="store_true", help="skip and count malformed rows instead of failing")
    v.set_defaults(fn=_validate)
    r = sub.add_parser("run", help="execute the notebooks with papermill into papermill_runs/<profile>/")
    r.add_argument("--profile", default="cpu")
    r.add_argument("--only", nargs="*", help="notebook prefixes, e.g. 01 02")
    r.set_defaults(fn=_run)
    rep = sub.add_parser("report", help="write a self-contained HTML report of a run's evaluation")
    rep.add_argument("run_dir")
    rep.add_argument("-o", "--out", default="report.html")
    rep.add_argument("--failures-only", action="store_true")
    rep.set_defaults(fn=_report)
    pr = sub.add_parser("profile", help="print a profile's settings")
    pr.add_argument("name")
    pr.set_defaults(fn=_profile)
    t = sub.add_parser("train", help="run one training stage (under `accelerate launch` for several processes)")
    t.add_argument("stage", choices=STAGES)
    t.add_argument("--profile", default="cpu")
    t.add_argument("--start", "--start-from", dest="start", default=None,
                   help="checkpoint folder or name (sft_full, grpo_full, ...) to start from; under torchrun write "
                        "--start-from (torchrun reads --start as its own --start-method)")
    t.add_argument("--name", default=None, help="output name under artifacts/<profile>/ (default: sft_full, grpo_full, grpo_task)")
    t.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a profile field, e.g. --set model=/models/Qwen2.5-VL-3B-Instruct")
    t.add_argument("--max-steps", type=int, default=None)
    t.add_argument("--inquiry-fraction", type=float, default=None, help="sft: share of inquiry steps kept")
    t.add_argument("--resume", action="store_true", help="continue from the last checkpoint in the output folder")
    t.set_defaults(fn=_train)
    e = sub.add_parser("export", help="write the GRPO prompts for another RL framework")
    e.add_argument("--format", choices=["verl"], default="verl", help="verl / EasyR1 RL dataset parquet")
    e.add_argument("--profile", default="cpu")
    e.add_argument("--out", required=True)
    e.add_argument("--splits", nargs="*", default=["train", "validation"], choices=["train", "validation", "test"])
    e.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    e.set_defaults(fn=_export)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
