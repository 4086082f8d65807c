"""Loaders and validators for InquireMobile's released data formats.

Two JSON-lines formats are supported, detected by their keys:

- tasks (`tasks_en.jsonl`): instruction, apps, category, language, need_login, intension.
- GRPO step records (`interactive_grpo_*.jsonl`): goal, action (a JSON string of a `mobile_use`
  tool call), bbox, width, height, resized_width, resized_height, img_list, and optionally system
  and query.

Every bad row is reported as a `RecordError` naming the file, the 1-based line and the field.
For GRPO records the coordinate frame of the gold point is detected against the bbox, because the
released records mix frames: some points lie in the bbox read in the original screen frame, others
in neither frame, and training on the latter silently would teach wrong clicks.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets

from ..agent.actions import NO_BBOX, TOOL_NAME, Action, ActionError
from ..agent.taxonomy import ALIASES
from ..runs.bounds import MAX_PIXELS, LineTooLong, iter_lines, number_problem

TASKS = "tasks"
GRPO = "grpo"
# real-format records of the InquireMobile release, shipped with the package (the benchmark notebook shows them)
SAMPLES_DIR = Path(__file__).resolve().parent / "samples" / "inquiremobile"

# Raw category values of the released tasks; InquireMobile spells the intent category "intension".
TASK_CATEGORIES = ("risk", "privacy", "intension", "uncertainty", "combination")
CATEGORY_NORM = ALIASES  # the release spells intent "intension" (see agent.taxonomy)
# Accept the normalised spelling too, so that files written by this project validate.
_ACCEPTED_CATEGORIES = TASK_CATEGORIES + ("intent",)

_KIND = {TASKS: "InquireMobile tasks", GRPO: "InquireMobile GRPO step records"}

FRAMES = ("original", "resized", "none", "inconsistent")

_TASK_KEYS = ("instruction", "apps", "category", "language", "need_login", "intension")
_GRPO_KEYS = ("goal", "action", "bbox", "width", "height", "resized_width", "resized_height", "img_list")
_SIZE_KEYS = ("width", "height", "resized_width", "resized_height")
# Action types whose `coordinate` is the gold point checked against the bbox.
_POINT_ACTIONS = ("click", "long_press", "swipe")

_ACTION_FEATURES = {
    "type": datasets.Value("string"),
    "coordinate": datasets.List(datasets.Value("int32")),
    "coordinate2": datasets.List(datasets.Value("int32")),
    "text": datasets.Value("string"),
    "time": datasets.Value("float64"),
    "button": datasets.Value("string"),
    "status": datasets.Value("string"),
}

TASK_FEATURES = datasets.Features(
    {
        "line": datasets.Value("int32"),
        "instruction": datasets.Value("string"),
        "apps": datasets.List(datasets.Value("string")),
        "category": datasets.Value("string"),
        "category_norm": datasets.Value("string"),
        "language": datasets.Value("string"),
        "need_login": datasets.Value("bool"),
        "intension": datasets.Value("string"),
    }
)

GRPO_FEATURES = datasets.Features(
    {
        "line": datasets.Value("int32"),
        "goal": datasets.Value("string"),
        "action": _ACTION_FEATURES,
        "action_raw": datasets.Value("string"),
        "bbox": datasets.List(datasets.Value("int32")),  # original frame, rounded; [-1]*4 when none
        "width": datasets.Value("int32"),
        "height": datasets.Value("int32"),
        "resized_width": datasets.Value("int32"),
        "resized_height": datasets.Value("int32"),
        "img_list": datasets.List(datasets.Value("string")),
        "image_paths": datasets.List(datasets.Value("string")),
        "point": datasets.List(datasets.Value("int32")),
        "frame": datasets.Value("string"),
        "bbox_consistent": datasets.Value("bool"),
        "system": datasets.Value("string"),
        "query": datasets.Value("string"),
    }
)


class RecordError(ValueError):
    """A bad row: `str()` is "<file>:<line>: field '<field>': <message>" (no field part for
    rows that are not a JSON object at all)."""

    def __init__(self, path: str | os.PathLike, line: int, field: str | None, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = f"{self.path}:{line}: "
        super().__init__(where + (f"field '{field}': {message}" if field else message))


@dataclass
class ValidationReport:
    """What `validate_file` found in one file."""

    path: str
    format: str
    n_rows: int = 0  # non-blank lines read
    n_ok: int = 0
    bad_rows: list[tuple[int, str | None, str]] = field(default_factory=list)  # (line, field, message)
    category_counts: dict[str, int] = field(default_factory=dict)  # tasks: raw category -> rows
    action_counts: dict[str, int] = field(default_factory=dict)  # grpo: action type -> rows
    frame_counts: dict[str, int] = field(default_factory=dict)  # grpo: FRAMES -> rows
    inconsistent: list[dict[str, Any]] = field(default_factory=list)  # grpo: line, point, bbox, frames_tried
    image_root: str | None = None
    n_images: int = 0  # grpo: img_list entries of the good rows
    missing_images: int | None = None  # grpo: entries not found under image_root; None without a root

    def to_text(self) -> str:
        """Render the report as the plain text printed by `inquire validate`."""
        kind = _KIND[self.format]
        lines = [f"{self.path}: {kind}: {self.n_rows} rows, {self.n_ok} ok, {len(self.bad_rows)} skipped as bad"]
        for line, fld, msg in self.bad_rows:
            lines.append(f"  bad line {line}" + (f" field '{fld}'" if fld else "") + f": {msg}")
        if self.format == TASKS:
            cats = ", ".join(
                f"{c} {n}" + (f" (= {CATEGORY_NORM[c]})" if c in CATEGORY_NORM else "")
                for c, n in sorted(self.category_counts.items())
            )
            lines.append(f"categories: {cats or '-'}")
            return "\n".join(lines)
        acts = ", ".join(f"{a} {n}" for a, n in sorted(self.action_counts.items()))
        lines.append(f"actions: {acts or '-'}")
        lines.append("frames of the gold point: " + ", ".join(f"{f} {self.frame_counts.get(f, 0)}" for f in FRAMES))
        if self.inconsistent:
            lines.append("gold point inside the bbox in neither frame (do not train on these):")
            for rec in self.inconsistent:
                tried = "; ".join(
                    f"{name} {t['size'][0]}x{t['size'][1]} bbox {_fmt_box(t['bbox'])}"
                    for name, t in rec["frames_tried"].items()
                )
                lines.append(f"  line {rec['line']}: point {tuple(rec['point'])} not in {tried}")
        if self.missing_images is None:
            lines.append(f"images: {self.n_images} referenced, not checked (no image root given)")
        else:
            lines.append(f"images: {self.n_images} referenced, {self.missing_images} missing under {self.image_root}")
        return "\n".join(lines)


def _fmt_box(box: list[float]) -> str:
    return "[" + ", ".join(f"{v:g}" if v != int(v) else str(int(v)) for v in box) + "]"


# ----------------------------------------------------------------------------- reading


def _iter_objects(path: Path, max_line: int | None = None):
    """Yield (line_no, obj_or_error) for each non-blank line; errors are RecordError instances so
    that the caller decides whether to raise or skip. A line over the maximum length (see
    `bounds.max_line_bytes`) is an error and is never held whole. Raises OSError when the file
    cannot be read."""
    for line_no, raw in iter_lines(path, max_line):
        if isinstance(raw, LineTooLong):
            yield line_no, RecordError(path, line_no, None, str(raw).split(": ", 1)[1])
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield line_no, RecordError(path, line_no, None, f"not valid UTF-8 ({exc.reason})")
            continue
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = (
                f"invalid JSON: {exc.msg} at column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else "invalid JSON: nested too deeply"
            )
            yield line_no, RecordError(path, line_no, None, msg)
            continue
        if not isinstance(obj, dict):
            yield line_no, RecordError(path, line_no, None, f"expected a JSON object, got {type(obj).__name__}")
            continue
        yield line_no, obj


def _detect(obj: dict) -> str | None:
    if "goal" in obj and "action" in obj:
        return GRPO
    if "instruction" in obj and "category" in obj:
        return TASKS
    return None


def _field(obj: dict, key: str, path: Path, line: int) -> Any:
    if key not in obj:
        raise RecordError(path, line, key, "missing")
    return obj[key]


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _expect_str(obj, key, path, line, *, non_empty=True) -> str:
    v = _field(obj, key, path, line)
    if not isinstance(v, str):
        raise RecordError(path, line, key, f"expected a string, got {_type_name(v)} {v!r}")
    if non_empty and not v.strip():
        raise RecordError(path, line, key, "expected a non-empty string, got ''")
    return v


def _expect_str_list(obj, key, path, line) -> list[str]:
    v = _field(obj, key, path, line)
    if not isinstance(v, list) or not v or not all(isinstance(s, str) for s in v):
        raise RecordError(path, line, key, f"expected a non-empty list of strings, got {_type_name(v)} {v!r}")
    return v


def _expect_pos_int(obj, key, path, line) -> int:
    """A screen size: a positive integer of at most MAX_PIXELS, checked before any arithmetic."""
    v = _field(obj, key, path, line)
    # bool is an int subclass in Python; a JSON true is not a size.
    if number_problem(v, 1, MAX_PIXELS, integer=True) is not None:
        raise RecordError(
            path, line, key, f"expected a positive integer up to {MAX_PIXELS}, got {_type_name(v)} {_short_repr(v)}"
        )
    return v


def _short_repr(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:20] + f"...({len(r)} chars)"


def _is_num(v: Any) -> bool:
    """A finite number within [-MAX_PIXELS, MAX_PIXELS] (a huge int is never turned into a float)."""
    return number_problem(v, -MAX_PIXELS, MAX_PIXELS) is None


# ----------------------------------------------------------------------------- tasks


def _task_row(obj: dict, path: Path, line: int) -> dict:
    """Validate one tasks record and return its dataset row; raises RecordError."""
    instruction = _expect_str(obj, "instruction", path, line)
    apps = _expect_str_list(obj, "apps", path, line)
    category = _field(obj, "category", path, line)
    if category not in _ACCEPTED_CATEGORIES:
        raise RecordError(path, line, "category", f"expected one of {list(TASK_CATEGORIES)}, got {category!r}")
    language = _expect_str(obj, "language", path, line)
    need_login = _field(obj, "need_login", path, line)
    if not isinstance(need_login, bool):
        raise RecordError(
            path, line, "need_login", f"expected true or false, got {_type_name(need_login)} {need_login!r}"
        )
    intension = _expect_str(obj, "intension", path, line)
    return {
        "line": line,
        "instruction": instruction,
        "apps": apps,
        "category": category,
        "category_norm": CATEGORY_NORM.get(category, category),
        "language": language,
        "need_login": need_login,
        "intension": intension,
    }


# ----------------------------------------------------------------------------- grpo


def _parse_gold_action(raw: Any, path: Path, line: int) -> dict:
    """Parse the `action` field (a JSON string of a mobile_use tool call) into the Action fields."""
    if not isinstance(raw, str):
        raise RecordError(path, line, "action", f"expected a JSON string of a tool call, got {_type_name(raw)}")
    try:
        call = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RecordError(
            path, line, "action", f"invalid JSON in the tool call: {exc.msg} at column {exc.colno}"
        ) from None
    if not isinstance(call, dict) or not isinstance(call.get("arguments"), dict):
        raise RecordError(path, line, "action", 'expected {"name": "mobile_use", "arguments": {...}}')
    if call.get("name") != TOOL_NAME:
        raise RecordError(path, line, "action", f"expected tool name {TOOL_NAME!r}, got {call.get('name')!r}")
    args = dict(call["arguments"])
    # The paper's write-up names the inquiry's argument `content`; this library uses `text`.
    if args.get("action") == "call_user" and "text" not in args and "content" in args:
        args["text"] = args.pop("content")
    try:
        return _action_fields(args)
    except ActionError as exc:
        raise RecordError(path, line, "action", f"invalid {args.get('action')!r} action: {exc}") from None


def _action_fields(args: dict) -> dict:
    """Action fields of a tool call's arguments (None where unset); raises ActionError."""
    act = Action.from_arguments(args)
    return {
        "type": act.type,
        "coordinate": list(act.coordinate) if act.coordinate is not None else None,
        "coordinate2": list(act.coordinate2) if act.coordinate2 is not None else None,
        "text": act.text,
        "time": float(act.time) if act.time is not None else None,
        "button": act.button,
        "status": act.status,
    }


