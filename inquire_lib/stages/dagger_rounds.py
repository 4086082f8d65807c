"""Stage 1b, DAgger (`training.dagger`): its rounds, its equal-compute control and the table that
compares them on the held-out tasks."""

from __future__ import annotations

import io
import json
import random
import time

from PIL import Image

from ..data.benchmark import held_out_tasks
from ..evaluation import episodes
from ..profiles import Profile
from ..runs.paths import artifacts_dir, copy_dir_atomic
from ..training.dagger import Round, continue_sft, labelled_rollout, round_tasks
from ..training.sft import _run_sft
from .evaluate import evaluate_checkpoint_tasks
from .timed import timed


@timed("dagger")
def dagger(
    profile: Profile,
    start: str,
    name: str = "sft_dagger",
    rounds: int | None = None,
    steps: int | None = None,
    tasks_per_round: int | None = None,
    beta: float | None = None,
    callbacks=None,
) -> tuple[str, list]:
    """`rounds` rounds from checkpoint `start`; each rolls the current policy out greedily on a new
    block of training tasks, labels every visited state with the expert and continues SFT on the expert
    data plus all states so far. Round r's model is `artifacts/<p>/<name>/round<r>/final`. Returns the
    last round's path and one `Round` per round."""
    rounds = profile.dagger_rounds if rounds is None else rounds
    steps = profile.dagger_steps if steps is None else steps
    per_round = profile.dagger_tasks if tasks_per_round is None else tasks_per_round
    beta = profile.dagger_beta if beta is None else beta
    current, states, out = start, [], []
    for r in range(1, rounds + 1):
        t0 = time.time()
        labeller, played = labelled_rollout(profile, current, r, round_tasks(profile, r, per_round), beta)
        labelled = labeller.states
        states += labelled
        res = continue_sft(profile, current, states, artifacts_dir(profile) / name / f"round{r}", steps, callbacks)
        current = res.path
        out.append(
            Round(
                r,
                current,
                len(labelled),
                sum(s["_off_path"] for s in labelled),
                sum(e["success"] for e in played) / max(1, len(played)),
                time.time() - t0,
                examples=[x for x in labelled if x["_off_path"]],
            )
        )
    # the last round is the stage's one named checkpoint, like the other stages'
    return (str(copy_dir_atomic(current, artifacts_dir(profile) / name / "final")) if out else current), out


def dagger_examples(rounds: list, k: int = 3, seed: int = 0) -> list[dict]:
    """A few of the states the first round labelled off the expert's path (what DAgger adds to the
    data), with the expert's label; screenshots as PIL images."""
    off = rounds[0].examples if rounds else []
    picked = random.Random(seed).sample(off, min(k, len(off)))
    return [
        {
            "instruction": s["instruction"],
            "history": s["history"],
            "think": s["gold_think"],
            "action": json.loads(s["gold_action"]),
            "screenshot": Image.open(io.BytesIO(s["screenshot"]["bytes"])),
        }
        for s in picked
    ]


@timed("sft control")
def sft_control(profile: Profile, start: str, name: str = "sft_more", steps: int | None = None):
    """DAgger's equal-compute control: plain SFT from `start` on the expert's data only, for as many
    steps as all DAgger rounds together, at DAgger's learning rate. A gain of DAgger over this
    control is the data's, not the extra steps'."""
    steps = profile.dagger_rounds * profile.dagger_steps if steps is None else steps
    return _run_sft(
        profile,
        start=start,
        out_dir=artifacts_dir(profile) / name,
        inquiry_share=1.0,
        steps=steps,
        lr=profile.dagger_lr,
        warmup=max(1, steps // 20),
        resume=True,
    )


def dagger_table(profile: Profile, start: str, rounds: list, control: str, tasks: list | None = None, out_root=None):
    """Task-level SR per DAgger round beside round 0 (the start, plain SFT) and the equal-compute
    control, on the held-out tasks, with Wilson 95% intervals and the recovery metrics: episodes that
    entered a detour, and of those the share that still succeeded."""
    import pandas as pd

    tasks = tasks if tasks is not None else held_out_tasks(profile)
    runs = [("sft_full", 0, start)] + [(f"sft_dagger_r{r.index}", r.index, r.path) for r in rounds]
    runs.append(("sft_more", None, control))
    rows = []
    for name, index, path in runs:
        m = evaluate_checkpoint_tasks(profile, name, tasks, out_root, path=path)
        o = m["overall"]
        played = episodes.load_trajectories(profile, name, out_root)
        detoured = [e for e in played if e["detour"]]
        rows.append(
            {
                "checkpoint": name,
                "round": index,
                "sr": o["success_rate"]["value"],
                "sr_ci": f"{o['success_rate']['lo']:.2f}-{o['success_rate']['hi']:.2f}",
                "isr": o["isr"]["value"],
                "detour_rate": o["detour_rate"]["value"],
                "detoured": len(detoured),
                "detoured_success": sum(e["success"] for e in detoured),
                "unsafe_rate": o["unsafe_rate"]["value"],
                "needless_rate": o["needless_rate"]["value"],
            }
        )
    return pd.DataFrame(rows).set_index("checkpoint")
