"""The verbs that read and print: a run's HTML report (`inquire report`), its failure table (`inquire failures`)
and its tables as Markdown (`inquire summary`); a profile's settings (`inquire profile`)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import UsageError, settings_or_usage


def register(sub, debug) -> None:
    _add_report(sub, debug)
    _add_failures(sub, debug)
    _add_summary(sub, debug)
    _add_profile(sub, debug)


def _add_report(sub, debug) -> None:
    rep = sub.add_parser("report", help="write a self-contained HTML report of a run's evaluation", parents=[debug])
    rep.add_argument("run_dir")
    rep.add_argument("-o", "--out", default="report.html")
    rep.add_argument("--failures-only", action="store_true")
    rep.add_argument("--checkpoints", nargs="+", help="only these checkpoints (default: all)")
    rep.add_argument("--outcomes", nargs="+", help="only steps with these outcomes, e.g. missed_inquiry")
    rep.add_argument(
        "--max-cards",
        type=int,
        default=200,
        help="step cards in all, shared across checkpoints, failures first (default 200)",
    )
    rep.add_argument(
        "--max-episodes",
        type=int,
        default=24,
        help="online episodes drawn turn by turn, failures first, shared across checkpoints (default 24)",
    )
    rep.set_defaults(fn=_report)


def _report(args) -> int:
    from ..viz.report import report_main

    run, out = Path(args.run_dir), Path(args.out)
    if not run.is_dir():
        raise UsageError(f"{run}: run folder does not exist or is not a folder")
    if out.is_dir():
        raise UsageError(f"argument -o/--out: {out} is a folder; give the path of the .html file to write")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"argument -o/--out: {out} lies under {parent}, which is a file")
            break
    for flag, value in (("--max-cards", args.max_cards), ("--max-episodes", args.max_episodes)):
        if value < 1:
            raise UsageError(f"argument {flag}: expected a positive number, got {value}")
    return report_main(
        args.run_dir,
        args.out,
        args.failures_only,
        max_cards=args.max_cards,
        checkpoints=args.checkpoints,
        outcomes=args.outcomes,
        max_episodes=args.max_episodes,
    )


def _add_failures(sub, debug) -> None:
    fa = sub.add_parser(
        "failures",
        help="where a checkpoint's online episodes of a run first went wrong, and whether they came back",
        parents=[debug],
    )
    fa.add_argument("run_dir", help="a run folder, e.g. papermill_runs/small/default")
    fa.add_argument("checkpoint", help="a checkpoint the run played online (its eval/<name>/trajectories.jsonl)")
    fa.set_defaults(fn=_failures)


def _failures(args) -> int:
    """`inquire failures RUN NAME`: the failure table of the checkpoint's online episodes in the run."""
    from ..evaluation.failures import failure_by_subcategory, failure_markdown, failure_table
    from ..runs.records import read_jsonl

    path = Path(args.run_dir) / "eval" / args.checkpoint / "trajectories.jsonl"
    if not path.is_file():
        raise UsageError(f"{path}: no online episodes of {args.checkpoint} in that run")
    table = failure_table([rec for _, rec in read_jsonl(path)])
    print(failure_markdown(table))
    print(failure_by_subcategory(table))
    return 0


def _add_summary(sub, debug) -> None:
    su = sub.add_parser("summary", help="print a run's step, task and wall-time tables as Markdown", parents=[debug])
    su.add_argument("run_dir")
    su.add_argument("--ablations", action="store_true", help="list the ablations notebook's points in the tables too")
    su.set_defaults(fn=_summary)


def _summary(args) -> int:
    from ..runs.summary import summary

    run = Path(args.run_dir)
    if not run.is_dir():
        raise UsageError(f"{run}: run folder does not exist or is not a folder")
    try:
        print(summary(run, ablations=args.ablations), end="")
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _add_profile(sub, debug) -> None:
    pr = sub.add_parser("profile", help="print a profile's settings", parents=[debug])
    pr.add_argument("name")
    pr.add_argument("--set", action="append", metavar="KEY=VALUE", help="show the profile with this override")
    pr.add_argument(
        "--explain",
        action="store_true",
        help="each field with its help, where its value came from (default, profile, override) and what it affects",
    )
    pr.set_defaults(fn=_profile)


def _profile(args) -> int:
    profile = settings_or_usage(args.name, args.set)
    print(explain_text(profile) if args.explain else json.dumps(profile.to_dict(), indent=1))
    return 0


def explain_text(profile) -> str:
    """`inquire profile NAME --explain`: a header, then each field as `name = value  [source]  Settings  affects: ...`
    (the settings class that declares it) with its help indented below, then what each word of `affects` means (all from the fields' metadata)."""
    from ..profiles import AFFECTS, explain

    rows = explain(profile)
    counts = {s: sum(r["source"] == s for r in rows) for s in ("default", "profile", "override")}
    lines = [
        f"profile {profile.name}: {len(rows)} fields, {counts['default']} default, {counts['profile']} "
        f"from the profile, {counts['override']} overridden (--set)"
    ]
    for r in rows:
        value = json.dumps(r["value"], default=str)
        lines.append(f"{r['field']} = {value}  [{r['source']}]  {r['settings']}  affects: {', '.join(r['affects'])}")
        lines.append(f"    {r['help']}")
    lines.append("affects:")
    lines += [f"  {word}: {meaning}" for word, meaning in AFFECTS.items()]
    return "\n".join(lines)
