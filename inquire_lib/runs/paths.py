"""Where everything lives on disk, and the one way to write a file or a folder safely.

One root, the repository (`REPO_ROOT`); four folders below it, each movable by one environment
variable, read here and nowhere else (a relative value is taken from the repository root):

| folder            | variable            | holds                                                        |
|-------------------|---------------------|--------------------------------------------------------------|
| `.cache/`         | `INQUIRE_CACHE`     | generated datasets, the tiny models, the cached base agent   |
| `artifacts/`      | `INQUIRE_ARTIFACTS` | checkpoints: `artifacts/<profile>/<stage>/`                  |
| `papermill_runs/` | `INQUIRE_RUNS`      | a named run: `<root>/<profile>/<run>/` (notebooks, metrics, eval) |
| `figures/`        | `INQUIRE_FIGURES`   | figures: `figures/<profile>/`                                |

Runs have names (`INQUIRE_RUN_NAME`, set by the notebook runner for its kernels; "default" when
unset). The run folder always carries the name; checkpoints and figures of the default run stay in
`artifacts/<profile>/` and `figures/<profile>/` (where existing checkpoints are), those of any
other run go to `artifacts/<profile>/runs/<run>/` and `figures/<profile>/runs/<run>/`, so runs with
different overrides never reuse or overwrite each other's checkpoints.

Writers: `atomic_path` (any writer that takes a path), `atomic_dir` (a whole folder),
`write_text_atomic`, `write_json_atomic`, `write_jsonl_atomic`. A reader sees the old file or the
new one, never half of one; a failed write leaves nothing behind.
"""

from __future__ import annotations

from ..profiles import Named, RunSettings
import contextlib
import dataclasses
import datetime as _dt
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"

# folder -> (environment variable, default below REPO_ROOT)
FOLDERS = {
    "cache": ("INQUIRE_CACHE", ".cache"),
    "artifacts": ("INQUIRE_ARTIFACTS", "artifacts"),
    "runs": ("INQUIRE_RUNS", "papermill_runs"),
    "figures": ("INQUIRE_FIGURES", "figures"),
}


# the run name: its variable and its value when unset
RUN_NAME = ("INQUIRE_RUN_NAME", "default")
_RUN_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9.,=+_-]{0,119}")


def check_run_name(name: str) -> str:
    """`name` when it is a usable folder name (letters, digits, `.,=+_-`, not starting with a
    punctuation mark, at most 120 characters); ValueError otherwise."""
    if not isinstance(name, str) or not _RUN_NAME_OK.fullmatch(name):
        raise ValueError(
            f"run name {name!r} must be 1-120 characters of letters, digits and .,=+_- starting with a letter or digit"
        )
    return name


def run_name() -> str:
    """The current run's name: $INQUIRE_RUN_NAME, else "default"."""
    variable, default = RUN_NAME
    return check_run_name(os.environ.get(variable) or default)


def run_named_by_overrides(profile: RunSettings) -> str:
    """Make a profile made with overrides write to the run those overrides name (as `inquire run` does),
    never into the default run's folders, unless $INQUIRE_RUN_NAME already names one; the run's name."""
    if profile.overrides and not os.environ.get(RUN_NAME[0]):
        from ..profiles import default_run_name

        os.environ[RUN_NAME[0]] = default_run_name(dict(profile.overrides))
    return run_name()


def root(folder: str, override: str | os.PathLike | None = None) -> Path:
    """The root of `folder` ("cache", "artifacts", "runs" or "figures"): `override` when given,
    else its environment variable, else its default; relative paths are taken from REPO_ROOT."""
    variable, default = FOLDERS[folder]
    path = Path(override if override is not None else os.environ.get(variable) or default)
    return path if path.is_absolute() else REPO_ROOT / path


def _name(profile: str | Named) -> str:
    return profile if isinstance(profile, str) else profile.name


def cache_dir() -> Path:
    """Generated datasets (`data/`), tiny models and base agents (`models/`)."""
    return root("cache")


def _per_run(base: Path, name: str | None) -> Path:
    name = check_run_name(name) if name is not None else run_name()
    return base if name == RUN_NAME[1] else base / "runs" / name


def artifacts_dir(profile: str | Named, name: str | None = None) -> Path:
    """A run's checkpoints: `artifacts/<profile>/` for the default run, else
    `artifacts/<profile>/runs/<run>/` (`name`, default the current run)."""
    return _per_run(root("artifacts") / _name(profile), name)


def run_dir(profile: str | Named, out_root: str | os.PathLike | None = None, name: str | None = None) -> Path:
    """A named run: `<out_root or $INQUIRE_RUNS or papermill_runs>/<profile>/<run>/`, the run being
    `name` or the current one (`run_name`). The notebook runner sets $INQUIRE_RUNS and
    $INQUIRE_RUN_NAME for its kernels, so what a notebook writes lands beside its executed copy."""
    return root("runs", out_root) / _name(profile) / (check_run_name(name) if name is not None else run_name())


def metrics_dir(profile: str | Named, out_root: str | os.PathLike | None = None) -> Path:
    """`<run_dir>/metrics/`: every metrics JSON of a run."""
    return run_dir(profile, out_root) / "metrics"


def eval_dir(profile: str | Named, out_root: str | os.PathLike | None = None) -> Path:
    """`<run_dir>/eval/`: screenshots, and per checkpoint its predictions and trajectories."""
    return run_dir(profile, out_root) / "eval"


def figures_dir(profile: str | Named, name: str | None = None) -> Path:
    """`figures/<profile>/` for the default run, else `figures/<profile>/runs/<run>/`; created on first use."""
    path = _per_run(root("figures") / _name(profile), name)
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------------ safe writes
def to_json(obj: Any, where: str = "$") -> Any:
    """Convert obj to plain JSON types: tuples/sets to lists, numpy scalars and arrays through
    .item()/.tolist(), paths to str, dataclasses to dicts, NaN and infinities to None (JSON has
    no such numbers). Raises TypeError naming the offending key path."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise TypeError(f"{where}: dict key {key!r} of type {type(key).__name__} is not JSON")
            out[key if isinstance(key, str) else json.dumps(key)] = to_json(value, f"{where}.{key}")
        return out
    if isinstance(obj, (list, tuple)):
        return [to_json(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        items = [to_json(v, f"{where}{{}}") for v in obj]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_json(dataclasses.asdict(obj), where)
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy / torch arrays and scalars
        return to_json(obj.tolist(), where)
    if hasattr(obj, "item") and callable(obj.item):
        return to_json(obj.item(), where)
    raise TypeError(f"{where}: value of type {type(obj).__name__} is not JSON serialisable")


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask  # what a plain open() would give; mkstemp's 0600 would hide results


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temp path beside `path` for any writer (plotly, PIL, open); on success it is renamed
    onto `path` with an ordinary file's mode, on failure removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(out: str | os.PathLike):
    """Yield a temp folder beside `out`; on success it replaces `out` whole, on failure it is removed,
    so a reader never sees a half-written folder."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 text to path atomically (flushed to disk before the rename). Returns the path."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write obj (through `to_json`) as indented UTF-8 JSON, atomically. Returns the path."""
    return write_text_atomic(path, json.dumps(to_json(obj), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    """One JSON object per line, atomically. Returns the path."""
    return write_text_atomic(path, "".join(json.dumps(to_json(r)) + "\n" for r in rows))


def copy_dir_atomic(source: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Copy the folder `source` (its completeness marker included) to `dest`, replacing it whole:
    a reader sees the old `dest` or the new one."""
    with atomic_dir(dest) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
    return Path(dest)
