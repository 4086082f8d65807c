"""`inquire export` (the GRPO prompts for another RL framework) and `inquire export-openvino` (a checkpoint for
eval_engine openvino)."""

from __future__ import annotations

import json

from ..profiles import DEFAULT_PROFILE
from .common import DataError, named_checkpoint


def register(sub, debug) -> None:
    _add_export(sub, debug)
    _add_export_openvino(sub, debug)


def _add_export(sub, debug) -> None:
    e = sub.add_parser("export", help="write the GRPO prompts for another RL framework", parents=[debug])
    e.add_argument("--format", choices=["verl"], default="verl", help="verl / EasyR1 RL dataset parquet")
    e.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    e.add_argument("--out", required=True)
    e.add_argument("--splits", nargs="*", default=["train", "validation"], choices=["train", "validation", "test"])
    e.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    e.set_defaults(fn=_export)


def _export(args) -> int:
    from ..profiles import apply_overrides, get_profile, parse_overrides
    from ..training.export_verl import export_verl

    profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
    info = export_verl(profile, args.out, splits=args.splits)
    print(json.dumps(info, indent=1))
    return 0


def _add_export_openvino(sub, debug) -> None:
    ov = sub.add_parser(
        "export-openvino",
        help="export a checkpoint for eval_engine openvino (cached by its content; reused unless it changed)",
        parents=[debug],
    )
    ov.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    ov.add_argument(
        "--checkpoint", default="base_agent", help="checkpoint folder or name (untrained, base_agent, sft_full, ...)"
    )
    ov.add_argument("--out", default=None, help="export folder (default: .cache/openvino/<profile>-<key>)")
    ov.add_argument("--rebuild", action="store_true", help="export again even when a matching export exists")
    ov.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ov.set_defaults(fn=_export_openvino)


def _export_openvino(args) -> int:
    from ..evaluation.engine import ExportError
    from ..profiles import apply_overrides, get_profile, parse_overrides
    from ..training.openvino import export_openvino

    profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
    try:
        info = export_openvino(profile, named_checkpoint(profile, args.checkpoint), args.out, rebuild=args.rebuild)
    except ExportError as exc:
        raise DataError(str(exc)) from None
    print(json.dumps(info, indent=1))
    return 0
