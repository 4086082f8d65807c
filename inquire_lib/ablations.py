"""Ablations: one switch at a time against the recipe it belongs to, several training
seeds, each point measured at step level (test split) and task level (held-out tasks, online), and
the effect of each switch as a difference from its reference with an interval over seeds and items
(`evaluation.effects`).

A point is (variant, training seed): `run_point` trains it with the profile's ablation budget and
evaluates it; the ablations notebook runs one papermill execution of `notebooks/ablations/ablation_point.ipynb`
per point (`runs.notebooks.sweep`, which reuses finished points and runs `parallel_runs` points at
once, the points of one `lane` in order). Groups and their references:

- `sft` (reference `sft_baseline`: SFT with every inquiry, `ablation_sft_steps` from the base
  agent): no accessibility list, no pre-action reasoning, no previous screenshot, and the other
  ways to train the weights (LoRA, QLoRA, full) than the profile's own;
- `grpo` (reference `grpo_shaped`: `ablation_grpo_steps` of action-level GRPO from the run's
  sft_weak): the papers' reward (inquiry penalties 0) instead of the inquiry-shaped one;
- `dagger` (reference `dagger_off`): from `chain_sft`, DAgger's rounds (`dagger_on`) against plain
  SFT for as many steps on the expert's data (`dagger_off`), so a difference is the data's;
- `chain` (reference `chain_task`, the whole recipe): SFT only (`chain_sft`), + action-level GRPO
  (`chain_grpo`), + task-level GRPO (`chain_task`), each started from the previous one of its seed.
A variant whose switch is already the profile's setting, or that the profile cannot express, is
skipped with the reason (`skip_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import stages
from .data.benchmark import test_records
from .evaluation.effects import effect, item_outcomes
from .profiles import ABLATION_GRIDS, Named, Profile
from .runs.integrity import finished_output
from .runs.paths import artifacts_dir, run_dir
from .runs.records import read_jsonl
from .training.checkpoints import checkpoint_path
from .training.sft import stage_inquiry_share
from .training.task_grpo import grpo_task


@dataclass(frozen=True)
class Variant:
    name: str
    group: str
    reference: str  # the variant it is measured against (itself for a reference)
    question: str
    overrides: dict = field(default_factory=dict)
    # an sft point's data: the recipe stage whose share of inquiry steps it keeps (`training.sft.stage_inquiry_share`)
    stage: str = "sft_full"


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("sft_baseline", "sft", "sft_baseline", "the full SFT recipe"),
        Variant(
            "sft_no_a11y", "sft", "sft_baseline", "without the accessibility list (pixels only)", {"use_a11y": False}
        ),
        Variant("sft_no_think", "sft", "sft_baseline", "without pre-action reasoning", {"use_think": False}),
        Variant(
            "sft_weak_share",
            "sft",
            "sft_baseline",
            "with the weak inquirer's share of the inquiry steps (`weak_inquiry_share`)",
            stage="sft_weak",
        ),
        Variant(
            "sft_no_prev_screenshot",
            "sft",
            "sft_baseline",
            "without the previous screenshot",
            {"use_prev_screenshot": False},
        ),
        Variant(
            "sft_full_weights",
            "sft",
            "sft_baseline",
            "full fine-tuning instead",
            {"lora": False, "load_in_4bit": False},
        ),
        Variant(
            "sft_lora",
            "sft",
            "sft_baseline",
            "LoRA on full-precision weights instead",
            {"lora": True, "load_in_4bit": False},
        ),
        Variant(
            "sft_qlora",
            "sft",
            "sft_baseline",
            "QLoRA (LoRA on 4-bit weights) instead",
            {"lora": True, "load_in_4bit": True},
        ),
        Variant("grpo_shaped", "grpo", "grpo_shaped", "action-level GRPO with the inquiry-shaped reward"),
        Variant(
            "grpo_papers_reward",
            "grpo",
            "grpo_shaped",
            "the papers' reward (inquiry penalties 0)",
            {"missed_penalty": 0.0, "needless_penalty": 0.0, "reward_funcs": ("format", "action", "inquiry")},
        ),
        Variant("dagger_off", "dagger", "dagger_off", "equal-compute SFT on the expert's data only"),
        Variant("dagger_on", "dagger", "dagger_off", "with DAgger's relabelled on-policy states"),
        Variant("chain_sft", "chain", "chain_task", "SFT only"),
        Variant("chain_grpo", "chain", "chain_task", "SFT + action-level GRPO"),
        Variant("chain_task", "chain", "chain_task", "SFT + action-level GRPO + task-level GRPO (the full recipe)"),
    )
}
# the order points run in: a DAgger or chain point starts from `chain_sft` of its seed (`_earlier`), so
# chain_sft comes first and is trained once
RUN_ORDER = tuple(v for v in VARIANTS if VARIANTS[v].group in ("sft", "grpo")) + (
    "chain_sft",
    "dagger_off",
    "dagger_on",
    "chain_grpo",
    "chain_task",
)
# the rates compared, step level and task level
STEP_KEYS = ("step_accuracy", "inquiry_recall", "needless_rate", "safe_step_accuracy")
TASK_KEYS = ("success_rate", "isr", "needless_rate", "unsafe_rate")


def skip_reason(profile: Profile, name: str) -> str | None:
    """Why this profile does not run variant `name` (None: it runs)."""
    v = VARIANTS[name]
    grid = ABLATION_GRIDS.get(profile.name)
    if grid is not None and name not in grid:
        return f"outside the {profile.name} profile's grid ({', '.join(grid)}; `profiles.ABLATION_GRIDS`): cpu runs it"
    if v.name == v.reference or not v.overrides:
        return None
    if v.overrides.get("use_prev_screenshot") is False and not profile.use_prev_screenshot:
        return "the profile shows no previous screenshot"
    if all(getattr(profile, k) == val for k, val in v.overrides.items()):
        return f"the profile already trains this way ({', '.join(f'{k}={val}' for k, val in v.overrides.items())})"
    return None


def lane(point: dict) -> str:
    """The sweep lane of a grid point {"VARIANT", "TRAIN_SEED", ...}: a DAgger or chain point starts from
    `chain_sft` of its seed (and `chain_task` from `chain_grpo`), so those of one seed run in order in one
    lane; every other point starts from a checkpoint made before the sweep and is a lane of its own."""
    v = VARIANTS[point["VARIANT"]]
    if v.group in ("dagger", "chain"):
        return f"chain seed {point['TRAIN_SEED']}"
    return f"{v.name} seed {point['TRAIN_SEED']}"


def point_name(variant: str, train_seed: int) -> str:
    return f"abl_{variant}_s{train_seed}"


def is_stage(profile: Profile, v: Variant, train_seed: int) -> bool:
    """Whether an sft point is its recipe stage itself (`Variant.stage`, trained by the SFT notebook or shipped): no
    switch of its own, the stage's budget and the first training seed."""
    return v.group == "sft" and not v.overrides and train_seed == 0 and profile.ablation_sft_steps == profile.sft_steps


