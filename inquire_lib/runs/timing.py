"""Where a run's minutes go: each stage call of the front door (a training stage, an evaluation, a
checkpoint choice) appends one line to `<run>/timings.jsonl`; the notebook runner tags the lines
with the notebook that wrote them, keeps them in the manifest and prints the table at the end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FILE = "timings.jsonl"


def record(run_dir: str | Path, stage: str, name: str | None, seconds: float, **extra) -> None:
    """Append one stage's wall time (a line of under 4 KiB: one write, whole, even beside a reader)."""
    path = Path(run_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"stage": stage, "name": name, "seconds": round(seconds, 2), "at": time.time(), **extra})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read(run_dir: str | Path) -> list[dict]:
    """Every complete line of the run's timings (a line cut short by a kill is skipped)."""
    path = Path(run_dir) / FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "stage" in rec and "seconds" in rec:
            out.append(rec)
    return out


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d}" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d}"


def table(notebooks: list[dict]) -> str:
    """Notebook wall times with each notebook's stages under it (entries as the runner keeps them:
    name, duration_s, status, stages), and the total."""
    rows = [("notebook / stage", "wall", "")]
    total = 0.0
    for nb in notebooks:
        if nb.get("duration_s") is None:
            continue
        total += nb["duration_s"]
        rows.append((nb["name"], _clock(nb["duration_s"]), nb.get("status") or ""))
        for st in nb.get("stages", []):
            label = st["stage"] + (f" {st['name']}" if st.get("name") else "")
            rows.append(("  " + label, _clock(st["seconds"]), "read back" if st.get("reused") else ""))
    rows.append(("total", _clock(total), ""))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b:>8}  {c}".rstrip() for a, b, c in rows)
