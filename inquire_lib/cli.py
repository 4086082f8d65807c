"""The `inquire` command: build, validate, run, report."""
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
    from .profiles import OverrideError, parse_overrides
    from .runs.notebooks import NotebookFailed, run_notebooks

    try:
        overrides = parse_overrides(args.set or [])
        run_notebooks(args.profile, only=args.only or None, overrides=overrides, name=args.name)
    except (OverrideError, KeyError, ValueError) as exc:  # settings refused before any kernel starts
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    except NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _report(args) -> int:
    from .viz.report import report_main

    return report_main(args.run_dir, args.out, args.failures_only, max_cards=args.max_cards,
                       checkpoints=args.checkpoints, outcomes=args.outcomes)


def _profile(args) -> int:
    from .profiles import get_profile

    from .profiles import OverrideError, apply_overrides, parse_overrides

    try:
        profile = apply_overrides(get_profile(args.name), parse_overrides(args.set or []))
    except (OverrideError, KeyError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    print(json.dumps(profile.to_dict(), indent=1))
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
    r = sub.add_parser("run", help="execute the notebooks with papermill into papermill_runs/<profile>/<name>/")
    r.add_argument("--profile", default="cpu")
    r.add_argument("--only", nargs="*", help="notebook prefixes, e.g. 01 02")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a profile field (repeatable), e.g. --set grpo_lr=1e-4 --set missed_penalty=2")
    r.add_argument("--name", default=None,
                   help="run name (default: 'default', or the overrides, e.g. grpo_lr=0.0001); an existing run "
                        "with the same settings is continued, one with other settings is refused")
    r.set_defaults(fn=_run)
    rep = sub.add_parser("report", help="write a self-contained HTML report of a run's evaluation")
    rep.add_argument("run_dir")
    rep.add_argument("-o", "--out", default="report.html")
    rep.add_argument("--failures-only", action="store_true")
    rep.add_argument("--checkpoints", nargs="+", help="only these checkpoints (default: all)")
    rep.add_argument("--outcomes", nargs="+", help="only steps with these outcomes, e.g. missed_inquiry")
    rep.add_argument("--max-cards", type=int, default=200,
                     help="step cards in all, shared across checkpoints, failures first (default 200)")
    rep.set_defaults(fn=_report)
    pr = sub.add_parser("profile", help="print a profile's settings")
    pr.add_argument("name")
    pr.add_argument("--set", action="append", metavar="KEY=VALUE", help="show the profile with this override")
    pr.set_defaults(fn=_profile)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
