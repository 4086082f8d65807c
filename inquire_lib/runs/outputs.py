"""Writing a command's output folder without touching anything else in it.

`write_owned_dir(out, fill, force)` is how `inquire build --out` writes: the output is made in a
temp folder beside `out` by `fill(tmp)`, which must end with the completeness marker
(`integrity.write_marker`) listing what it wrote; then

- `out` missing, empty, or holding only what an earlier run wrote (its marker lists every entry):
  `out` is replaced whole, in one rename; an existing folder keeps its mode;
- `out` holding anything else: refused (OutputExistsError) unless `force`; with `force`, only the
  entries this command writes are put in place (each by rename; the marker last) and the foreign
  ones are left as they are; a foreign entry with the name of one of ours is never replaced;
- `out` a file, or under a file: refused.

Nothing that this command did not write is ever deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .integrity import MARKER, read_marker


class OutputExistsError(FileExistsError):
    """The output folder holds something this command did not write."""


def _ours(folder: Path) -> set[str]:
    """Top-level entries an earlier run of ours wrote into `folder`, from its marker."""
    rec = read_marker(folder)
    if rec is None:
        return set()
    return {rel.split("/", 1)[0] for rel in rec["files"]} | {MARKER}


def check_output_dir(out: str | os.PathLike, force: bool = False) -> list[str]:
    """Raise when `out` cannot be written (see the module doc); return its foreign entries
    (those `force` would keep)."""
    out = Path(out)
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            what = "is a file" if parent == out else f"lies under {parent}, which is a file"
            raise NotADirectoryError(f"{out}: {what}, not a folder")
        if parent.exists():
            break
    if not out.exists():
        return []
    entries = sorted(p.name for p in out.iterdir())
    foreign = [e for e in entries if e not in _ours(out)]
    if foreign and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputExistsError(
            f"{out}: folder is not empty and holds files this command did not write "
            f"({shown}); choose a new or empty folder, or pass --force to write "
            "beside them"
        )
    return foreign


def _dir_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def write_owned_dir(out: str | os.PathLike, fill, force: bool = False) -> Path:
    """Write `out` as described in the module doc; `fill(tmp)` writes the output into `tmp`."""
    out = Path(out)
    foreign = check_output_dir(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    mode = out.stat().st_mode & 0o7777 if out.exists() else _dir_mode()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fill(tmp)
        if read_marker(tmp) is None:
            raise RuntimeError(f"{tmp}: the output was written without its completeness marker")
        new = sorted(p.name for p in tmp.iterdir())
        clash = sorted(set(new) & set(foreign))
        if clash:
            raise OutputExistsError(
                f"{out}: would replace {', '.join(clash)}, which this command did not write; move it away first"
            )
        os.chmod(tmp, mode)
        if not foreign:
            old = None
            if out.exists():  # ours only: move it aside, rename the new one in, drop the old
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
                os.replace(out, old / "x")
            os.replace(tmp, out)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            return out
        # beside foreign files: our previous entries go, the new ones come in, the marker last
        for name in sorted(_ours(out) - set(foreign)):
            victim = out / name
            if victim.is_dir() and not victim.is_symlink():
                shutil.rmtree(victim)
            elif victim.exists() or victim.is_symlink():
                victim.unlink()
        for name in new:
            if name != MARKER:
                os.replace(tmp / name, out / name)
        os.replace(tmp / MARKER, out / MARKER)
        shutil.rmtree(tmp, ignore_errors=True)
        return out
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
