"""A run's results as Markdown tables, read from its files (nothing is evaluated again).

`inquire summary papermill_runs/cpu/default` prints what the README's results section quotes: the
step-level table (every `metrics/step_*.json`), the task-level table (every `metrics/task_*.json`)
and the wall time of each notebook (`manifest.json`), with the run's git sha and profile, so a table
in a document can always be traced back to the run that produced it.

Rates print as value with the Wilson 95% interval and the counts behind them, `0.45 (0.31-0.60) 18/40`;
a rate with no items prints as "-". Plain Python only.
"""

from __future__ import annotations

import json
from pathlib import Path

from .records import load_metrics, read_json

# (column title, metric key) of the step table; per gold action type after these
STEP_COLUMNS = (
    ("format", "format"),
    ("step acc", "step_accuracy"),
    ("click in bbox", "click_in_bbox"),
    ("step ISR", "inquiry_recall"),
    ("needless", "needless_rate"),
    ("safe-step acc", "safe_step_accuracy"),
    ("asks answered", "asks_answered"),
    ("UIQ", "uiq"),
)
ACTION_TYPES = ("open", "click", "type", "terminate")
TASK_COLUMNS = (
    ("SR", "success_rate"),
    ("ISR", "isr"),
    ("needless", "needless_rate"),
    ("unsafe", "unsafe_rate"),
    ("detour", "detour_rate"),
    ("succeeds after a detour", "detour_success_rate"),
    ("first open", "first_open_accuracy"),
    ("asks answered", "asks_answered"),
    ("UIQ", "uiq"),
)


def rate(m: dict | None, interval: bool = True) -> str:
    """`0.45 (0.31-0.60) 18/40`, or `18/40` without the interval; "-" for no items or no value. A ratio of
    pooled counts (UIQ: `evaluation.metrics.ratio_interval`) has no k and prints its items: `0.38 (0.34-0.42) n=160`."""
    if not isinstance(m, dict) or not m.get("n") or m.get("value") is None:
        return "-"
    counts = f"{m['k']}/{m['n']}" if "k" in m else f"n={m['n']}"
    if not interval:
        return counts
    return f"{m['value']:.2f} ({m['lo']:.2f}-{m['hi']:.2f}) {counts}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


ABLATION_PREFIX = "abl_"  # the ablation points (`ablations.point_name`): tables of their own there


def _chain(metrics: list[dict], ablations: bool) -> list[dict]:
    return [m for m in metrics if ablations or not str(m.get("checkpoint", "")).startswith(ABLATION_PREFIX)]


def step_markdown(run_dir: str | Path, ablations: bool = False, metrics: list[dict] | None = None) -> str:
    """One row per step-evaluated checkpoint (ablation points only with `ablations`): n, the
    `STEP_COLUMNS` rates, then right/total per gold action type. `metrics`: the run's, if already read."""
    rows = []
    for m in _chain(load_metrics(run_dir, "step") if metrics is None else metrics, ablations):
        o = m.get("overall", {})
        by = o.get("by_gold_action", {})
        rows.append(
            [m.get("checkpoint", "?"), str(o.get("n", "-"))]
            + [rate(o.get(k)) for _, k in STEP_COLUMNS]
            + [rate(by.get(a), interval=False) for a in ACTION_TYPES]
        )
    return _table(["checkpoint", "steps"] + [t for t, _ in STEP_COLUMNS] + list(ACTION_TYPES), rows)


def task_markdown(run_dir: str | Path, ablations: bool = False, metrics: list[dict] | None = None) -> str:
    """One row per task-evaluated checkpoint (ablation points only with `ablations`): tasks, the
    `TASK_COLUMNS` rates. `metrics`: the run's, if already read."""
    rows = []
    for m in _chain(load_metrics(run_dir, "task") if metrics is None else metrics, ablations):
        o = m.get("overall", {})
        rows.append([m.get("checkpoint", "?"), str(o.get("n", "-"))] + [rate(o.get(k)) for _, k in TASK_COLUMNS])
    return _table(["checkpoint", "tasks"] + [t for t, _ in TASK_COLUMNS], rows)