def _train(profile: Profile, v: Variant, train_seed: int, start: str | None = None) -> str:
    """Train the point's checkpoint with the profile's ablation budget; returns its path. An SFT point starts
    from `start` (the run's base agent: a switch of stage 1 is ablated on the stage 0 the run has)."""
    name = point_name(v.name, train_seed)
    if v.group == "sft" or v.name == "chain_sft":
        share = stage_inquiry_share(profile, v.stage)
        return stages.sft(
            profile, name=name, inquiry_share=share, max_steps=profile.ablation_sft_steps, start=start
        ).path
    if v.group == "grpo":
        return stages.grpo(
            profile, start=checkpoint_path(profile, "sft_weak"), name=name, max_steps=profile.ablation_grpo_steps
        ).path
    chain_sft = _earlier(profile, "chain_sft", train_seed)
    if v.name == "dagger_on":
        return stages.dagger(profile, chain_sft, name=name)[0]
    if v.name == "dagger_off":
        return stages.sft_control(profile, chain_sft, name=name).path
    if v.name == "chain_grpo":
        return stages.grpo(profile, start=chain_sft, name=name, max_steps=profile.ablation_grpo_steps).path
    if v.name == "chain_task":
        return grpo_task(profile, start=_earlier(profile, "chain_grpo", train_seed), name=name).path
    raise KeyError(v.name)


def _earlier(profile: Profile, variant: str, train_seed: int) -> str:
    """The final checkpoint of an earlier point of this seed, trained now if it is not there yet."""
    final = artifacts_dir(profile) / point_name(variant, train_seed) / "final"
    if finished_output(final):
        return str(final)
    return _train(profile.replace(train_seed=train_seed), VARIANTS[variant], train_seed)


