"""Choosing a GRPO checkpoint on the validation split.

A GRPO run of the tiny model wanders: step ISR rises, stalls and falls again while safe-step accuracy
drifts, and where it ends after a fixed number of steps is partly luck. So every `grpo_save_steps`
steps a checkpoint is kept, each is evaluated on the validation split (tasks drawn like the test
split's, never the test split itself), and the one kept as `<name>/selected` is the highest
validation step ISR among those that keep the needless-inquiry rate at most `select_max_needless_steps`
and safe-step accuracy at most `select_max_safe_drop` below the starting checkpoint's. When none
qualifies, the last checkpoint is kept and the record says so.

The step-level split sees only screens on the expert's path, while an agent that strays (a wrong
click, a wrong app) meets screens it never does, and GRPO can teach asking there. So with
`select_max_needless_episodes` below 1 the qualifying checkpoints, best first, also play the
validation tasks online (greedy, as the held-out task evaluation does) until one keeps the share of
episodes with a needless inquiry at most that bound; when none does, the one with the lowest share
is kept and the record says the constraints were not met.

With `select_ask_biases`, the chosen checkpoint then gets an operating point (`choose_ask_bias`): the
bias on its tool call's ask decision, nearest zero first, under which the validation tasks played online
keep that share at most `select_bias_max_needless_episodes`. Weights and choice stay; the step and task evaluations
of the checkpoint apply the bias (`training.checkpoints.ask_bias_of`).

The passes run on the engine the test evaluation plays on (`Profile.eval_engine`, `training.openvino.engine_of`),
so a checkpoint is chosen by the answers it is then scored by; the search over ask biases stays on HF (a bias is
a logits processor).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..evaluation.metrics import step_metrics, task_rates
from ..evaluation.episodes import model_policy, run_episodes
from ..data.benchmark import validation_records, validation_tasks
from ..evaluation.steps import generate, score
from .models import loaded
from .openvino import engine_loaded, engine_of
from ..profiles import Named, Profile
from ..agent.prompts import frame_for
from ..runs.hardware import device_stamp
from ..runs.integrity import complete_checkpoints, read_marker, write_marker
from ..runs.paths import atomic_dir, metrics_dir, write_json_atomic

SELECTION_FILE = "selection.json"  # the validation pass, kept beside the checkpoint it chose
KEYS = ("inquiry_recall", "needless_rate", "safe_step_accuracy", "step_accuracy", "format")
# what a chosen checkpoint keeps: the model or adapter, not the optimiser state
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "adapter_config.json",
    "adapter_model.safetensors",
)


def ranked(start: dict, rows: list[dict], max_needless: float, max_safe_drop: float) -> list[dict]:
    """The rows (validation metrics per step, in step order) that meet the constraints, best first:
    the highest ISR, ties to the higher safe-step accuracy, then to the earlier step."""
    floor = (start["safe_step_accuracy"] or 0.0) - max_safe_drop
    eligible = [
        r
        for r in rows
        if (r["needless_rate"] or 0.0) <= max_needless and (r["safe_step_accuracy"] or 0.0) >= floor - 1e-9
    ]
    return sorted(eligible, key=lambda r: (-(r["inquiry_recall"] or 0.0), -(r["safe_step_accuracy"] or 0.0), r["step"]))


def choose(start: dict, rows: list[dict], max_needless: float, max_safe_drop: float) -> tuple[dict, bool]:
    """The row to keep among `rows` and whether it met the constraints (see `ranked`); the last row
    when none does."""
    if not rows:
        raise ValueError("no checkpoints to choose from")
    best = ranked(start, rows, max_needless, max_safe_drop)
    return (best[0], True) if best else (rows[-1], False)


def first_within(candidates: list, needless_share, max_share: float, label) -> tuple[object, bool, list[dict]]:
    """The first of `candidates` (in order of preference) whose `needless_share(candidate)` -- the share
    of validation episodes with a needless inquiry, computed only as far as needed -- is at most
    `max_share`, else the lowest share (ties to the earlier candidate); whether one met it; the shares
    computed, each with `label(candidate)`."""
    if not candidates:
        raise ValueError("nothing to choose from")
    seen = []
    for item in candidates:
        seen.append({**label(item), "needless_episodes": needless_share(item)})
        if seen[-1]["needless_episodes"] <= max_share + 1e-9:
            return item, True, seen
    lowest = min(range(len(seen)), key=lambda k: seen[k]["needless_episodes"])
    return candidates[lowest], False, seen


def choose_online(candidates: list[dict], needless_share, max_share: float) -> tuple[dict, bool, list[dict]]:
    """`first_within` over checkpoint rows (best first), each share labelled with its step."""
    if not candidates:
        raise ValueError("no checkpoints to choose from")
    return first_within(candidates, needless_share, max_share, lambda row: {"step": row["step"]})


def checkpoints(run: Path, last_step: int) -> list[tuple[int, Path]]:
    """(step, folder) of a run's kept checkpoints, then its final model if no checkpoint has its step."""
    found = complete_checkpoints(run)  # a half-saved checkpoint is never evaluated
    if not found or found[-1][0] < last_step:
        found.append((last_step, run / "final"))
    return found


