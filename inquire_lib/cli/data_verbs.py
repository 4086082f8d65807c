"""`inquire build` (InquireBench as an HF DatasetDict) and `inquire validate` (an InquireMobile-format file)."""

from __future__ import annotations

import sys

from .common import UsageError

# `inquire build`: above this many tasks the build needs --large (and says how big it will be)
MAX_TASKS = 5000
HARD_MAX_TASKS = 1_000_000
# measured on the smoke machine (2 cores): about 160 KB on disk and 0.03-0.07 s of one core a task
BYTES_PER_TASK = 160_000
SECONDS_PER_TASK = (0.03, 0.07)


def register(sub, debug) -> None:
    _add_build(sub, debug)
    _add_validate(sub, debug)


def build_estimate(n_tasks: int) -> str:
    lo, hi = (round(n_tasks * t) for t in SECONDS_PER_TASK)
    return (
        f"estimate: {n_tasks} tasks, about {n_tasks * BYTES_PER_TASK / 1e6:,.0f} MB on disk and "
        f"{lo:,}-{hi:,} s of one core"
    )


def _add_build(sub, debug) -> None:
    from ..world.values import TRAIN_VALUES

    b = sub.add_parser("build", help="generate InquireBench as an HF DatasetDict", parents=[debug])
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--tasks", type=int, default=400, help=f"number of tasks, 1 to {MAX_TASKS} (more with --large)")
    b.add_argument("--large", action="store_true", help=f"allow more than {MAX_TASKS} tasks")
    b.add_argument("--out", required=True, help="a new or empty folder, or one an earlier build wrote")
    b.add_argument(
        "--force", action="store_true", help="write into a folder that holds other files, leaving them alone"
    )
    b.add_argument(
        "--train-values",
        choices=TRAIN_VALUES,
        default="fixed",
        help="how training tasks draw slot values and phrasings (test and validation: the same either way)",
    )
    b.set_defaults(fn=_build)


def _build(args) -> int:
    from ..data.benchmark import build_dataset, fingerprint, stats, write_dataset
    from ..runs.outputs import check_output_dir, write_owned_dir

    if args.tasks < 1:
        raise UsageError(f"argument --tasks: expected a positive number of tasks, got {args.tasks}")
    if args.tasks > HARD_MAX_TASKS:
        raise UsageError(
            f"argument --tasks: {args.tasks} is above the limit of {HARD_MAX_TASKS:,} ({build_estimate(args.tasks)})"
        )
    if args.tasks > MAX_TASKS and not args.large:
        raise UsageError(
            f"argument --tasks: {args.tasks} is above {MAX_TASKS} without --large ({build_estimate(args.tasks)})"
        )
    check_output_dir(args.out, args.force)  # before the work, not after it
    print(build_estimate(args.tasks), file=sys.stderr)
    dd = build_dataset(args.seed, args.tasks, args.train_values)
    write_owned_dir(args.out, lambda tmp: write_dataset(dd, tmp), force=args.force)
    st = stats(dd)
    for split, s in st.items():
        print(
            f"{split}: {s['tasks']} tasks, {s['steps']} steps, {s['inquiry_steps']} inquiry steps, "
            f"{s['n_categories']} categories, {s['n_subcategories']} sub-categories, {s['safe_tasks']} safe tasks, "
            f"{s['templates']} templates"
        )
        print("  categories: " + ", ".join(f"{k} {v}" for k, v in s["categories"].items()))
    print(f"fingerprint: {fingerprint(dd)}")
    print(f"written to {args.out}")
    return 0


def _add_validate(sub, debug) -> None:
    v = sub.add_parser("validate", help="check an InquireMobile-format .jsonl file", parents=[debug])
    v.add_argument("file")
    v.add_argument("--image-root", default=None)
    v.add_argument("--skip-bad", action="store_true", help="skip and count malformed rows instead of failing")
    v.add_argument(
        "--max-line-bytes",
        type=int,
        default=None,
        help="longest line accepted (default 1 MiB, or $INQUIRE_MAX_LINE_BYTES)",
    )
    v.set_defaults(fn=_validate)


def _validate(args) -> int:
    from ..data.external import validate_main

    if args.max_line_bytes is not None and args.max_line_bytes < 1:
        raise UsageError(f"argument --max-line-bytes: expected a positive number, got {args.max_line_bytes}")
    return validate_main(args.file, args.image_root, args.skip_bad, args.max_line_bytes)