def _inside(pt, box) -> bool:
    return box[0] <= pt[0] <= box[2] and box[1] <= pt[1] <= box[3]


def detect_frame(point, bbox, size, resized_size) -> tuple[str, dict[str, dict]]:
    """Return (frame, frames_tried) for a gold point against a bbox stored in the original frame.

    frame is "none" when there is no bbox ([-1]*4) or no point, "original" when the point lies
    inside the bbox (edges included) as stored, "resized" when it lies inside the bbox scaled from
    `size` (w, h) to `resized_size`, else "inconsistent". "original" wins when both hold.
    frames_tried maps each frame name to {"size": (w, h), "bbox": box in that frame}.
    """
    if point is None or list(bbox) == NO_BBOX:
        return "none", {}
    (w, h), (rw, rh) = size, resized_size
    sx, sy = rw / w, rh / h
    tried = {
        "original": {"size": (w, h), "bbox": [float(v) for v in bbox]},
        "resized": {
            "size": (rw, rh),
            "bbox": [round(bbox[0] * sx, 1), round(bbox[1] * sy, 1), round(bbox[2] * sx, 1), round(bbox[3] * sy, 1)],
        },
    }
    if _inside(point, bbox):
        return "original", tried
    if _inside(point, [bbox[0] * sx, bbox[1] * sy, bbox[2] * sx, bbox[3] * sy]):
        return "resized", tried
    return "inconsistent", tried