def on_engine(profile: Profile, path: str | None, base: str | None = None, ask_bias: float = 0.0):
    """`with on_engine(...) as m:` the checkpoint on the engine an evaluation plays it on (`engine_of`)."""
    return (loaded if engine_of(profile, ask_bias) == "hf" else engine_loaded)(profile, path, base)


def validate(profile: Profile, path: str | None, records: list[dict], base: str | None = None) -> dict:
    """Overall validation metrics (value only) of one checkpoint, greedy as in the test evaluation."""
    with on_engine(profile, path, base) as m:
        raw = generate(m.model, m.processor, records, profile, progress=False)
    frame = frame_for(profile)
    overall = step_metrics([score(r, rec, profile, frame) for r, rec in zip(raw, records)])["overall"]
    return {k: overall[k]["value"] for k in KEYS}


def needless_episode_share(
    profile: Profile, path: str | None, tasks: list, base: str | None = None, ask_bias: float = 0.0
) -> float:
    """The share of `tasks`, played online and greedily by one checkpoint (with `ask_bias` on its ask
    decision), with at least one needless inquiry: the task-level `needless_rate` of
    `evaluation.metrics.task_rates`."""
    with on_engine(profile, path, base, ask_bias) as m:
        played = run_episodes(model_policy(m.model, m.processor, profile, ask_bias=ask_bias), tasks, profile)
    return task_rates(played)["needless_rate"]["value"]


def select_on_validation(profile: Profile, name: str, start_path: str | None, run: Path, out_root=None) -> dict:
    """Evaluate the start and every kept checkpoint of `run` on the validation split, copy the chosen
    one to `run/selected` and record the curve in `<run_dir>/metrics/selection_<name>.json`."""
    records = validation_records(profile)
    meta = json.loads((run / "final" / "inquire_train.json").read_text())
    start = {"step": 0, **validate(profile, start_path, records)}
    rows = [
        {"step": step, "path": str(folder), **validate(profile, str(folder), records, base=meta["base"])}
        for step, folder in checkpoints(run, meta["config"]["max_steps"])
    ]
    best = ranked(start, rows, profile.select_max_needless_steps, profile.select_max_safe_drop)
    online: list[dict] = []
    if best and profile.select_max_needless_episodes < 1.0:
        tasks = validation_tasks(profile)
        chosen, met, online = choose_online(
            best,
            lambda row: needless_episode_share(profile, row["path"], tasks, base=meta["base"]),
            profile.select_max_needless_episodes,
        )
    else:
        chosen, met = choose(start, rows, profile.select_max_needless_steps, profile.select_max_safe_drop)
    picked = {}
    if profile.select_ask_biases:
        known = {row["step"]: row["needless_episodes"] for row in online}
        bias, bias_met, shares = choose_ask_bias(
            profile, chosen["path"], meta.get("base"), {0.0: known[chosen["step"]]} if chosen["step"] in known else None
        )
        picked = {"ask_bias": bias, "ask_bias_met": bias_met}
    record = {
        "checkpoint": name,
        "profile": profile.name,
        "device": device_stamp(),
        "eval_engine": engine_of(profile),
        "validation_tasks": profile.val_tasks,
        "validation_steps": len(records),
        "max_needless_steps": profile.select_max_needless_steps,
        "max_safe_drop": profile.select_max_safe_drop,
        "start": start,
        "checkpoints": rows,
        "max_needless_episodes": profile.select_max_needless_episodes,
        "online": online,
        "selected_step": chosen["step"],
        "constraints_met": met,
    }
    if picked:
        record |= {
            "ask_biases": shares,
            **picked,
            "bias_max_needless_episodes": profile.select_bias_max_needless_episodes,
        }
    _keep(run, chosen["path"], {**meta, "selected_step": chosen["step"], "constraints_met": met, **picked}, record)
    write_json_atomic(metrics_dir(profile, out_root) / f"selection_{name}.json", record)
    return record


