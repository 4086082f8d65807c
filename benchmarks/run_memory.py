"""Peak resident memory of a finished run, stage by stage: what each training, install and evaluation call of the
run held at most (its kernel's VmHWM during that call, `stages.timed`), and a child process's peak where one set a
new one (the OpenVINO exporter), with the run's largest. Reads the run's manifest; runs nothing.

    .venv/bin/python benchmarks/run_memory.py [--run papermill_runs/quick/default] [--out FILE]

The run is the default profile's `make run`; the result goes to benchmarks/results/run_memory.<cpu kind>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import RESULTS, ROOT, finish

from inquire_lib.profiles import get_profile
from inquire_lib.runs.hardware import cpu_kind


def stage_peaks(manifest: dict) -> list[dict]:
    """One row per timed stage of the run's notebooks: notebook, stage, checkpoint, seconds and peaks in MB."""
    rows = []
    for nb in manifest.get("notebooks", []):
        for st in nb.get("stages", []):
            row = {"notebook": nb["name"], "stage": st["stage"], "name": st.get("name"), "seconds": st["seconds"]}
            row |= {k: st[k] for k in ("peak_rss_mb", "child_peak_rss_mb", "reused") if k in st}
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=str(ROOT / "papermill_runs" / "quick" / "default"), help="a finished run folder")
    ap.add_argument("--out", default=None, help="default: benchmarks/results/run_memory.<cpu kind>.json")
    args = ap.parse_args(argv)
    path = Path(args.run) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{path}: no readable run manifest ({exc}); run `make run` first", file=sys.stderr)
        return 1
    rows = stage_peaks(manifest)
    measured = [r for r in rows if r.get("peak_rss_mb") is not None]
    if not measured:
        print(f"{path}: no stage of this run recorded its peak memory (a run of older code)", file=sys.stderr)
        return 1
    top = max(measured, key=lambda r: r["peak_rss_mb"])
    child = max((r.get("child_peak_rss_mb") or 0.0 for r in rows), default=0.0)
    result = {
        "benchmark": "run_memory",
        "what": "peak RSS of each stage of a finished run (MB): the notebook kernel's, and a child's where it set one",
        "run": str(Path(args.run).resolve().relative_to(ROOT))
        if Path(args.run).resolve().is_relative_to(ROOT)
        else args.run,
        "run_profile": manifest.get("profile"),
        "run_git_sha": manifest.get("git_sha"),
        "cpu_kind": cpu_kind(),
        "largest": {"peak_rss_mb": top["peak_rss_mb"], "stage": top["stage"], "name": top.get("name")},
        "largest_child_peak_rss_mb": child,
        "stages": rows,
    }
    out = Path(args.out) if args.out else RESULTS / f"run_memory.{cpu_kind()}.json"
    finish(result, get_profile(result["run_profile"] or "quick"), out)
    for r in rows:
        peak = r.get("peak_rss_mb")
        print(
            f"{r['notebook']:<28} {r['stage']:<22} {str(r.get('name')):<16} {peak if peak is not None else '-':>9} MB"
        )
    print(f"largest: {top['peak_rss_mb']:.0f} MB ({top['stage']} {top.get('name')}); child processes: {child:.0f} MB")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
