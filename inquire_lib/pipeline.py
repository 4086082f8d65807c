"""The notebooks' one front door: every notebook imports this module and nothing else of the library.

It holds the steps a notebook takes (one call each: train a stage, evaluate a named checkpoint,
save a figure, write the notebook's metrics file) and hands on the modules a notebook draws from:

| name            | module                     | used by notebooks |
|-----------------|----------------------------|-------------------|
| `explore`       | `viz.explore`              | 01                |
| `plots`         | `viz.plots`                | 02-05, 07         |
| `viz`           | `viz.overlays`             | 06                |
| `inspector`     | `viz.inspector`            | 06                |
| `report`        | `viz.report`               | 06                |
| `episodes`      | `evaluation.episodes`      | 04, 05            |
| `task_grpo`     | `training.task_grpo`       | 04                |

Checkpoints of a profile live in `artifacts/<profile>/<name>/`; evaluations and metrics in the run
folder `papermill_runs/<profile>/`; figures in `figures/<profile>/` (see `runs.paths`).
"""
from __future__ import annotations

import functools
import gc
import inspect
import json
import time
from pathlib import Path

from .data import benchmark as data
from .data.benchmark import held_out_tasks, test_records
from .evaluation import episodes
from .evaluation import seeds
from .evaluation.metrics import headline
from .evaluation.steps import evaluate_model, evaluate_steps, reference_outputs
from .profiles import Profile, get_profile
from .runs import readback, timing
from .runs import records as _records
from .runs.notebooks import run_manifest, sweep
from .runs.paths import NOTEBOOKS_DIR, artifacts_dir, copy_dir_atomic, eval_dir, figures_dir, metrics_dir, run_dir, write_json_atomic
from .runs.records import ORDER, REFERENCES
from .training import task_grpo
from .training.checkpoints import ask_bias_of, available_checkpoints, checkpoint_path
from .training.configs import GRPO_SETTINGS, train_seed
from .training.grpo import grpo as _grpo
from .training.grpo import model_digest
from .training.models import load_checkpoint
from .training.sft import base_agent as _base_agent
from .training.sft import sft as _sft
from .viz import closing, explore, inspector, plots, report
from .viz import overlays as viz

__all__ = [  # what the notebooks use
    "data", "held_out_tasks", "test_records", "episodes", "headline", "Profile", "ORDER", "REFERENCES", "sweep",
    "NOTEBOOKS_DIR", "artifacts_dir", "eval_dir", "figures_dir", "metrics_dir", "run_dir", "task_grpo",
    "available_checkpoints", "checkpoint_path", "GRPO_SETTINGS", "grpo", "base_agent", "sft", "explore", "inspector",
    "plots", "report", "viz", "profile_of", "save_fig", "write_notebook_metrics", "grpo_settings",
    "select_checkpoint", "evaluate_checkpoint", "evaluate_references", "evaluate_checkpoint_tasks",
    "evaluate_all_tasks", "load_metrics", "load_task_metrics", "load_predictions", "ablations", "seed_names",
    "grpo_seeds", "seeds", "closing",
]


def _timed(stage: str):
    """Record the wall time of each call in the run's timings (`runs.timing`), named after the
    call's checkpoint (its `name` or `variant` argument); an evaluation read back is marked as such."""
    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arg = bound.arguments
            label = next((arg[k] for k in ("name", "variant") if isinstance(arg.get(k), str)), None)
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            reused = isinstance(result, dict) and bool(result.get("read_back"))
            timing.record(run_dir(get_profile(arg["profile"]), arg.get("out_root")), stage, label,
                          time.perf_counter() - t0, **({"reused": True} if reused else {}))
            return result
        return inner
    return wrap


base_agent = _timed("base agent")(_base_agent)
sft = _timed("sft")(_sft)
grpo = _timed("grpo")(_grpo)


@_timed("select on validation")
def select_checkpoint(profile: Profile, name: str, start_name: str, out_root=None) -> dict:
    """Choose among the kept checkpoints of run `name` on the validation split (see `training.selection`);
    afterwards `checkpoint_path(profile, name)` is the chosen one."""
    from .training.selection import select_checkpoint as select

    return select(profile, name, checkpoint_path(profile, start_name), artifacts_dir(profile) / name, out_root)