def time_markdown(run_dir: str | Path, manifest: dict | None = None) -> str:
    """Each notebook of the run's manifest (read here unless given) with its status and wall time in minutes."""
    manifest = _manifest(run_dir) if manifest is None else manifest
    rows = [
        [
            nb.get("name", "?"),
            nb.get("status", "?"),
            "-" if nb.get("duration_s") is None else f"{nb['duration_s'] / 60:.1f}",
        ]
        for nb in manifest.get("notebooks", [])
    ]
    total = sum(nb.get("duration_s") or 0 for nb in manifest.get("notebooks", []))
    rows.append(["total", "", f"{total / 60:.1f}"])
    return _table(["notebook", "status", "minutes"], rows)


def _manifest(run_dir: str | Path) -> dict:
    """The run's `manifest.json`; a folder only tools wrote to (`tools/base_agent_report.py`) has none, and
    then the newest manifest one of its metrics files carries stands in, so the header still names the
    profile and the git sha."""
    path = Path(run_dir) / "manifest.json"
    if path.exists():
        return read_json(path)
    reports = sorted((Path(run_dir) / "metrics").glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
    for report in reports:
        try:
            carried = json.loads(report.read_text()).get("manifest")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(carried, dict):
            return carried
    return {}


def summary(run_dir: str | Path, ablations: bool = False) -> str:
    """The run's header line (profile, run name, git sha) and its three tables, as Markdown; the
    ablation points are left out of the tables unless `ablations` (a line says how many)."""
    run_dir = Path(run_dir)
    if not (run_dir / "metrics").is_dir() and not (run_dir / "manifest.json").exists():
        raise FileNotFoundError(f"{run_dir}: not a run folder (no metrics/ and no manifest.json)")
    manifest = _manifest(run_dir)
    sha = (manifest.get("git_sha") or "?")[:12] + (" (dirty)" if manifest.get("git_dirty") else "")
    head = (
        f"Run `{manifest.get('run', run_dir.name)}`, profile `{manifest.get('profile', '?')}`, git {sha}, "
        f"finished {manifest.get('finished', '?')}"
    )
    step, task = load_metrics(run_dir, "step"), load_metrics(run_dir, "task")
    parts = [
        head,
        "Step level (held-out test steps, greedy; Wilson 95% CIs):",
        step_markdown(run_dir, ablations, step),
        "Task level (online in PhoneEnv, held-out tasks):",
        task_markdown(run_dir, ablations, task),
        "Wall time:",
        time_markdown(run_dir, manifest),
    ]
    hidden = {m["checkpoint"] for m in step + task if str(m.get("checkpoint", "")).startswith(ABLATION_PREFIX)}
    if hidden and not ablations:
        parts.insert(1, f"({len(hidden)} ablation points not shown: `--ablations` lists them)")
    return "\n\n".join(parts) + "\n"


# the task-level rates the generalisation table sets side by side (each with its interval)
GENERALISATION_COLUMNS = (
    ("SR", "success_rate"),
    ("ISR", "isr"),
    ("needless", "needless_rate"),
    ("unsafe", "unsafe_rate"),
)


def generalisation_markdown(in_distribution: str | Path, splits: dict[str, str | Path], names: list[str]) -> str:
    """One row per (checkpoint, split): the `GENERALISATION_COLUMNS` rates on the split's tasks, first on the
    in-distribution test tasks (the run `in_distribution`), then on each split (`splits`: split name -> run folder),
    with each rate's change from in distribution in points. The splits hold other tasks than the test split, so
    the change is of two independent samples, read against both intervals; a checkpoint a run has not played is
    left out."""
    by_run = {"test": in_distribution, **splits}
    found = {s: {m.get("checkpoint"): m for m in load_metrics(run, "task")} for s, run in by_run.items()}
    head = ["checkpoint", "split", "tasks"] + [t for t, _ in GENERALISATION_COLUMNS]
    rows = []
    for name in names:
        base = found["test"].get(name, {}).get("overall", {})
        for split in by_run:
            m = found[split].get(name)
            if m is None:
                continue
            o = m.get("overall", {})
            cells = []
            for _, key in GENERALISATION_COLUMNS:
                cell = rate(o.get(key))
                if split != "test" and _value(o.get(key)) is not None and _value(base.get(key)) is not None:
                    cell += f" ({100 * (_value(o[key]) - _value(base[key])):+.0f} pts)"
                cells.append(cell)
            rows.append([name, split, str(o.get("n", "-"))] + cells)
    return _table(head, rows)


def _value(m) -> float | None:
    return m.get("value") if isinstance(m, dict) and m.get("n") else None