def _resolve_image(p: str, image_root: str | None) -> str | None:
    # The released paths point at the authors' machines, so only the basename is meaningful.
    if image_root is None:
        return p if os.path.isfile(p) else None
    cand = os.path.join(image_root, os.path.basename(p))
    return cand if os.path.isfile(cand) else None


def _grpo_row(obj: dict, path: Path, line: int, image_root: str | None) -> tuple[dict, dict]:
    """Validate one GRPO record; return (dataset row, frames_tried). Raises RecordError."""
    goal = _expect_str(obj, "goal", path, line)
    action_raw = _field(obj, "action", path, line)
    action = _parse_gold_action(action_raw, path, line)
    bbox = _field(obj, "bbox", path, line)
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_num(v) for v in bbox):
        raise RecordError(path, line, "bbox", f"expected 4 numbers [x0, y0, x1, y1] or [-1, -1, -1, -1], got {bbox!r}")
    if bbox != NO_BBOX and (bbox[0] > bbox[2] or bbox[1] > bbox[3]):
        raise RecordError(path, line, "bbox", f"expected x0 <= x1 and y0 <= y1, got {bbox!r}")
    w, h, rw, rh = (_expect_pos_int(obj, k, path, line) for k in _SIZE_KEYS)
    # the box is stored in the record's original frame: it must lie on its own screen
    if bbox != NO_BBOX and not (0 <= bbox[0] and 0 <= bbox[1] and bbox[2] <= w and bbox[3] <= h):
        raise RecordError(path, line, "bbox", f"{_fmt_box(bbox)} lies outside the {w}x{h} screen")
    img_list = _expect_str_list(obj, "img_list", path, line)
    optional = {}
    for key in ("system", "query"):
        v = obj.get(key)
        if v is not None and not isinstance(v, str):
            raise RecordError(path, line, key, f"expected a string, got {_type_name(v)}")
        optional[key] = v
    # a point may be in either frame (see detect_frame), but never off both screens
    for key in ("coordinate", "coordinate2"):
        pt = action[key]
        if pt is not None and not (pt[0] <= max(w, rw) and pt[1] <= max(h, rh)):
            raise RecordError(
                path,
                line,
                "action",
                f"{key} {tuple(pt)} lies outside the {w}x{h} screen and its {rw}x{rh} resized frame",
            )
    point = action["coordinate"] if action["type"] in _POINT_ACTIONS else None
    frame, tried = detect_frame(point, bbox, (w, h), (rw, rh))
    row = {
        "line": line,
        "goal": goal,
        "action": action,
        "action_raw": action_raw,
        "bbox": [int(round(v)) for v in bbox],
        "width": w,
        "height": h,
        "resized_width": rw,
        "resized_height": rh,
        "img_list": img_list,
        "image_paths": [_resolve_image(p, image_root) for p in img_list],
        "point": point,
        "frame": frame,
        "bbox_consistent": frame != "inconsistent",
        **optional,
    }
    return row, tried


