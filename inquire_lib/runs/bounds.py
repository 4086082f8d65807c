"""Bounds on what the workbench reads from files it did not write.

- Lines: a JSON-lines reader never holds more than `max_line_bytes()` of one line (1 MiB unless
  $INQUIRE_MAX_LINE_BYTES or a command's `--max-line-bytes` says otherwise); a longer line is an
  error naming the file and the line, and the reader skips to the next line break in chunks, so a
  file with no line breaks is never read whole into memory.
- Numbers: sizes and coordinates are range-checked (`MAX_PIXELS`, the same bound as a model's
  coordinates, `actions.MAX_COORD`) before any arithmetic, so no value can overflow the frame
  conversions or the int32 dataset columns.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterator

from ..agent.actions import MAX_COORD

MAX_LINE_ENV = "INQUIRE_MAX_LINE_BYTES"
DEFAULT_MAX_LINE_BYTES = 1 << 20
MAX_PIXELS = MAX_COORD  # a screen side, a box edge or a point coordinate, in pixels
_SKIP_CHUNK = 1 << 16


class LineTooLong(ValueError):
    """A line longer than the configured maximum: `str()` is "<file>:<line>: ..."."""

    def __init__(self, path, line: int, limit: int):
        self.path, self.line, self.limit = str(path), line, limit
        super().__init__(
            f"{path}:{line}: line longer than {limit} bytes (raise it with --max-line-bytes or ${MAX_LINE_ENV})"
        )


def max_line_bytes(override: int | None = None) -> int:
    """The line-length bound: `override`, else $INQUIRE_MAX_LINE_BYTES, else 1 MiB."""
    if override is not None:
        value = override
    else:
        raw = os.environ.get(MAX_LINE_ENV, "").strip()
        try:
            value = int(raw) if raw else DEFAULT_MAX_LINE_BYTES
        except ValueError:
            raise ValueError(f"${MAX_LINE_ENV}={raw!r} is not an integer") from None
    if value <= 0:
        raise ValueError(f"the maximum line length must be a positive number of bytes, got {value}")
    return value


def iter_lines(path: str | os.PathLike, limit: int | None = None) -> Iterator[tuple[int, bytes | LineTooLong]]:
    """(1-based line number, raw bytes without the line break) for every line of `path`; a line over
    `limit` bytes yields a LineTooLong in its place and is skipped without being held in memory."""
    limit = max_line_bytes(limit)
    with open(Path(path), "rb") as fh:
        line_no = 0
        while True:
            raw = fh.readline(limit + 1)
            if not raw:
                return
            line_no += 1
            body = raw[:-1] if raw.endswith(b"\n") else raw
            if len(body) > limit:
                tail = raw
                while tail and not tail.endswith(b"\n"):
                    tail = fh.readline(_SKIP_CHUNK)
                yield line_no, LineTooLong(path, line_no, limit)
                continue
            yield line_no, body


def number_problem(v, low: float, high: float, integer: bool = False) -> str | None:
    """Why `v` is not a number in [low, high] (None when it is): bools, strings, NaN, infinities and
    ints too large for a float are refused before any arithmetic touches them."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"expected a number, got {'null' if v is None else type(v).__name__} {v!r}"
    if integer and not isinstance(v, int):
        return f"expected an integer, got {v!r}"
    if isinstance(v, int):
        if not low <= v <= high:  # exact comparison: no float conversion of a huge int
            return f"{_short(v)} is outside [{_fmt(low)}, {_fmt(high)}]"
        return None
    if not math.isfinite(v) or not low <= v <= high:
        return f"{v!r} is outside [{_fmt(low)}, {_fmt(high)}]"
    return None


def _short(v: int) -> str:
    s = str(v)
    return s if len(s) <= 24 else f"{s[:10]}...({len(s)} digits)"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
