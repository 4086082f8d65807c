"""Where a run's minutes go: each stage call of the front door (a training stage, an evaluation, a
checkpoint choice) appends one line to `<run>/timings.jsonl`; the notebook runner tags the lines
with the notebook that wrote them, keeps them in the manifest and prints the table at the end."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

FILE = "timings.jsonl"
STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Start this process's peak resident set (Linux's VmHWM) anew at its current size, so that the next
    `peak_rss_mb` is the peak of what ran since; False where the kernel offers no such reset."""
    try:
        CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> dict:
    """{"self": this process's peak RSS in MB since the last `reset_peak_rss` (None where /proc has no VmHWM),
    "children": the largest peak RSS of any child process it waited for, ever (the exporter, a seed worker)}."""
    own = None
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                own = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    children = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return {"self": own, "children": children}


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
            notes = ["read back"] if st.get("reused") else []
            if st.get("peak_rss_mb"):
                notes.append(f"peak {st['peak_rss_mb'] / 1024:.1f} GB")
            rows.append(("  " + label, _clock(st["seconds"]), ", ".join(notes)))
    rows.append(("total", _clock(total), ""))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b:>8}  {c}".rstrip() for a, b, c in rows)
