"""`inquire run` (the notebooks, with papermill, into a run folder) and `inquire plan` (what such a run would do
with each stage, and nothing else)."""

from __future__ import annotations

import sys

from ..profiles import DEFAULT_PROFILE, EvalSettings
from .common import UsageError, profile_or_usage, settings_or_usage


def register(sub, debug) -> None:
    _add_run(sub, debug)
    _add_plan(sub, debug)


def _add_run(sub, debug) -> None:
    r = sub.add_parser(
        "run", help="execute the notebooks with papermill into papermill_runs/<profile>/<name>/", parents=[debug]
    )
    r.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    r.add_argument("--only", nargs="*", help="notebook prefixes, e.g. 01 02")
    r.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a profile field (repeatable), e.g. --set grpo_lr=1e-4 --set missed_penalty=2",
    )
    r.add_argument(
        "--name",
        default=None,
        help="run name (default: 'default', or the overrides, e.g. grpo_lr=0.0001); an existing run "
        "with the same settings is continued, one with other settings is refused",
    )
    r.add_argument(
        "--train",
        action="store_true",
        help="train the stages the plan trains past the profile's short runs (without it such a run stops first)",
    )
    r.set_defaults(fn=_run)


def _run(args) -> int:
    from ..profiles import OverrideError, apply_overrides, parse_overrides
    from ..runs.notebooks import NotebookFailed, discover_notebooks, run_notebooks, select_notebooks

    profile_or_usage(args.profile)
    if args.only:
        try:
            select_notebooks(discover_notebooks(), args.only)
        except ValueError as exc:
            raise UsageError(f"argument --only: {exc}") from None
    try:
        overrides = parse_overrides(args.set or [])
        effective = apply_overrides(args.profile, overrides)
        _engine_or_usage(effective)
        figures = _figures_note()

        def preflight() -> None:  # with the run's lock held: a run another process holds prints nothing
            _plan_or_usage(effective, args.train, "inquire run", "make run TRAIN=1")
            if figures:
                print(figures)

        run_notebooks(args.profile, only=args.only or None, overrides=overrides, name=args.name, preflight=preflight)
        if figures:
            print(figures)
    except (OverrideError, KeyError, ValueError) as exc:  # settings refused before any kernel starts
        raise UsageError(exc.args[0] if isinstance(exc, KeyError) else str(exc)) from None
    except NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _engine_or_usage(profile: EvalSettings) -> None:
    """Stop before any notebook starts when the profile's evaluation engine is not installed here."""
    from ..training.openvino import engine_missing

    missing = engine_missing(profile)
    if missing is not None:
        raise UsageError(f"profile {profile.name!r}: {missing}")


def _plan_or_usage(profile, train: bool, command: str, make: str | None = None) -> None:
    """Print what the run will do with each stage (`stages.plan`); stop before anything starts when it would train
    a stage past the profile's short runs and was not asked to (`--train`)."""
    from ..stages.plan import plan, plan_lines, trains_long

    steps = plan(profile)
    print("\n".join(plan_lines(profile, steps)), flush=True)
    long = trains_long(profile, steps)
    if long and not train:
        hours = [s.hours for s in long if s.hours is not None]
        cost = f"about {sum(hours):.1f} h measured" if hours else "time unmeasured"
        ways = f"add --train to `{command}`" + (f" ({make})" if make else "")
        raise UsageError(
            f"profile {profile.name!r} would train {', '.join(s.stage for s in long)} ({cost}) and was not asked "
            f"to train: {ways} to go on, or change the settings back (`inquire plan` shows the plan)"
        )


def _figures_note() -> str | None:
    """The one line a run prints when its figures will be HTML only (no Chrome for plotly's PNG export)."""
    from ..viz.overlays import find_chrome

    if find_chrome() is not None:
        return None
    return "figures: HTML only, no PNG: plotly's PNG export needs Chrome/Chromium, and none is installed (make browser)"


def _add_plan(sub, debug) -> None:
    pl = sub.add_parser(
        "plan", help="print what a run would do with each stage: find, install, or train it", parents=[debug]
    )
    pl.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    pl.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile field (repeatable)")
    pl.set_defaults(fn=_plan)


def _plan(args) -> int:
    """`inquire plan`: what a run of the profile would do with each stage, and nothing else."""
    from ..stages.plan import plan, plan_lines, trains_long

    profile = settings_or_usage(args.profile, args.set)
    steps = plan(profile)
    print("\n".join(plan_lines(profile, steps)))
    long = trains_long(profile, steps)
    if long:
        print(f"a run stops before it trains {', '.join(s.stage for s in long)}, unless given --train")
    return 0
