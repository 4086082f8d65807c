"""Complete or absent: completeness markers for checkpoints and caches.

A folder written by this workbench (a trainer's `checkpoint-N`, a run's `final/` or `selected/`,
a cached dataset or model) is complete only when its marker `inquire_complete.json` is there and
every file it lists has the recorded size and sha256. The marker is written last, so a process
killed while the folder was being written leaves no marker, and readers treat the folder as absent:

- `last_complete_checkpoint(run)` is what a resumed trainer starts from (never a half-saved one);
- `verify(folder)` returns why a folder is not complete (None when it is).
The checks that need torch (weights holding NaN/Inf, the trainer callback that writes a
checkpoint's marker) live in `training.weights`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

MARKER = "inquire_complete.json"
MARKER_VERSION = 1
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_CHUNK = 1 << 20

log = logging.getLogger(__name__)


class IncompleteError(RuntimeError):
    """A folder that should be complete is not: `str()` names the folder and the first problem."""


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    """Every regular file under `folder` except the marker, sorted by relative path."""
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.relative_to(folder).as_posix() != MARKER:
            out.append(path)
    return out


def write_marker(folder: str | os.PathLike, **extra) -> Path:
    """List every file of `folder` with its size and sha256 in `folder/inquire_complete.json`,
    written last (temp file, fsync, rename), so its presence means the rest is on disk."""
    folder = Path(folder)
    files = {
        p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in _files(folder)
    }
    body = json.dumps({"version": MARKER_VERSION, "files": files, **extra}, indent=1, sort_keys=True)
    tmp = folder / f".{MARKER}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / MARKER)
    return folder / MARKER


def read_marker(folder: str | os.PathLike) -> dict | None:
    path = Path(folder) / MARKER
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("files"), dict) else None


def verify(folder: str | os.PathLike, hashes: bool = True) -> str | None:
    """Why `folder` is not complete (missing, no marker, a listed file missing, of another size or,
    with `hashes`, another content), naming the file; None when it is complete."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder}: not a folder"
    rec = read_marker(folder)
    if rec is None:
        return f"{folder / MARKER}: missing or unreadable (the folder was not finished)"
    for rel, want in sorted(rec["files"].items()):
        path = folder / rel
        try:
            size = path.stat().st_size
        except OSError:
            return f"{path}: listed in {MARKER} but missing"
        if size != want.get("size"):
            return f"{path}: {size} bytes, {want.get('size')} recorded in {MARKER}"
        if hashes and sha256_file(path) != want.get("sha256"):
            return f"{path}: content differs from the sha256 recorded in {MARKER}"
    return None


def is_complete(folder: str | os.PathLike, hashes: bool = True) -> bool:
    return verify(folder, hashes) is None


def digest(folder: str | os.PathLike) -> str | None:
    """One sha256 over the recorded files of a complete folder (its content, not its path);
    None when the folder has no marker."""
    rec = read_marker(folder)
    if rec is None:
        return None
    h = hashlib.sha256()
    for rel, want in sorted(rec["files"].items()):
        h.update(f"{rel}\0{want.get('sha256')}\n".encode())
    return h.hexdigest()


def content_digest(path: str | os.PathLike, names=None) -> str:
    """sha256 over the files of a model folder (all, or those in `names`), from their bytes: the
    identity of a model that does not depend on where it lies."""
    path = Path(path)
    h = hashlib.sha256()
    for p in _files(path):
        rel = p.relative_to(path).as_posix()
        if names is None or rel in names:
            h.update(f"{rel}\0{sha256_file(p)}\n".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------- checkpoints
def checkpoint_dirs(run: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every `checkpoint-N` folder of a trainer's output folder, by step."""
    run = Path(run)
    if not run.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
    return sorted(found)


def checkpoint_problem(folder: str | os.PathLike, hashes: bool = True) -> str | None:
    """Why a trainer's `checkpoint-N` cannot be resumed from or evaluated (None when it can).
    With a marker, the marker decides. A checkpoint saved before markers existed is accepted when
    its `trainer_state.json` (which the trainer writes after the weights, optimizer and RNG state)
    parses and names step N."""
    folder = Path(folder)
    if read_marker(folder) is not None:
        return verify(folder, hashes)
    state = folder / "trainer_state.json"
    try:
        step = json.loads(state.read_text(encoding="utf-8")).get("global_step")
    except (OSError, ValueError, AttributeError):
        return f"{folder}: no {MARKER} and no readable trainer_state.json (the save was cut short)"
    m = _CHECKPOINT.match(folder.name)
    if m is None or step != int(m.group(1)):
        return f"{state}: global_step {step!r} does not match the folder name"
    return None


def complete_checkpoints(run: str | os.PathLike) -> list[tuple[int, Path]]:
    """The complete `checkpoint-N` folders of `run`, by step (sizes checked, not hashes)."""
    return [(step, p) for step, p in checkpoint_dirs(run) if checkpoint_problem(p, hashes=False) is None]


def finished_output(folder: str | os.PathLike) -> bool:
    """Whether a training output (`final/`, `selected/`) may be listed and loaded: complete by its
    marker (sizes), or written before markers existed and holding `inquire_train.json`, which that
    code wrote last. A `final/` killed between its weights and its metadata is neither."""
    folder = Path(folder)
    if read_marker(folder) is not None:
        return verify(folder, hashes=False) is None
    return (folder / "inquire_train.json").is_file()


def last_complete_checkpoint(run: str | os.PathLike, discard_incomplete: bool = False) -> str | None:
    """The newest checkpoint whose marker and files check out (sizes and hashes), else None.

    Newer half-written checkpoints are skipped with a warning naming them; with
    `discard_incomplete` they are removed (they are this trainer's own output, and a resumed run
    would otherwise save into them or rotate the good ones away in their favour)."""
    chosen = None
    for step, folder in reversed(checkpoint_dirs(run)):
        problem = checkpoint_problem(folder)
        if problem is None:
            chosen = str(folder)
            break
        log.warning("skipping incomplete checkpoint %s: %s", folder, problem)
        if discard_incomplete:
            shutil.rmtree(folder, ignore_errors=True)
    return chosen


def discard_stale_temps(folder: str | os.PathLike, name: str) -> None:
    """Remove `.<name>.*` temp folders that an atomic write killed part-way left in `folder`."""
    folder = Path(folder)
    if folder.is_dir():
        for p in folder.glob(f".{name}.*"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


# --------------------------------------------------------------------------------- caches
class CacheWarning(UserWarning):
    """A cached folder failed its check and is being rebuilt."""


def check_cache(folder: str | os.PathLike, adopt=None) -> bool:
    """Whether the cached `folder` may be served as is.

    True when its marker checks out (sizes and sha256). A folder written before markers existed
    (no marker) is served only when `adopt()` confirms it (e.g. its stored fingerprint matches, its
    weights load); it then gets a marker. Anything else (a listed file missing, truncated or edited
    in place) warns with a CacheWarning naming the file and returns False: the caller rebuilds."""
    import warnings

    folder = Path(folder)
    if not folder.exists():
        return False
    problem = verify(folder)
    if problem is None:
        return True
    if read_marker(folder) is None and adopt is not None:
        try:
            ok = adopt()
        except Exception as exc:  # a legacy folder that does not even load
            ok, problem = False, f"{folder}: {exc}"
        if ok is True:
            write_marker(folder, adopted=True)
            return True
        if isinstance(ok, str):
            problem = ok
    warnings.warn(f"cache {folder} is not intact ({problem}); rebuilding it", CacheWarning, stacklevel=2)
    return False
