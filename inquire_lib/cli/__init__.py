"""The `inquire` command: build, validate, run, report, profile, train, base-agent, export, export-openvino.

Errors are one line on stderr naming the file, line and field, or the argument: exit code 2 for a
usage error (a bad argument, a path that cannot be used), 1 for bad data (a malformed record, a
corrupt model) or a failed notebook. `--debug` shows the traceback instead.
"""

from __future__ import annotations

# The package: here the top-level parser, `main` and the exit codes; in `common` the two errors and what several
# verbs share; then one module a group of verbs, whose `register` adds their subparsers beside the handlers that
# read them: `data_verbs` (build, validate), `run_verbs` (run, plan), `report_verbs` (report, failures, summary,
# profile), `train_verbs` (train, base-agent), `ship_verbs` (ship), `evaluate_verbs` (evaluate, learning-curve),
# `export_verbs` (export, export-openvino).

import argparse
import os
import sys

from .common import DataError, UsageError
from .data_verbs import build_estimate
from .data_verbs import register as register_data
from .evaluate_verbs import register as register_evaluate
from .export_verbs import register as register_export
from .report_verbs import explain_text
from .report_verbs import register as register_reports
from .run_verbs import register as register_run
from .ship_verbs import register as register_ship
from .train_verbs import DEFAULT_NAMES, STAGE0_RECORDED
from .train_verbs import register as register_train

__all__ = [
    "DEFAULT_NAMES",
    "STAGE0_RECORDED",
    "DataError",
    "UsageError",
    "build_estimate",
    "exit_code",
    "explain_text",
    "main",
]

# each adds its module's verbs' subparsers, in the order `inquire --help` lists them
REGISTERS = (
    register_data,
    register_run,
    register_reports,
    register_train,
    register_ship,
    register_evaluate,
    register_export,
)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (`inquire: error: ...`), exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an error instead of one line",
    )
    p = _Parser(prog="inquire", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error instead of one line")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    for register in REGISTERS:
        register(sub, debug)
    return p


def exit_code(exc: BaseException) -> int:
    """2 for a usage error (an argument or a path that cannot be used), 1 for bad data and the rest."""
    from ..runs.bounds import LineTooLong
    from ..data.external import RecordError
    from ..training.weights import CorruptWeightsError
    from ..viz.inspector import PredictionFormatError

    if isinstance(
        exc, (RecordError, PredictionFormatError, CorruptWeightsError, LineTooLong, DataError, UnicodeDecodeError)
    ):
        return 1
    if isinstance(exc, (UsageError, OSError)):
        return 2
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("inquire: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader stopped early (`inquire profile cpu --explain | head`): not an error of ours; stdout
        # goes to /dev/null so that the interpreter's own flush at exit does not complain either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        code = exit_code(exc)
        known = code == 2 or isinstance(exc, (ValueError, OSError, DataError))
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
            text = f"{exc.filename}: {text}"
        if not known:
            text = f"internal error: {type(exc).__name__}: {text} (run with --debug for the traceback)"
        print(f"inquire {args.cmd}: {text}", file=sys.stderr)
        return code