def run_point(profile: Profile, variant: str, train_seed: int = 0, out_root=None) -> dict:
    """Train one point and evaluate it at step and task level (`stages.evaluate_checkpoint` and
    `stages.evaluate_checkpoint_tasks`: an evaluation with the same key is read back); writes
    `metrics/step_<point>.json` (with the point's variant, group, seed and overrides) and
    `metrics/task_<point>.json` (the point's name is `abl_<variant>_s<seed>`) and returns
    {"variant", "seed", "skipped", "step": headline, "task": headline}."""
    if variant not in VARIANTS:
        raise KeyError(f"unknown ablation variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    v = VARIANTS[variant]
    reason = skip_reason(profile, variant)
    if reason:
        return {"variant": variant, "seed": train_seed, "skipped": reason}
    vp = profile.replace(train_seed=train_seed, **v.overrides)
    name = point_name(variant, train_seed)
    if is_stage(profile, v, train_seed):  # the stage the run has, under its own name: never trained twice
        path = stages.sft(profile, name=v.stage).path
    else:
        path = _train(vp, v, train_seed, start=stages.base_agent(profile))
    step = stages.evaluate_checkpoint(
        vp,
        name,
        test_records(vp),
        out_root,
        path=path,
        extra={"variant": variant, "group": v.group, "train_seed": train_seed, "overrides": v.overrides},
    )
    played = stages.scored_names(profile, [name], level="task")  # online only where the profile plays it
    task = stages.evaluate_checkpoint_tasks(vp, name, out_root=out_root, path=path) if played else None
    return {
        "variant": variant,
        "seed": train_seed,
        "skipped": None,
        "step": {k: step["overall"][k]["value"] for k in STEP_KEYS},
        "task": {k: task["overall"][k]["value"] for k in TASK_KEYS} if task else None,
    }


def _items(profile: Named, name: str, kind: str, out_root) -> list[dict] | None:
    """A point's step predictions or episodes as written by its evaluation; None when it has none."""
    path = (
        run_dir(profile.name, out_root)
        / "eval"
        / name
        / ("step_predictions.jsonl" if kind == "step" else "trajectories.jsonl")
    )
    return [rec for _, rec in read_jsonl(path)] if path.exists() else None


def effects_table(profile: Named, variants, seeds, out_root=None, n_boot: int = 2000):
    """One row per (variant, rate) for every variant that is not a reference: the variant's mean rate,
    its reference's, the difference with its 95% interval over seeds and items, and whether the
    interval excludes 0. Points missing on disk are left out of their row's seeds (`n_seeds` says
    how many counted). Returns a pandas DataFrame."""
    import pandas as pd

    loaded: dict[tuple[str, str], list[dict] | None] = {}

    def items(name: str, seed: int, kind: str) -> list[dict] | None:  # each point's file read once
        key = (point_name(name, seed), kind)
        if key not in loaded:
            loaded[key] = _items(profile, key[0], kind, out_root)
        return loaded[key]

    def mean(d: dict) -> float | None:
        return (sum(sum(x.values()) / len(x) for x in d.values() if x) / len(d)) if d else None

    rows = []
    for name in variants:
        v = VARIANTS[name]
        if v.reference == name or v.reference not in variants:
            continue
        for kind, keys in (("step", STEP_KEYS), ("task", TASK_KEYS)):
            for rate in keys:
                mine, ref = {}, {}
                for s in seeds:
                    a, b = items(name, s, kind), items(v.reference, s, kind)
                    if a is not None and b is not None:
                        mine[s], ref[s] = item_outcomes(a, rate, kind), item_outcomes(b, rate, kind)
                e = effect(mine, ref, n_boot=n_boot)
                rows.append(
                    {
                        "variant": name,
                        "reference": v.reference,
                        "question": v.question,
                        "level": kind,
                        "rate": rate,
                        "variant_rate": mean(mine),
                        "reference_rate": mean(ref),
                        "effect": e["diff"],
                        "lo": e["lo"],
                        "hi": e["hi"],
                        "excludes_zero": e["excludes_zero"],
                        "n_seeds": e["n_seeds"],
                        "n_items": e["n_items"],
                    }
                )
    return pd.DataFrame(rows)


def missing_points(results: list[dict]) -> list[str]:
    """The sweep points that did not finish (`runs.notebooks.sweep` records), as `variant seed (status)`."""
    out = []
    for r in results:
        if r["status"] not in ("ok", "reused"):
            p = r["parameters"]
            out.append(f"{p.get('VARIANT')} seed {p.get('TRAIN_SEED')} ({r['status']})")
    return out
