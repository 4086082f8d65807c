"""When to ask, compared on one checkpoint: learned asking (the bias on its ask decision) against the
confidence-threshold asker, step level on the test split (`asking_curves`), then online on the held-out tasks
at the operating point each family chooses on the validation split (`compare_asking`, `evaluation.asking`)."""

from __future__ import annotations

from ..data.benchmark import held_out_tasks, test_records, validation_records
from ..evaluation import episodes
from ..evaluation.asking import compare_curves, task_row, verdict
from ..evaluation.confidence import asking_scores, confidence_curve, confidence_points, confidence_policy
from ..evaluation.metrics import asking_errors
from ..evaluation.operating_curve import asks, choose_point, curve_points, learned_policy, margin_curve
from ..profiles import EvalSettings, Profile
from ..runs.hardware import device_stamp
from ..runs.paths import run_dir, write_json_atomic
from ..training.checkpoints import ask_bias_of, available_checkpoints, checkpoint_path
from ..training.models import loaded
from .evaluate import evaluate_checkpoint
from .timed import timed

# the agents compared: both SFT inquirers and the GRPO stage from each
AGENTS: tuple[str, ...] = ("sft_weak", "sft_full", "grpo_weak", "grpo_full")
# the keys of a learned curve worth keeping in a notebook's metrics (its margins can be recomputed)
CURVE_KEYS = ("n", "n_inquiry", "fork_reached", "at_zero", "auc", "points")


def asker_names(agent: str) -> dict[str, str]:
    """The names an agent's two askers are played under online (their trajectories and task metrics)."""
    return {"learned": f"{agent}@learned", "confidence": f"{agent}@confidence"}


@timed("asking curves")
def asking_curves(
    profile: Profile, name: str, records: list[dict] | None = None, path: str | None = None, out_root=None, n_boot=1000
) -> dict:
    """Both families' curves of checkpoint `name` (or the folder `path`) on the test split (or `records`), from
    one HF pass (`evaluation.confidence.asking_scores`), compared, with the sentence read off them; written to
    the run's `metrics/asking_<name>.json`. The curves of `compare_asking` without its choice on validation and
    its online play, so the comparison can be had at the cost of one greedy pass."""
    records = records if records is not None else test_records(profile)
    with loaded(profile, path if path is not None else checkpoint_path(profile, name)) as m:
        curves = _curves(m.model, m.processor, name, records, profile, n_boot)
    out = {"agent": name, "profile": profile.name, "device": device_stamp(), **curves}
    write_json_atomic(run_dir(profile, out_root) / "metrics" / f"asking_{name}.json", out)
    return out


def _curves(model, processor, name: str, records: list[dict], profile: EvalSettings, n_boot: int) -> dict:
    """Both families' curves on `records` from one pass, compared, and the sentence read off them."""
    labels = [bool(r["inquiry_required"]) for r in records]
    scores, margins, raw = asking_scores(model, processor, records, profile)
    learned = margin_curve(margins, labels, n_boot=n_boot, seed=profile.seed)
    confidence = confidence_curve(scores, labels, asks(raw, profile), n_boot=n_boot, seed=profile.seed)
    compared = compare_curves(learned, confidence)
    return {"learned": learned, "confidence": confidence, "compared": compared, "verdict": verdict(name, compared)}


@timed("asking compared")
def compare_asking(
    profile: Profile,
    name: str,
    records: list[dict] | None = None,
    val_records: list[dict] | None = None,
    tasks: list | None = None,
    out_root=None,
    n_boot: int = 1000,
) -> dict:
    """Both families on checkpoint `name`: their curves and AUCs on the test split (`records`), the
    operating point each chooses on validation (`val_records`, the highest step ISR with at most
    `select_max_needless_steps` needless asks, `evaluation.operating_curve.choose_point`), and each played
    there online on `tasks`: SR, task ISR, needless episodes, unsafe, over-execution and over-soliciting."""
    records = records if records is not None else test_records(profile)
    val_records = val_records if val_records is not None else validation_records(profile)
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    limit = profile.select_max_needless_steps
    val_labels = [bool(r["inquiry_required"]) for r in val_records]
    path = checkpoint_path(profile, name)
    # greedy at bias 0 is the checkpoint's own step evaluation (read back when the run has it)
    greedy = evaluate_checkpoint(profile, name, records, out_root) if not ask_bias_of(path) else None
    with loaded(profile, path) as m:
        model, processor = m.model, m.processor
        curves = _curves(model, processor, name, records, profile, n_boot)
        learned, confidence = {**curves["learned"], "at_zero": _at_zero(greedy)}, curves["confidence"]
        # one pass gives both families' points on validation too (`evaluation.confidence.asking_scores`)
        val_scores, val_margins, val_raw = asking_scores(model, processor, val_records, profile)
        bias_point = choose_point(curve_points(val_margins, val_labels), limit)
        threshold_point = choose_point(confidence_points(val_scores, val_labels, asks(val_raw, profile)), limit)
        policies = {
            "learned": learned_policy(model, processor, profile, bias_point["bias"]),
            "confidence": confidence_policy(model, processor, profile, threshold_point["threshold"]),
        }
        played = {"learned": {"bias": bias_point["bias"]}, "confidence": {"threshold": threshold_point["threshold"]}}
        rows = []
        for asker, policy in policies.items():
            run = asker_names(name)[asker]
            metrics = episodes.evaluate_tasks(
                run, policy, tasks, profile, out_root, extra={"asker": asker, **played[asker]}
            )
            errors = asking_errors(episodes.load_trajectories(profile, run, out_root))
            rows.append({**task_row(asker, metrics, errors), "by_category": errors["by_category"]})
    return {
        "agent": name,
        "learned": {k: learned[k] for k in CURVE_KEYS},
        "confidence": {k: confidence[k] for k in ("score", "n", "n_inquiry", "acted_asks", "auc", "points")},
        "compared": curves["compared"],
        "verdict": curves["verdict"],
        "validation": {"max_needless": limit, "learned": bias_point, "confidence": threshold_point},
        "tasks": rows,
    }


def _at_zero(metrics: dict | None) -> dict:
    """The greedy point (bias 0) on the curve's axes, from the step evaluation's metrics."""
    rate = lambda key: (metrics or {}).get("overall", {}).get(key, {}).get("value")
    return {"isr": rate("inquiry_recall"), "needless": rate("needless_rate")}


def compare_agents(profile: Profile, names=AGENTS, out_root=None, n_boot: int = 1000) -> dict[str, dict]:
    """`compare_asking` for each of `names` that the run has trained (the others are skipped), on the same
    test steps, validation steps and held-out tasks."""
    have = set(available_checkpoints(profile))
    items = dict(records=test_records(profile), val_records=validation_records(profile), tasks=held_out_tasks(profile))
    return {
        name: compare_asking(profile, name, **items, out_root=out_root, n_boot=n_boot) for name in names if name in have
    }