# ----------------------------------------------------------------------------- public API


def _scan(path, image_root, skip_bad, expect: str | None, max_line: int | None = None):
    """Read and validate a whole file; return (rows, report). Raises RecordError on the first bad
    row unless skip_bad (and, with skip_bad, when no row at all is good), and OSError when the file
    cannot be read."""
    path = Path(path)
    fmt = expect
    rows: list[dict] = []
    report = ValidationReport(path=str(path), format=fmt or "", image_root=image_root)
    checked_kind = False
    for line, obj in _iter_objects(path, max_line):
        report.n_rows += 1
        try:
            if isinstance(obj, RecordError):
                raise obj
            if not checked_kind:
                # A loader handed the other format should say so, not report a missing field.
                checked_kind = True
                found = _detect(obj)
                if expect is not None and found not in (None, expect):
                    raise RecordError(path, line, None, f"expected {_KIND[expect]}, but this looks like {_KIND[found]}")
            if fmt is None:
                fmt = _detect(obj)
                if fmt is None:
                    raise RecordError(
                        path,
                        line,
                        None,
                        "unknown record format: expected InquireMobile task keys "
                        f"{list(_TASK_KEYS)} or GRPO keys {list(_GRPO_KEYS)}, "
                        f"got {sorted(obj)}",
                    )
                report.format = fmt
            if fmt == TASKS:
                row = _task_row(obj, path, line)
                report.category_counts[row["category"]] = report.category_counts.get(row["category"], 0) + 1
            else:
                row, tried = _grpo_row(obj, path, line, image_root)
                report.action_counts[row["action"]["type"]] = report.action_counts.get(row["action"]["type"], 0) + 1
                if row["frame"] == "inconsistent":
                    report.inconsistent.append(
                        {"line": line, "point": row["point"], "bbox": obj["bbox"], "frames_tried": tried}
                    )
        except RecordError as err:
            if not skip_bad:
                raise
            report.bad_rows.append((err.line, err.field, err.message))
            continue
        rows.append(row)
        report.n_ok += 1
    if fmt is None:
        raise RecordError(path, report.n_rows, None, "no valid records to detect the format from")
    if report.n_ok == 0 and report.bad_rows:
        line, fld, msg = report.bad_rows[0]
        raise RecordError(path, line, fld, f"{msg} (and no good row: all {len(report.bad_rows)} rows are bad)")
    report.format = fmt
    if fmt == GRPO:
        report.frame_counts = {f: 0 for f in FRAMES} | dict(Counter(r["frame"] for r in rows))
        report.n_images = sum(len(r["img_list"]) for r in rows)
        if image_root is not None:
            report.missing_images = sum(p is None for r in rows for p in r["image_paths"])
    return rows, report