@_timed("evaluate steps")
def evaluate_checkpoint(profile: Profile, name: str, records: list[dict] | None = None, out_root=None) -> dict:
    """Load, evaluate step by step on the test split, free the model; returns the metrics. An
    earlier evaluation of the same model on the same records and settings is read back
    (`runs.readback`), not rerun."""
    records = records if records is not None else test_records(profile)
    return _evaluate_once(profile, "step", name, checkpoint_path(profile, name), readback.records_digest(records),
                          out_root, lambda model, processor, extra, bias: evaluate_model(
                              name, model, processor, profile, records, out_root=out_root, extra=extra, ask_bias=bias))


def played_digest(path: str | None, profile: Profile, bias: float | None = None) -> str:
    """What an evaluation plays: the model's digest (`training.grpo.model_digest`), with the checkpoint's
    ask bias (`bias`, else read from the checkpoint) when it has one."""
    bias = ask_bias_of(path) if bias is None else bias
    return model_digest(path, profile) + (f"+ask_bias={bias!r}" if bias else "")


def _evaluate_once(profile: Profile, kind: str, name: str, path: str | None, items_digest: str, out_root,
                   evaluate) -> dict:
    """The stored metrics of an evaluation with the same key (`runs.readback`), marked read back;
    else load the model at `path`, run `evaluate(model, processor, extra, ask_bias)` with the checkpoint's
    ask bias (`training.checkpoints.ask_bias_of`) and free the model. The key holds that bias: the same
    weights played at another operating point differ."""
    bias = ask_bias_of(path)
    key = readback.eval_key(kind, played_digest(path, profile, bias), items_digest, profile)
    stored = readback.read_back(run_dir(profile, out_root), kind, name, key)
    if stored is not None:
        print(f"{name}: {kind} metrics read back (same model, items and settings)")
        return {**stored, "read_back": True}
    model, processor = load_checkpoint(profile, path)
    try:
        return evaluate(model, processor, {readback.KEY: key}, bias)
    finally:
        del model
        gc.collect()


@_timed("evaluate references")
def evaluate_references(profile: Profile, records: list[dict] | None = None, out_root=None) -> list[dict]:
    records = records if records is not None else test_records(profile)
    return [evaluate_steps(name, records, profile, reference_outputs(name, records, profile, seed=profile.seed), out_root)
            for name in REFERENCES]


@_timed("evaluate tasks")
def evaluate_checkpoint_tasks(profile: Profile, name: str, tasks: list | None = None, out_root=None,
                              path: str | None = None, progress: bool = False) -> dict:
    """Load a named checkpoint (or `path`), play the held-out tasks greedily (at the checkpoint's ask
    bias, `training.checkpoints.ask_bias_of`), free the model."""
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    path = path if path is not None else checkpoint_path(profile, name)
    return _evaluate_once(profile, "task", name, path, readback.tasks_digest(tasks), out_root,
                          lambda model, processor, extra, bias: episodes.evaluate_tasks(
                              name, episodes.model_policy(model, processor, profile, ask_bias=bias), tasks, profile, out_root,
                              extra=extra, progress=progress))


def evaluate_all_tasks(profile: Profile, names=("untrained", "sft_full", "grpo_full", "grpo_task"),
                       tasks: list | None = None, out_root=None, progress: bool = False) -> list[dict]:
    """Task-level metrics of the named checkpoints that exist (others are skipped), then of the
    reference policies, all on the same held-out tasks."""
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    have = set(available_checkpoints(profile))
    out = [evaluate_checkpoint_tasks(profile, n, tasks, out_root, progress=progress) for n in names if n in have]
    return out + episodes.evaluate_reference_tasks(profile, tasks, out_root)


@_timed("dagger")
def dagger(profile: Profile, start: str, name: str = "sft_dagger", rounds: int | None = None,
           steps: int | None = None, tasks_per_round: int | None = None, beta: float | None = None,
           callbacks=None) -> tuple[str, list]:
    """Stage 1b (see `training.dagger`): `rounds` rounds from checkpoint `start`; each rolls the current
    policy out greedily on a new block of training tasks, labels every visited state with the expert
    and continues SFT on the expert data plus all states so far. Round r's model is
    `artifacts/<p>/<name>/round<r>/final`. Returns the last round's path and one `Round` per round."""
    from .training.dagger import Round, continue_sft, labelled_rollout, round_tasks

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
        out.append(Round(r, current, len(labelled), sum(s["_off_path"] for s in labelled),
                         sum(e["success"] for e in played) / max(1, len(played)), time.time() - t0,
                         repeats_dropped=labeller.repeats_dropped, examples=[x for x in labelled if x["_off_path"]]))
    # the last round is the stage's one named checkpoint, like the other stages'
    return (str(copy_dir_atomic(current, artifacts_dir(profile) / name / "final")) if out else current), out


