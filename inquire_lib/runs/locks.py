"""One process at a time on a run or a checkpoint folder.

`held(path, what)` creates the lock file `path` atomically (O_CREAT | O_EXCL) with the holder's pid,
its start time and its host, and removes it when the block ends, normally or by an exception. A
second process that finds the file while its holder lives stops at once with `Busy`, one line naming
`what`, the pid and its start time. A holder is gone when its pid no longer exists, is a zombie, or
now belongs to a process that started at another time (a reused pid); its file is taken over with
one warning line. A holder on another host cannot be checked from here, so it counts as alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

LOCK_NAME = ".inquire.lock"
_SETTLE_S = 1.0  # how long a file caught between its creation and its content is given to fill


class Busy(OSError):
    """The run or folder is held by a live process; the message is one line."""


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (which may hold spaces): state first; None off Linux
    or when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process's start, in clock ticks since boot (field 22 of /proc/<pid>/stat): with the pid it
    names a process, since a reused pid starts later."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def _started_at(ticks: int | None) -> str:
    """The wall-clock start of a process started `ticks` after boot, UTC to the second (now, off Linux)."""
    stamp = time.time()
    with contextlib.suppress(OSError, ValueError, StopIteration):
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime "))
        if ticks is not None:
            stamp = boot + ticks / os.sysconf("SC_CLK_TCK")
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def alive(holder: dict) -> bool:
    """Whether the process a lock file names still runs (on another host: assumed)."""
    if holder.get("host") != socket.gethostname():
        return True
    pid = int(holder["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc to look closer: the pid exists
    return fields[0] != "Z" and (holder.get("start_ticks") is None or int(fields[19]) == holder["start_ticks"])


def _read(path: Path) -> tuple[bytes, dict | None]:
    """The file's bytes and its holder; None for a file being written (given `_SETTLE_S` to fill) or torn."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        raw = path.read_bytes()
        with contextlib.suppress(ValueError):
            holder = json.loads(raw)
            if isinstance(holder, dict) and isinstance(holder.get("pid"), int):
                return raw, holder
        if time.monotonic() > deadline:
            return raw, None
        time.sleep(0.05)


def _describe(holder: dict) -> str:
    return f"pid {holder['pid']} (started {holder.get('started', '?')} on {holder.get('host', '?')})"


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def acquire(path: str | Path, what: str, warn: Callable[[str], None] = _warn) -> dict:
    """Take the lock file `path` for `what` (e.g. "run smoke/twin"); returns what it wrote. Raises
    Busy when a live process holds it; takes over, with one `warn` line, a file whose holder is gone."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ticks = start_ticks(os.getpid())
    mine = {
        "pid": os.getpid(),
        "start_ticks": ticks,
        "started": _started_at(ticks),
        "host": socket.gethostname(),
        "what": what,
    }
    for _ in range(5):  # another process may take a stale file over between our looks
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                _take_over(path, what, warn)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(mine, f)
        return mine
    raise Busy(f"{what}: could not take the lock {path}: other processes keep taking it")


def _take_over(path: Path, what: str, warn: Callable[[str], None]) -> None:
    """Remove `path` when its holder is gone (Busy when it lives); unchanged since it was read, so a
    lock another process has just taken over is left to it."""
    raw, holder = _read(path)
    if holder is not None and alive(holder):
        raise Busy(f"{what} is in use by {_describe(holder)}; lock file {path}")
    if path.read_bytes() != raw:
        return
    path.unlink()
    gone = _describe(holder) if holder is not None else "a process that left it unreadable"
    warn(f"warning: {what}: taking over the lock of {gone}, which is no longer running ({path})")


def release(path: str | Path, mine: dict) -> None:
    """Remove the lock file when it is still ours (a process that took it over keeps it)."""
    path = Path(path)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_bytes()) == mine:
            path.unlink()


@contextlib.contextmanager
def held(path: str | Path, what: str, warn: Callable[[str], None] = _warn) -> Iterator[dict]:
    """The lock file `path` held for the block (see `acquire`), released however the block ends."""
    mine = acquire(path, what, warn)
    try:
        yield mine
    finally:
        release(path, mine)