def shipped_selection(profile: Named, name: str, run: Path, out_root=None) -> dict | None:
    """The choice on validation a shipped result of run `name` came with (`training.shipped_stages`), written
    to `selection_<name>.json` as a pass here would write it; None where `run/final` is not such a result."""
    final = run / "final"
    shipped = final / SELECTION_FILE
    meta_path = final / "inquire_train.json"
    if not shipped.is_file() or not meta_path.is_file() or "shipped" not in json.loads(meta_path.read_text()):
        return None
    record = json.loads(shipped.read_text())
    write_json_atomic(metrics_dir(profile, out_root) / f"selection_{name}.json", record)
    return record


def chosen_on_validation(profile: Profile, name: str, start_path: str | None, run: Path, out_root=None) -> dict:
    """The choice among run `name`'s checkpoints: read back where `run/final` is a shipped result that came with
    one (`shipped_selection`), else made here (`select_on_validation`)."""
    shipped = shipped_selection(profile, name, run, out_root)
    if shipped is not None:
        print(f"{name}: the shipped result's choice on validation read back (step {shipped.get('selected_step')})")
        return shipped
    return select_on_validation(profile, name, start_path, run, out_root)


def _keep(run: Path, source: str | Path, meta: dict, selection: dict | None = None) -> None:
    """Copy the model files of checkpoint `source` to `run/selected` with the run's record `meta`
    (start, base, settings, the choice) and the validation pass that chose it (`selection`, or the one kept
    there), whole or not at all; its marker keeps the run's content key (`fit.fit`)."""
    kept = run / "selected" / SELECTION_FILE
    selection = selection if selection is not None else (json.loads(kept.read_text()) if kept.is_file() else None)
    key = (read_marker(run / "final") or {}).get("key")
    with atomic_dir(run / "selected") as tmp:
        for f in MODEL_FILES:
            if (Path(source) / f).exists():
                shutil.copy(Path(source) / f, tmp / f)
        (tmp / "inquire_train.json").write_text(json.dumps(meta, default=str))
        if selection is not None:
            (tmp / SELECTION_FILE).write_text(json.dumps(selection, default=str))
        write_marker(tmp, **({"key": key} if key else {}))


def choose_ask_bias(
    profile: Profile, path: str, base: str | None, known: dict | None = None
) -> tuple[float, bool, list[dict]]:
    """The operating point of the checkpoint at `path`: the first of `profile.select_ask_biases` whose
    validation tasks, played online with that bias on the ask decision, keep the share of episodes with a
    needless inquiry at most `profile.select_bias_max_needless_episodes` (the lowest share when none does; `known`:
    shares already measured, by bias); whether one met it; the shares played.

    Why: a checkpoint that meets the online bound on 80 validation episodes by a hair tends to exceed it
    on the held-out tasks (the first candidate under a noisy bound is the lucky side of its noise), and
    what needs to move is how often it asks, which a bias moves along the checkpoint's operating curve.
    Measured on the cpu profile from full SFT (docs/lab/grpo_inquiry_gain.md): every seed needed -6, which kept
    its episodes within the bound at 24.5-55 points of step ISR, since its needless asks online are as
    confident as its due ones; so no profile turns it on."""
    tasks = validation_tasks(profile)
    known = known or {}
    return first_within(
        [float(b) for b in profile.select_ask_biases],
        lambda b: known[b] if b in known else needless_episode_share(profile, path, tasks, base=base, ask_bias=b),
        profile.select_bias_max_needless_episodes,
        lambda b: {"ask_bias": b},
    )


def select_ask_bias(profile: Profile, name: str, run: Path, out_root=None, known: dict | None = None) -> dict:
    """`choose_ask_bias` for a choice already made (`run/selected`, e.g. by a run without
    `select_ask_biases`): the bias goes into the checkpoint's record, where the step and task evaluations
    read it, and into `selection_<name>.json`; the weights stay as they are."""
    selected = run / "selected"
    meta = json.loads((selected / "inquire_train.json").read_text())
    bias, met, shares = choose_ask_bias(profile, str(selected), meta.get("base"), known)
    _keep(run, selected, {**meta, "ask_bias": bias, "ask_bias_met": met})
    path = metrics_dir(profile, out_root) / f"selection_{name}.json"
    record = json.loads(path.read_text()) if path.is_file() else {"checkpoint": name, "profile": profile.name}
    record = {
        **record,
        "ask_biases": shares,
        "ask_bias": bias,
        "ask_bias_met": met,
        "bias_max_needless_episodes": profile.select_bias_max_needless_episodes,
    }
    write_json_atomic(path, record)
    return record
