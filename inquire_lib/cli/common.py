"""What several verbs of `inquire` share: the two errors a verb raises (their exit codes are `cli.exit_code`'s),
the profile a verb is given (`--profile`, `--set`), and the checkpoint `--start` or `--checkpoint` names."""

from __future__ import annotations

from pathlib import Path

from ..profiles import DEFAULT_PROFILE


class UsageError(Exception):
    """A bad argument or an unusable path: exit code 2."""


class DataError(Exception):
    """Bad data in a file the command read: exit code 1."""


def profile_or_usage(name: str):
    from ..profiles import PROFILES, get_profile

    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; choose one of {', '.join(sorted(PROFILES))}")
    return get_profile(name)


def settings_or_usage(name: str, sets: list[str] | None):
    """The profile `name` with the `--set` overrides applied; an unknown profile or a bad override is a usage
    error."""
    from ..profiles import OverrideError, apply_overrides, parse_overrides

    profile = profile_or_usage(name)
    try:
        return apply_overrides(profile, parse_overrides(sets or []))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None


def run_settings(parser, set_help: str) -> None:
    """--profile (default small) and --set: the settings that name a trained run's folder."""
    parser.add_argument(
        "--profile", default=DEFAULT_PROFILE, help=f"the profile the run was trained with (default: {DEFAULT_PROFILE})"
    )
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help=set_help)


def named_checkpoint(profile, start: str | None) -> str | None:
    """--start: a folder as is, else a named checkpoint of the profile (sft_full, grpo_full, ...)."""
    from ..training.checkpoints import checkpoint_path

    if start is None or Path(start).exists():
        return start
    return checkpoint_path(profile, start)