def dagger_examples(rounds: list, k: int = 3, seed: int = 0) -> list[dict]:
    """A few of the states the first round labelled off the expert's path (what DAgger adds to the
    data), with the expert's label; screenshots as PIL images."""
    import io as _io
    import random as _random

    from PIL import Image

    off = rounds[0].examples if rounds else []
    picked = _random.Random(seed).sample(off, min(k, len(off)))
    return [{"instruction": s["instruction"], "history": s["history"], "think": s["gold_think"],
             "action": json.loads(s["gold_action"]), "screenshot": Image.open(_io.BytesIO(s["screenshot"]["bytes"]))}
            for s in picked]


@_timed("sft control")
def sft_control(profile: Profile, start: str, name: str = "sft_more", steps: int | None = None):
    """DAgger's equal-compute control: plain SFT from `start` on the expert's data only, for as many
    steps as all DAgger rounds together, at DAgger's learning rate. A gain of DAgger over this
    control is the data's, not the extra steps'."""
    from .training.sft import _run_sft

    steps = profile.dagger_rounds * profile.dagger_steps if steps is None else steps
    return _run_sft(profile, start=start, out_dir=artifacts_dir(profile) / name, inquiry_fraction=1.0, steps=steps,
                    lr=profile.dagger_lr, warmup=max(1, steps // 20), resume=True)


def dagger_table(profile: Profile, start: str, rounds: list, control: str, tasks: list | None = None,
                 out_root=None):
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
        rows.append({"checkpoint": name, "round": index, "sr": o["success_rate"]["value"],
                     "sr_ci": f"{o['success_rate']['lo']:.2f}-{o['success_rate']['hi']:.2f}",
                     "isr": o["isr"]["value"], "detour_rate": o["detour_rate"]["value"],
                     "detoured": len(detoured), "detoured_success": sum(e["success"] for e in detoured),
                     "unsafe_rate": o["unsafe_rate"]["value"], "needless_rate": o["needless_rate"]["value"]})
    return pd.DataFrame(rows).set_index("checkpoint")


def seed_names(profile: Profile, name: str) -> list[str]:
    """A GRPO stage's checkpoints over `grpo_seeds` training seeds: `name` (the profile's own training seed,
    the checkpoint later notebooks use), then `<name>_s1`, `<name>_s2`, ..."""
    return [name] + [f"{name}_s{k}" for k in range(1, profile.grpo_seeds)]


def _seed_run(profile: Profile, start_name: str, name: str, offset: int, out_root) -> dict:
    """One extra seed of a GRPO stage: trained from `start_name` with the training seed + `offset`, chosen
    on validation, evaluated on the test split; its test step metrics."""
    seeded = profile.replace(train_seed=train_seed(profile) + offset)
    grpo(seeded, start=checkpoint_path(profile, start_name), name=name, reuse=True)
    select_checkpoint(seeded, name, start_name, out_root)
    return evaluate_checkpoint(seeded, name, out_root=out_root)


def grpo_seeds(profile: Profile, stages: dict[str, str], out_root=None) -> dict[str, list[dict]]:
    """The test step metrics of each GRPO stage in `stages` ({name: start name}, e.g. {"grpo_weak":
    "sft_weak"}) over `grpo_seeds` training seeds (`seed_names`). Seed 0 is the stage's own run, trained
    and chosen before; every other is trained, chosen on validation and evaluated here, a finished run with
    the same settings reused, `parallel_runs` at a time, each in a process of its own."""
    jobs = [(stage, start, name, k) for stage, start in stages.items()
            for k, name in enumerate(seed_names(profile, stage)) if k > 0]
    if profile.parallel_runs > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker, not a fork of a kernel that holds torch's threads
        with ProcessPoolExecutor(profile.parallel_runs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_seed_run, profile, start, name, k, out_root) for _, start, name, k in jobs]
            extra = [f.result() for f in futures]
    else:
        extra = [_seed_run(profile, start, name, k, out_root) for _, start, name, k in jobs]
    out = {stage: [evaluate_checkpoint(profile, stage, out_root=out_root)] for stage in stages}
    for (stage, *_), metrics in zip(jobs, extra):
        out[stage].append(metrics)
    return out


@_timed("operating curves")
def operating_curves(profile: Profile, names, records: list[dict] | None = None, verify_biases=(4.0,),
                     n_boot: int = 1000) -> dict[str, dict]:
    """The inquiry operating curve of each named checkpoint on the test split (see
    `evaluation.operating_curve`): one greedy pass that reads the ask margin at the fork, plus one
    pass per verifying bias."""
    from .evaluation.operating_curve import operating_curve

    records = records if records is not None else test_records(profile)
    out = {}
    for name in names:
        model, processor = load_checkpoint(profile, checkpoint_path(profile, name))
        try:
            out[name] = operating_curve(model, processor, records, profile, verify_biases=verify_biases,
                                        n_boot=n_boot, seed=profile.seed)
        finally:
            del model
            gc.collect()
    return out


def load_metrics(profile: Profile, names=None, kind: str = "step", out_root=None) -> list[dict]:
    """Saved metrics of a run, in training order then references."""
    return _records.load_metrics(run_dir(profile, out_root), kind, names)


def load_task_metrics(profile: Profile, names=None, out_root=None) -> list[dict]:
    """Saved task-level metrics of a run, in training order then references."""
    return load_metrics(profile, names, kind="task", out_root=out_root)


def load_predictions(profile: Profile, name: str, out_root=None) -> list[dict]:
    path = run_dir(profile.name, out_root) / "eval" / name / "step_predictions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def save_fig(fig, profile: Profile, name: str) -> dict:
    """HTML always (sharing one plotly.min.js per folder), PNG where a Chrome exists and the profile
    asks for it (the smoke profile does not: CI time)."""
    return viz.save_figure(fig, figures_dir(profile) / name, png=profile.export_png, shared_js=True)


def show_fig(fig, profile: Profile, name: str, into: dict | None = None) -> None:
    """Save the figure (`save_fig`) and display it both ways: interactive in JupyterLab, and as the
    PNG just written, so an executed notebook opened outside Jupyter shows it too. `into[name]`
    receives the written paths when given."""
    from IPython.display import display

    paths = save_fig(fig, profile, name)
    if into is not None:
        into[name] = paths
    display(viz.figure_bundle(fig, paths["png"]), raw=True)


def write_notebook_metrics(profile: Profile, notebook: str, payload: dict, out_root=None) -> Path:
    """`metrics/<notebook>.json` (named after the notebook, e.g. "02_sft_qlora"), stamped with the
    run manifest (git sha, profile settings, seed, package versions)."""
    body = {"notebook": notebook, "written": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload,
            "manifest": run_manifest(profile)}
    return write_json_atomic(_records.notebook_metrics_file(run_dir(profile, out_root), notebook), body)


def grpo_settings(profile: Profile) -> dict:
    """The profile's settings that shape stage 2 (`training.configs.GRPO_SETTINGS`), by name."""
    return {k: getattr(profile, k) for k in GRPO_SETTINGS}


def profile_of(name: str, seed: int | None = None, overrides: dict | None = None, quiet: bool = False) -> Profile:
    """The notebook's profile with its SEED and OVERRIDES (checked: an unknown or ill-typed field
    raises OverrideError naming it and the valid ones); fixes torch's thread count for the kernel and
    prints one line naming the run, the overrides and what this profile can and cannot show."""
    import os

    import torch

    from .profiles import PURPOSES, apply_overrides, default_run_name
    from .runs.paths import RUN_NAME, run_name

    profile = get_profile(name)
    if seed is not None and seed != profile.seed:
        profile = profile.replace(seed=seed)
    profile = apply_overrides(profile, overrides)
    if profile.overrides and not os.environ.get(RUN_NAME[0]):
        # opened by hand with overrides: write to the run those overrides name (as `inquire run` would),
        # never into the default run's folders
        os.environ[RUN_NAME[0]] = default_run_name(dict(profile.overrides))
    torch.set_num_threads(profile.torch_threads)
    if not quiet:
        changed = ", ".join(f"{k}={v!r}" for k, v in profile.overrides) or "none"
        print(f"profile {profile.name} (seed {profile.seed}), run {run_name()!r}, overrides: {changed}. "
              f"{PURPOSES.get(profile.name, '')}".rstrip())
    return profile


# last: the ablations drive the stages above (`ablations` imports this module)
from . import ablations  # noqa: E402