def load_inquiremobile_tasks(path, *, skip_bad: bool = False, max_line: int | None = None) -> datasets.Dataset:
    """Load InquireMobile's tasks JSONL (e.g. tasks_en.jsonl) as a Dataset with TASK_FEATURES.

    `category` keeps the raw value; `category_norm` maps "intension" to "intent". `line` is the
    1-based source line. Raises RecordError on the first bad row (skipped when skip_bad).
    """
    rows, _ = _scan(path, None, skip_bad, TASKS, max_line)
    return datasets.Dataset.from_list(rows, features=TASK_FEATURES)


def load_inquiremobile_grpo(
    path, image_root: str | None = None, *, skip_bad: bool = False, max_line: int | None = None
) -> datasets.Dataset:
    """Load InquireMobile's GRPO step records JSONL as a Dataset with GRPO_FEATURES.

    `action` holds the parsed gold action (type + Action fields, None where unset) and
    `action_raw` the original JSON string. `image_paths[i]` is image_root/basename(img_list[i])
    when that file exists (the path as given when no root), else None. `point` is the gold
    coordinate of click/long_press/swipe (else None); `frame` is one of FRAMES (see
    `detect_frame`) and `bbox_consistent` is False only for "inconsistent".
    """
    rows, _ = _scan(path, image_root, skip_bad, GRPO, max_line)
    return datasets.Dataset.from_list(rows, features=GRPO_FEATURES)


def validate_file(
    path, image_root: str | None = None, skip_bad: bool = False, max_line: int | None = None
) -> ValidationReport:
    """Validate a tasks or GRPO JSONL file, detecting the format from the first record's keys.

    Raises RecordError on the first bad row unless skip_bad (then bad rows are listed in
    report.bad_rows; none good is still an error), and OSError when the file cannot be read.
    `max_line`: the longest line accepted, in bytes (see `bounds.max_line_bytes`).
    """
    return _scan(path, image_root, skip_bad, None, max_line)[1]


def validate_main(path, image_root: str | None = None, skip_bad: bool = False, max_line: int | None = None) -> int:
    """Print the validation report of `path` and return the exit code.

    0: valid (with skip_bad, bad rows are listed but do not fail, unless no row is good); 1: a bad
    row (message on stderr); 2: the file or the image root cannot be read.
    """
    if image_root is not None and not os.path.isdir(image_root):
        print(f"{image_root}: image root is not a directory", file=sys.stderr)
        return 2
    try:
        report = validate_file(path, image_root=image_root, skip_bad=skip_bad, max_line=max_line)
    except RecordError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: cannot read {path}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(report.to_text())
    return 0
