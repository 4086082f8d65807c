"""What the notebooks do, one call per step: named checkpoints, evaluation, figures, metrics files.

Checkpoints of a profile live in `artifacts/<profile>/<name>/final`; their evaluations and the
metrics JSON in `papermill_runs/<profile>/` (see `evaluate.py`); figures in `figures/<profile>/`.
"""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path

from .evaluation.steps import evaluate_model, evaluate_steps, reference_outputs, test_records
from .training.models import load_checkpoint
from .profiles import Profile, get_profile
from .runs import records
from .runs.notebooks import run_manifest
from .runs.records import ORDER, REFERENCES
from .runs.paths import artifacts_dir, eval_dir, figures_dir, metrics_dir, run_dir, write_json_atomic
from .training.train import base_agent



def checkpoint_path(profile: Profile, name: str) -> str | None:
    """Path of a named checkpoint: None for the untrained model, the cached base agent, or a stage output."""
    if name == "untrained":
        return None
    if name == "base_agent":
        return base_agent(profile)
    run = artifacts_dir(profile) / name
    if (run / "selected").exists():  # chosen on the validation split (`selection.py`)
        return str(run / "selected")
    path = run / "final"
    if not path.exists():
        raise FileNotFoundError(f"{path}: checkpoint {name!r} has not been trained for profile {profile.name!r}")
    return str(path)


def select_checkpoint(profile: Profile, name: str, start_name: str, out_root=None) -> dict:
    """Choose among the kept checkpoints of run `name` on the validation split (see `selection.py`);
    afterwards `checkpoint_path(profile, name)` is the chosen one."""
    from .training.selection import select_checkpoint as select
    return select(profile, name, checkpoint_path(profile, start_name), artifacts_dir(profile) / name, out_root)


def available_checkpoints(profile: Profile) -> list[str]:
    names = ["untrained"] + (["base_agent"] if profile.base_agent_steps > 0 else [])
    names += [n for n in ORDER[2:] if (artifacts_dir(profile) / n / "final").exists()]
    return names


def evaluate_checkpoint(profile: Profile, name: str, records: list[dict] | None = None, out_root=None) -> dict:
    """Load, evaluate step by step on the test split, free the model; returns the metrics."""
    records = records if records is not None else test_records(profile)
    model, processor = load_checkpoint(profile, checkpoint_path(profile, name))
    try:
        return evaluate_model(name, model, processor, profile, records, out_root=out_root)
    finally:
        del model
        gc.collect()


def evaluate_references(profile: Profile, records: list[dict] | None = None, out_root=None) -> list[dict]:
    records = records if records is not None else test_records(profile)
    return [evaluate_steps(name, records, profile, reference_outputs(name, records, profile, seed=profile.seed), out_root)
            for name in REFERENCES]


def load_metrics(profile: Profile, names=None, kind: str = "step", out_root=None) -> list[dict]:
    """Saved metrics of a run, in training order then references."""
    return records.load_metrics(run_dir(profile, out_root), kind, names)


def load_predictions(profile: Profile, name: str, out_root=None) -> list[dict]:
    path = run_dir(profile.name, out_root) / "eval" / name / "step_predictions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def save_fig(fig, profile: Profile, name: str) -> dict:
    """HTML always (sharing one plotly.min.js per folder), PNG where a Chrome exists and the profile
    asks for it (the smoke profile does not: CI time)."""
    from .viz.overlays import save_figure
    return save_figure(fig, figures_dir(profile) / name, png=profile.export_png, shared_js=True)


def write_notebook_metrics(profile: Profile, name: str, payload: dict, out_root=None) -> Path:
    """metrics/<name>.json stamped with the run manifest (git sha, profile, versions)."""
    body = {"notebook": name, "written": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload,
            "manifest": run_manifest(profile)}
    return write_json_atomic(run_dir(profile.name, out_root) / "metrics" / f"{name}.json", body)


def profile_of(name: str, seed: int | None = None) -> Profile:
    """The notebook's profile (with its SEED); also fixes torch's thread count for the kernel."""
    import torch

    profile = get_profile(name)
    torch.set_num_threads(profile.torch_threads)
    return profile if seed is None or seed == profile.seed else profile.replace(seed=seed)


# ------------------------------------------------------------------------------------ ablations
# variant -> (stage, profile overrides). SFT variants start from the base agent, GRPO variants from
# sft_weak; every variant of a stage gets the same budget, so each differs from its stage's
# baseline in one switch only.
ABLATIONS: dict[str, tuple[str, dict]] = {
    "sft_baseline": ("sft", {}),
    "sft_no_a11y": ("sft", {"use_a11y": False}),
    "sft_no_think": ("sft", {"use_think": False}),
    "grpo_shaped": ("grpo", {}),
    "grpo_papers_reward": ("grpo", {"missed_penalty": 0.0, "needless_penalty": 0.0}),
}


def run_ablation(profile: Profile, variant: str, train_seed: int = 0, records: list[dict] | None = None,
                 out_root=None) -> dict:
    """Train one variant with the profile's ablation budget, evaluate it step by step, return its
    metrics (also written as metrics/step_abl_<variant>_s<seed>.json)."""
    from .training.train import grpo, sft

    stage, overrides = ABLATIONS[variant]
    vp = profile.replace(train_seed=train_seed, **overrides)
    name = f"abl_{variant}_s{train_seed}"
    if stage == "sft":
        res = sft(vp, name=name, inquiry_fraction=1.0, max_steps=profile.ablation_sft_steps)
    else:
        res = grpo(vp, start=checkpoint_path(profile, "sft_weak"), name=name, max_steps=profile.ablation_grpo_steps)
    records = records if records is not None else test_records(vp)
    model, processor = load_checkpoint(vp, res.path)
    try:
        metrics = evaluate_model(name, model, processor, vp, records, out_root=out_root)
    finally:
        del model
        gc.collect()
    metrics.update(variant=variant, stage=stage, train_seed=train_seed, overrides=overrides, train_seconds=res.seconds)
    write_json_atomic(run_dir(profile.name, out_root) / "metrics" / f"step_{name}.json", metrics)
    return metrics


def ablation_summary(profile: Profile, keys=("format", "type_accuracy", "step_accuracy", "inquiry_recall",
                                             "needless_rate"), out_root=None):
    """One row per (variant, seed) and a mean/std over seeds per variant."""
    import pandas as pd

    rows = []
    for path in sorted((run_dir(profile.name, out_root) / "metrics").glob("step_abl_*.json")):
        m = json.loads(path.read_text())
        rows.append({"variant": m["variant"], "seed": m["train_seed"],
                     **{k: m["overall"][k]["value"] for k in keys},
                     **{f"{k}_ci": (m["overall"][k]["lo"], m["overall"][k]["hi"]) for k in keys}})
    per_seed = pd.DataFrame(rows)
    if per_seed.empty:
        return per_seed, per_seed
    agg = per_seed.groupby("variant")[list(keys)].agg(["mean", "std", "count"])
    return per_seed, agg
