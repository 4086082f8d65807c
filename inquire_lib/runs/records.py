"""The formats a run writes and every reader relies on, defined once.

- `eval/<checkpoint>/step_predictions.jsonl`: one step per line, fields `STEP_FIELDS` (checked by
  `validate_prediction`), `outcome` one of `OUTCOMES`, `gold_bbox` `NO_BBOX` when there is none;
- `eval/<checkpoint>/trajectories.jsonl`: one task-level episode per line, fields `EPISODE_FIELDS`,
  each of its `steps` with `EPISODE_STEP_FIELDS`;
- `metrics/<kind>_<checkpoint>.json` for kind in `METRIC_KINDS`, and `metrics/<notebook>.json`;
- checkpoint names: trained ones in `ORDER`, the reference policies in `REFERENCES`.

Plain Python only (no torch, no plotting): the inspector and the report read runs through it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..agent.actions import NO_BBOX  # noqa: F401  (a step without a target box: [-1, -1, -1, -1])

OUTCOMES: tuple[str, ...] = (
    "correct",
    "missed_inquiry",
    "needless_inquiry",
    "wrong_type",
    "wrong_argument",
    "unparseable",
)
FAILURES: tuple[str, ...] = OUTCOMES[1:]
# trained checkpoints in training order (tables, the inspector), then the scripted reference policies
ORDER: tuple[str, ...] = (
    "untrained",
    "base_agent",
    "sft_weak",
    "sft_full",
    "sft_dagger",
    "grpo_weak",
    "grpo_full",
    "grpo_task",
)
REFERENCES: tuple[str, ...] = ("expert", "always_act", "always_ask", "random")
METRIC_KINDS = ("step", "task", "selection")

EPISODE_FIELDS = (
    "checkpoint",
    "task_id",
    "app",
    "template",
    "category",
    "subcategory",
    "instruction",
    "intent",
    "inquiry_required",
    "gold_steps",
    "success",
    "info",
    "n_steps",
    "detour",
    "recovered",
    "frame",
    "steps",
)
EPISODE_STEP_FIELDS = (
    "screenshot",
    "screen_title",
    "step",
    "on_path",
    "path_index",
    "history",
    "raw_output",
    "think",
    "parsed_action",
    "parse_error",
    "format_ok",
    "gold_action",
    "outcome",
    "unsafe",
    "needless",
    "user_reply",
)


class PredictionFormatError(ValueError):
    """A predictions file does not follow the step_predictions.jsonl schema."""


# step_predictions.jsonl: field -> accepted types (None allowed only where listed), in record order;
# `rewards` (name -> number) and `probe` (true: a step that counts toward inquiry recall only) are optional
STEP_FIELDS: dict[str, tuple[type, ...]] = {
    "checkpoint": (str,),
    "id": (str,),
    "task_id": (str,),
    "step": (int,),
    "category": (str,),
    "subcategory": (str,),
    "instruction": (str,),
    "history": (list,),
    "inquiry_required": (bool,),
    "inquiry_reason": (str,),
    "gold_action": (dict,),
    "gold_bbox": (list,),
    "raw_output": (str,),
    "think": (str, type(None)),
    "parsed_action": (dict, type(None)),
    "parse_error": (str, type(None)),
    "format_ok": (bool,),
    "type_ok": (bool,),
    "arg_ok": (bool,),
    "outcome": (str,),
    "screenshot": (str,),
    "frame": (dict,),
}
FRAME_KEYS = ("screen_w", "screen_h", "model_w", "model_h")


def validate_prediction(rec: object, where: str) -> dict:
    """Return `rec` if it follows the step-prediction schema, else raise PredictionFormatError.

    `where` ("file:line") prefixes every message, which names the offending field.
    """
    if not isinstance(rec, dict):
        raise PredictionFormatError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for name, types in STEP_FIELDS.items():
        if name not in rec:
            raise PredictionFormatError(f"{where}: field '{name}' is missing")
        value = rec[name]
        # bool is an int subclass: a step of `true` is a schema error, not step 1
        if not isinstance(value, types) or (name == "step" and isinstance(value, bool)):
            raise PredictionFormatError(
                f"{where}: field '{name}' has type {type(value).__name__}, expected "
                + " or ".join("null" if t is type(None) else t.__name__ for t in types)
            )
    if rec["outcome"] not in OUTCOMES:
        raise PredictionFormatError(f"{where}: field 'outcome' is {rec['outcome']!r}, expected one of {list(OUTCOMES)}")
    bbox = rec["gold_bbox"]
    if len(bbox) != 4 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox):
        raise PredictionFormatError(f"{where}: field 'gold_bbox' must be 4 numbers, got {bbox!r}")
    for key in FRAME_KEYS:
        v = rec["frame"].get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise PredictionFormatError(f"{where}: field 'frame.{key}' must be a positive int, got {v!r}")
    for name in ("gold_action", "parsed_action"):
        if rec[name] is not None and not isinstance(rec[name].get("action"), str):
            raise PredictionFormatError(f"{where}: field '{name}.action' must be a string")
    if not all(isinstance(h, str) for h in rec["history"]):
        raise PredictionFormatError(f"{where}: field 'history' must be a list of strings")
    if not isinstance(rec.get("probe", False), bool):
        raise PredictionFormatError(f"{where}: field 'probe' must be true or false")
    rewards = rec.get("rewards")
    if rewards is not None:
        if not isinstance(rewards, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in rewards.values()
        ):
            raise PredictionFormatError(f"{where}: field 'rewards' must map names to numbers")
    return rec


def read_jsonl(path: Path) -> list[tuple[int, object]]:
    """(line number, parsed JSON) for each non-blank line; a JSON error, a line that is not UTF-8
    or longer than the maximum (`data.bounds.max_line_bytes`) names file and line."""
    from .bounds import LineTooLong, iter_lines

    out = []
    for lineno, raw in iter_lines(path):
        if isinstance(raw, LineTooLong):
            raise PredictionFormatError(str(raw))
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PredictionFormatError(
                f"{path}:{lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise PredictionFormatError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise PredictionFormatError(f"{path}:{lineno}: invalid JSON: nested too deeply") from None
    return out


def read_predictions(path: str | Path) -> list[dict]:
    """Validated records of one step_predictions.jsonl, in file order; ids must be unique."""
    path = Path(path)
    preds, seen = [], {}
    for lineno, rec in read_jsonl(path):
        rec = validate_prediction(rec, f"{path}:{lineno}")
        key = (rec["checkpoint"], rec["id"])
        if key in seen:
            raise PredictionFormatError(f"{path}:{lineno}: field 'id' {rec['id']!r} repeats line {seen[key]}")
        seen[key] = lineno
        preds.append(rec)
    return preds


def checkpoint_order(names) -> list[str]:
    """Distinct `names` in training order (`ORDER`), then the reference policies (`REFERENCES`),
    then any other name alphabetically."""
    known = ORDER + REFERENCES
    rank = {name: i for i, name in enumerate(known)}
    return sorted(dict.fromkeys(names), key=lambda n: (rank.get(n, len(known)), n))


# the checkpoints the recipe does not train, in the order a reader inspects them: the base agent before the
# untrained model, whose output may not parse at all
STARTS: tuple[str, ...] = ("base_agent", "untrained")


def inspection_order(names) -> list[str]:
    """Distinct `names` in the order a reader inspects failures: the trained checkpoints in training order,
    then other names (ablation points) alphabetically, then the starts (`STARTS`), then the reference policies."""
    ordered = checkpoint_order(names)
    starts = [n for n in STARTS if n in ordered]
    refs = [n for n in ordered if n in REFERENCES]
    return [n for n in ordered if n not in starts and n not in refs] + starts + refs


def metrics_file(run_dir: str | Path, kind: str, name: str) -> Path:
    """`<run_dir>/metrics/<kind>_<name>.json`."""
    if kind not in METRIC_KINDS:
        raise ValueError(f"unknown metrics kind {kind!r}; choose one of {METRIC_KINDS}")
    return Path(run_dir) / "metrics" / f"{kind}_{name}.json"


def notebook_metrics_file(run_dir: str | Path, notebook: str) -> Path:
    """`<run_dir>/metrics/<notebook>.json`, named after the notebook (`02_sft_qlora`)."""
    return Path(run_dir) / "metrics" / f"{Path(notebook).stem}.json"


def read_json(path: str | Path):
    """A JSON file the run wrote; a file that does not parse (cut short, edited) is one line naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def load_metrics(run_dir: str | Path, kind: str = "step", names=None) -> list[dict]:
    """The saved `<kind>_*.json` metrics of a run, in `checkpoint_order`; only `names` when given."""
    folder = metrics_file(run_dir, kind, "x").parent
    found = {p.stem[len(kind) + 1 :]: read_json(p) for p in sorted(folder.glob(f"{kind}_*.json"))}
    return [found[n] for n in checkpoint_order(found) if names is None or n in names]


# the step rates a notebook shows side by side
STEP_HEADLINE = (
    "format",
    "type_accuracy",
    "step_accuracy",
    "click_in_bbox",
    "inquiry_recall",
    "inquiry_precision",
    "needless_rate",
    "safe_step_accuracy",
)


def headline(metrics: dict, keys=STEP_HEADLINE, text: bool = True) -> dict:
    """The headline rates `keys` of a metrics record (its `overall`; a dict without one is read as is).
    As text, for a notebook's table: the record's checkpoint, then each rate as "value (lo-hi)" ("n/a"
    where it has no value). With `text=False`, each rate's value as a float, those without one left out
    (TensorBoard's scalars)."""
    body = metrics.get("overall", metrics)
    if text:
        fmt = lambda m: "n/a" if m["value"] is None else f"{m['value']:.2f} ({m['lo']:.2f}-{m['hi']:.2f})"  # noqa: E731
        return {"checkpoint": metrics["checkpoint"], **{k: fmt(body[k]) for k in keys}}
    out = {}
    for key in keys:
        value = body.get(key)
        value = value.get("value") if isinstance(value, dict) else value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out
