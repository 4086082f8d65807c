"""Stage 1's learning curve of asking: every complete checkpoint of an SFT run scored on the validation
split (or, to confirm a chosen point, the test split) by the cheap fork margin (`evaluation.fork_curve`), in
the order the run saved them.

Each point is cached beside the curve under its checkpoint's content digest, so a curve read again after
more checkpoints were saved scores only the new ones, and a checkpoint that changed is scored anew.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..data.benchmark import test_records, validation_records
from ..evaluation.fork_curve import METRIC, curve_point, fork_margins, fork_records
from ..profiles import Profile
from ..runs.hardware import device_stamp
from ..runs.integrity import complete_checkpoints, content_digest
from ..runs.paths import write_json_atomic
from ..training.models import loaded

# the files that make a point's model: an adapter checkpoint's, or the base agent's weights
_WEIGHTS = ("adapter_model.safetensors", "adapter_config.json", "model.safetensors", "config.json")


SPLITS = {"validation": validation_records, "test": test_records}


def learning_curve(
    profile: Profile,
    run: str | Path,
    base: str,
    out: str | Path,
    max_needless: float = 0.05,
    steps=None,
    split: str = "validation",
) -> dict:
    """The curve of the SFT run folder `run` (its `checkpoint-N` folders, adapters on `base`), written
    atomically to `out` after every point; returns it. A point: the step, the examples seen, the fork's AUC
    (bootstrap 95%) and step ISR at needless <= `max_needless` (Wilson 95%), and the seconds it took.
    `steps`: score only the checkpoints of these steps (and the start); points scored before are kept.
    `split`: validation chooses the recipe; test confirms the chosen point once, and is kept in its own file
    (a curve file of another split or metric is scored anew, never mixed in)."""
    out = Path(out)
    records = fork_records(SPLITS[split](profile))
    labels = [bool(r["inquiry_required"]) for r in records]
    old = json.loads(out.read_text()) if out.exists() else {}
    same = old.get("metric") == METRIC and old.get("split", "validation") == split
    done = {p["digest"]: p for p in old.get("points", [])} if same else {}
    curve = {
        "metric": METRIC,
        "run": str(run),
        "base": str(base),
        "split": split,
        "n": len(records),
        "n_inquiry": sum(labels),
        "device": device_stamp(),
        "points": [],
    }
    # the start (the base agent, nothing learned of asking yet), then every checkpoint
    for step, folder in [(0, Path(base)), *complete_checkpoints(run)]:
        digest = content_digest(folder, names=_WEIGHTS)
        if digest not in done and steps is not None and step and step not in steps:
            continue
        if digest not in done:
            t0 = time.time()
            with loaded(profile, str(folder), base=base) as m:
                margins = fork_margins(m.model, m.processor, records, profile)
            done[digest] = {
                "step": step,
                "examples": step * _examples_per_step(folder) if step else 0,
                "digest": digest,
                **curve_point(margins, labels, max_needless),
                "seconds": round(time.time() - t0, 1),
                "device": device_stamp(),  # a curve read again on another machine keeps each point's own
            }
        curve["points"].append(done[digest])
        write_json_atomic(out, curve)
    return curve


def _examples_per_step(checkpoint: Path) -> int:
    """The examples one optimizer step saw, from the trainer's own state and arguments."""
    import torch

    args = torch.load(checkpoint / "training_args.bin", weights_only=False)
    return args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)


def curve_table(curve: dict) -> str:
    """The curve as a Markdown table: the fork's AUC, the step ISR at the best threshold within the needless
    budget (read on this split), and what the model chooses with no threshold at all (points scored before
    that column existed leave it blank)."""
    rows = [
        "| step | examples | fork AUC (95%) | step ISR at needless <= 0.05 (95%) | needless "
        "| unbiased: step ISR (95%) | unbiased: needless (95%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in curve["points"]:
        a, i = p["auc"], p["isr"]
        u = p.get("unbiased")
        free = f"{_rate(u['isr'])} | {_rate(u['needless'])}" if u else " | "
        rows.append(
            f"| {p['step']} | {p['examples']} | {a['value']:.3f} ({a['lo']:.3f}-{a['hi']:.3f}) | "
            f"{_rate(i)} | {p['needless']:.3f} | {free} |"
        )
    return "\n".join(rows)


def _rate(w: dict) -> str:
    return f"{w['k']}/{w['n']} = {w['value']:.3f} ({w['lo']:.3f}-{w['hi']:.3f})"
