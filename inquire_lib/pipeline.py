"""The notebooks' one front door: every notebook imports this module and nothing else of the library.

It hands on the stages a notebook runs (`stages`: train a stage, evaluate a named checkpoint, DAgger's
rounds, a GRPO stage over seeds; each one call) and holds only what a notebook does around them: its
profile (`profile_of`), its figures (`show_fig`), its metrics file and the saved metrics it
reads back. It also hands on the modules a notebook draws from:

| name            | module                     | used by notebooks |
|-----------------|----------------------------|-------------------|
| `explore`       | `viz.explore`              | 01                |
| `glossary`      | `viz.glossary`             | 01                |
| `plots`         | `viz.plots`                | 02-05, 07         |
| `viz`           | `viz.overlays`             | 06                |
| `inspector`     | `viz.inspector`            | 06                |
| `report`        | `viz.report`               | 06                |
| `episodes`      | `evaluation.episodes`      | 04, 05            |
| `task_grpo`     | `training.task_grpo`       | 04                |
| `ablations`     | `ablations`                | 07, ablation_point |

Checkpoints of a profile live in `artifacts/<profile>/<name>/`; evaluations and metrics in the run
folder `papermill_runs/<profile>/`; figures in `figures/<profile>/` (see `runs.paths`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from . import ablations
from .data import benchmark as data
from .data.benchmark import held_out_tasks, test_records
from .evaluation import episodes
from .evaluation import pooled, seeds
from .profiles import Named, Profile, get_profile
from .runs import records as _records
from .runs.notebooks import run_manifest, sweep
from .runs.paths import NOTEBOOKS_DIR, eval_dir, figures_dir, run_dir, write_json_atomic
from .runs.records import REFERENCES, headline
from .stages import (
    compare_agents,
    base_agent,
    dagger,
    dagger_examples,
    dagger_table,
    evaluate_all_tasks,
    evaluate_checkpoint,
    evaluate_checkpoint_tasks,
    evaluate_references,
    grpo,
    grpo_seeds,
    operating_curves,
    scored_names,
    select_checkpoint,
    sft,
    sft_control,
    short_run,
)
from .training import task_grpo
from .training.checkpoints import available_checkpoints, checkpoint_path
from .training.configs import GRPO_SETTINGS
from .training.shipped_stages import provenance
from .viz import closing, explore, glossary, inspector, plots, report
from .viz import overlays as viz

__all__ = [  # what the notebooks use
    "data",
    "held_out_tasks",
    "test_records",
    "episodes",
    "headline",
    "REFERENCES",
    "sweep",
    "NOTEBOOKS_DIR",
    "eval_dir",
    "figures_dir",
    "run_dir",
    "task_grpo",
    "available_checkpoints",
    "checkpoint_path",
    "grpo",
    "base_agent",
    "sft",
    "explore",
    "glossary",
    "inspector",
    "plots",
    "report",
    "viz",
    "profile_of",
    "write_notebook_metrics",
    "grpo_settings",
    "select_checkpoint",
    "evaluate_checkpoint",
    "evaluate_references",
    "evaluate_checkpoint_tasks",
    "evaluate_all_tasks",
    "load_metrics",
    "load_task_metrics",
    "load_predictions",
    "ablations",
    "grpo_seeds",
    "seeds",
    "pooled",
    "closing",
    "dagger",
    "dagger_examples",
    "dagger_table",
    "sft_control",
    "operating_curves",
    "show_fig",
    "compare_agents",
    "provenance",
    "short_run",
    "scored_names",
]


def load_metrics(profile: Named, names=None, kind: str = "step", out_root=None) -> list[dict]:
    """Saved metrics of a run, in training order then references."""
    return _records.load_metrics(run_dir(profile, out_root), kind, names)


def load_task_metrics(profile: Named, names=None, out_root=None) -> list[dict]:
    """Saved task-level metrics of a run, in training order then references."""
    return load_metrics(profile, names, kind="task", out_root=out_root)


def load_predictions(profile: Named, name: str, out_root=None) -> list[dict]:
    path = run_dir(profile.name, out_root) / "eval" / name / "step_predictions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _save_fig(fig, profile: Profile, name: str) -> dict:
    """HTML always (sharing one plotly.min.js per folder), PNG where a Chrome exists and the profile
    asks for it (the smoke profile does not: CI time)."""
    return viz.save_figure(fig, figures_dir(profile) / name, png=profile.export_png, shared_js=True)


def show_fig(fig, profile: Profile, name: str, into: dict | None = None) -> None:
    """Save the figure (`_save_fig`) and display it both ways: interactive in JupyterLab, and as the
    PNG just written, so an executed notebook opened outside Jupyter shows it too. `into[name]`
    receives the written paths when given."""
    from IPython.display import display

    paths = _save_fig(fig, profile, name)
    if into is not None:
        into[name] = paths
    display(viz.figure_bundle(fig, paths["png"]), raw=True)


def write_notebook_metrics(profile: Profile, notebook: str, payload: dict, out_root=None) -> Path:
    """`metrics/<notebook>.json` (named after the notebook, e.g. "02_sft_qlora"), stamped with the
    run manifest (git sha, profile settings, seed, package versions)."""
    body = {
        "notebook": notebook,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **payload,
        "manifest": run_manifest(profile),
    }
    return write_json_atomic(_records.notebook_metrics_file(run_dir(profile, out_root), notebook), body)


def grpo_settings(profile: Profile) -> dict:
    """The profile's settings that shape stage 2 (`training.configs.GRPO_SETTINGS`), by name."""
    return {k: getattr(profile, k) for k in GRPO_SETTINGS}


def profile_of(name: str, seed: int | None = None, overrides: dict | None = None, quiet: bool = False) -> Profile:
    """The notebook's profile with its SEED and OVERRIDES (checked: an unknown or ill-typed field
    raises OverrideError naming it and the valid ones); fixes torch's thread count for the kernel and
    prints one line naming the run, the overrides and what this profile can and cannot show."""
    import torch

    from .profiles import PURPOSES, apply_overrides
    from .runs.paths import run_name, run_named_by_overrides

    profile = get_profile(name)
    if seed is not None and seed != profile.seed:
        profile = profile.replace(seed=seed)
    profile = apply_overrides(profile, overrides)
    run_named_by_overrides(profile)  # opened by hand with overrides: never into the default run's folders
    torch.set_num_threads(profile.torch_threads)
    if not quiet:
        changed = ", ".join(f"{k}={v!r}" for k, v in profile.overrides) or "none"
        print(
            f"profile {profile.name} (seed {profile.seed}), run {run_name()!r}, overrides: {changed}. "
            f"{PURPOSES.get(profile.name, '')}".rstrip()
        )
    return profile
