"""Action space, parsing and formatting of model outputs, and coordinate frames.

The model answers with a Qwen2.5-VL ``mobile_use`` tool call, preceded by its pre-action reasoning:

    <think>... Inquiry check: needed, because ...</think>
    <tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [56, 90]}}</tool_call>

Model output is untrusted text. `parse_completion` reads it with `json.loads` (never `eval`), never
raises, and reports every failure as a reason code in `Parsed.error`.

Two coordinate frames exist: the SCREEN frame (logical pixels of the rendered phone screen, used by
everything stored in the dataset) and the MODEL frame (pixels of the resized image the model sees).
`Frame` is the only place that converts between them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass

ACTION_TYPES: tuple[str, ...] = (
    "click",
    "long_press",
    "swipe",
    "type",
    "key",
    "open",
    "system_button",
    "wait",
    "terminate",
    "call_user",
)
TOOL_NAME = "mobile_use"
BUTTONS: tuple[str, ...] = ("Back", "Home", "Menu", "Enter")
STATUSES: tuple[str, ...] = ("success", "failure")
TEXT_ACTIONS = frozenset({"type", "key", "open", "call_user"})
POINT_ACTIONS = frozenset({"click", "long_press"})
NO_BBOX = [-1, -1, -1, -1]
# Bounds on what a coordinate or a duration may be; anything outside is a malformed argument.
MAX_COORD = 10_000
MAX_TIME = 3_600.0
# Texts longer than this are judged on their first MAX_CHARS characters only (and are never
# well formatted), so that a runaway generation cannot stall parsing or the rewards.
MAX_CHARS = 100_000
# The generated phone's screen (width, height) in pixels: the frame its actions are written in
# (`world.apps` draws the phone at this size).
DEFAULT_SCREEN_WH = (360, 720)

_TAG_RE = re.compile(r"</?(?:think|tool_call)>")
_INQUIRY_RE = re.compile(r"inquiry\s+check\s*:\s*(not\s+needed|needed)", re.IGNORECASE)
_SPACE_RE = re.compile(r"\s+")


class ActionError(ValueError):
    """An action could not be built from its arguments; `reason` is a short code."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Action:
    """One `mobile_use` action; only the fields its type uses are set."""

    type: str
    coordinate: tuple[int, int] | None = None
    coordinate2: tuple[int, int] | None = None
    text: str | None = None
    time: float | None = None
    button: str | None = None
    status: str | None = None

    def to_arguments(self) -> dict:
        """Return the tool-call `arguments` dict: {"action": type, ...only the set fields...}."""
        args: dict = {"action": self.type}
        if self.coordinate is not None:
            args["coordinate"] = [int(v) for v in self.coordinate]
        if self.coordinate2 is not None:
            args["coordinate2"] = [int(v) for v in self.coordinate2]
        if self.text is not None:
            args["text"] = self.text
        if self.time is not None:
            # Whole seconds are written as ints: shorter to generate, same value.
            t = float(self.time)
            args["time"] = int(t) if t.is_integer() else t
        if self.button is not None:
            args["button"] = self.button
        if self.status is not None:
            args["status"] = self.status
        return args

    @classmethod
    def from_arguments(cls, args: dict) -> "Action":
        """Build an Action from a tool-call `arguments` dict; raise ActionError(reason) if invalid.

        Required per type: click coordinate; long_press coordinate (time optional); swipe coordinate
        and coordinate2; type/key/open/call_user text (a str, may be empty); system_button button
        (Back/Home/Menu/Enter, any case); terminate status (success/failure, any case); wait nothing
        (time optional). Keys a type does not use are ignored.
        """
        if not isinstance(args, dict):
            raise ActionError("bad_arguments")
        kind = args.get("action")
        if kind is None:
            raise ActionError("missing_action")
        if not isinstance(kind, str) or kind not in ACTION_TYPES:
            raise ActionError("unknown_action")
        fields: dict = {"type": kind}
        if kind in POINT_ACTIONS or kind == "swipe":
            fields["coordinate"] = _read_point(args.get("coordinate"), "coordinate")
        if kind == "swipe":
            fields["coordinate2"] = _read_point(args.get("coordinate2"), "coordinate2")
        if kind in TEXT_ACTIONS:
            text = args.get("text")
            if not isinstance(text, str):
                raise ActionError("bad_argument:text")
            fields["text"] = text
        if kind in ("long_press", "wait") and args.get("time") is not None:
            fields["time"] = _read_time(args.get("time"))
        if kind == "system_button":
            fields["button"] = _read_choice(args.get("button"), BUTTONS, "button")
        if kind == "terminate":
            fields["status"] = _read_choice(args.get("status"), STATUSES, "status")
        return cls(**fields)


def _is_number(v) -> bool:
    # bool is an int subclass; `true` is not a coordinate.
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _read_point(value, name: str) -> tuple[int, int]:
    """Two finite numbers within [0, MAX_COORD], rounded to ints; strings are rejected."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ActionError(f"bad_argument:{name}")
    out = []
    for v in value:
        if not _is_number(v):
            raise ActionError(f"bad_argument:{name}")
        try:
            f = float(v)  # a huge int overflows here
        except (OverflowError, ValueError):
            raise ActionError(f"bad_argument:{name}") from None
        if not math.isfinite(f) or f < 0 or f > MAX_COORD:
            raise ActionError(f"bad_argument:{name}")
        out.append(int(round(f)))
    return (out[0], out[1])


def _read_time(value) -> float:
    if not _is_number(value):
        raise ActionError("bad_argument:time")
    try:
        f = float(value)
    except (OverflowError, ValueError):
        raise ActionError("bad_argument:time") from None
    if not math.isfinite(f) or f < 0 or f > MAX_TIME:
        raise ActionError("bad_argument:time")
    return f


def _read_choice(value, choices: tuple[str, ...], name: str) -> str:
    if isinstance(value, str):
        for c in choices:
            if value.strip().casefold() == c.casefold():
                return c
    raise ActionError(f"bad_argument:{name}")


def format_action(action: Action) -> str:
    """Return '<tool_call>{"name": "mobile_use", "arguments": {...}}</tool_call>'."""
    payload = {"name": TOOL_NAME, "arguments": action.to_arguments()}
    return f"<tool_call>{json.dumps(payload, ensure_ascii=False)}</tool_call>"


def format_completion(think: str | None, action: Action) -> str:
    """Return '<think>{think}</think>\\n' + format_action(action); no think block if think is None."""
    call = format_action(action)
    return call if think is None else f"<think>{think}</think>\n{call}"


@dataclass(frozen=True)
class Parsed:
    """What could be read from one completion.

    action: None when no valid action could be read. think: the first complete <think> block's
    text (stripped), or None. format_ok: exactly one non-empty <think>..</think> first (optional when
    parsed with require_think=False), then exactly one <tool_call>..</tool_call> holding a valid
    action, nothing else but whitespace, and at most MAX_CHARS characters. error: a reason code when
    action is None (why) or when format_ok is False (which rule broke); None otherwise.
    """

    action: Action | None
    think: str | None
    format_ok: bool
    error: str | None


def _reject_constant(name: str):
    raise ValueError(f"non-finite JSON constant {name}")


def _blocks(tags: list[re.Match], open_tag: str, close_tag: str) -> list[tuple[int, int]]:
    """(start, end) of each content span between an open tag and the next close tag.

    A second open tag before a close restarts the block (the first open is left unclosed)."""
    spans, start = [], None
    for m in tags:
        if m.group() == open_tag:
            start = m.end()
        elif m.group() == close_tag and start is not None:
            spans.append((start, m.start()))
            start = None
    return spans


def _read_tool_call(payload: str) -> Action:
    """Parse a tool-call JSON payload into an Action; raise ActionError(reason) if invalid."""
    try:
        obj = json.loads(payload, parse_constant=_reject_constant)
    except Exception:  # ValueError, RecursionError on deep nesting, int-size limits
        raise ActionError("bad_json") from None
    if not isinstance(obj, dict):
        raise ActionError("not_object")
    if obj.get("name") != TOOL_NAME:
        raise ActionError("unknown_tool")
    args = obj.get("arguments")
    if not isinstance(args, dict):
        raise ActionError("bad_arguments")
    return Action.from_arguments(args)


def parse_completion(text: str, require_think: bool = True) -> Parsed:
    """Read a completion into a Parsed; never raises, never evaluates anything.

    The action comes from the single complete <tool_call> block wherever it sits (errors:
    "no_tool_call", "multiple_tool_calls", "bad_json", "not_object", "unknown_tool",
    "bad_arguments", "missing_action", "unknown_action", "bad_argument:<field>"). With a valid
    action, a format failure is reported as "too_long", "missing_think", "multiple_think",
    "empty_think", "bad_order" (tool call before think), "unbalanced_tags" or "text_outside_tags".
    A non-str input gives error "not_text".
    """
    try:
        return _parse(text, require_think)
    except Exception as exc:  # defensive: parsing promises never to raise
        return Parsed(None, None, False, f"internal:{type(exc).__name__}")


def _parse(text, require_think: bool) -> Parsed:
    if not isinstance(text, str):
        return Parsed(None, None, False, "not_text")
    too_long = len(text) > MAX_CHARS
    s = text[:MAX_CHARS] if too_long else text
    tags = list(_TAG_RE.finditer(s))
    thinks = _blocks(tags, "<think>", "</think>")
    calls = _blocks(tags, "<tool_call>", "</tool_call>")
    think = s[thinks[0][0] : thinks[0][1]].strip() if thinks else None

    if not calls:
        return Parsed(None, think, False, "no_tool_call")
    if len(calls) > 1:
        return Parsed(None, think, False, "multiple_tool_calls")
    try:
        action = _read_tool_call(s[calls[0][0] : calls[0][1]])
    except ActionError as exc:
        return Parsed(None, think, False, exc.reason)

    error = _format_error(s, tags, thinks, too_long, require_think)
    return Parsed(action, think, error is None, error)


def _format_error(s: str, tags: list[re.Match], thinks: list, too_long: bool, require_think: bool) -> str | None:
    """The first broken format rule for a text holding exactly one tool call, or None."""
    if too_long:
        return "too_long"
    names = [m.group() for m in tags]
    if names.count("<think>") + names.count("</think>") == 0:
        if require_think:
            return "missing_think"
        expected = ["<tool_call>", "</tool_call>"]
    else:
        if len(thinks) > 1:
            return "multiple_think"
        expected = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
    if names != expected:
        if names == ["<tool_call>", "</tool_call>", "<think>", "</think>"]:
            return "bad_order"
        return "unbalanced_tags"
    if len(expected) == 4 and not s[tags[0].end() : tags[1].start()].strip():
        return "empty_think"
    # Only whitespace may sit before, between and after the blocks.
    gaps = [s[: tags[0].start()], s[tags[-1].end() :]]
    if len(expected) == 4:
        gaps.append(s[tags[1].end() : tags[2].start()])
    if any(g.strip() for g in gaps):
        return "text_outside_tags"
    return None


def inquiry_check(think: str | None) -> bool | None:
    """True for "Inquiry check: needed", False for "... not needed" (last one wins), None if absent."""
    if not isinstance(think, str):
        return None
    found = _INQUIRY_RE.findall(think)
    if not found:
        return None
    return not found[-1].lower().startswith("not")


@dataclass(frozen=True)
class Frame:
    """A screen frame and the model frame the processor resizes it to.

    Points map by pixel centres, floor((v + 0.5) * scale), so every in-frame pixel maps to an
    in-frame pixel and the order of coordinates is kept (a point inside a bbox stays inside the
    converted bbox). Points outside the frame are scaled the same way, not clamped.
    """

    screen_w: int
    screen_h: int
    model_w: int
    model_h: int

    def __post_init__(self):
        for name in ("screen_w", "screen_h", "model_w", "model_h"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"Frame.{name} must be a positive int, got {v!r}")

    @classmethod
    def for_screen(cls, screen_w: int, screen_h: int, min_pixels: int, max_pixels: int) -> "Frame":
        """The frame Qwen2-VL's processor gives this screen (transformers' `smart_resize`, factor 28)."""
        # Imported here: transformers is slow to import and only this needs it.
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        h, w = smart_resize(
            int(screen_h), int(screen_w), factor=28, min_pixels=int(min_pixels), max_pixels=int(max_pixels)
        )
        return cls(int(screen_w), int(screen_h), int(w), int(h))

    @staticmethod
    def _map(xy, sx: float, sy: float) -> tuple[int, int]:
        x, y = xy
        return (int(math.floor((x + 0.5) * sx)), int(math.floor((y + 0.5) * sy)))

    def to_model(self, xy) -> tuple[int, int]:
        """Screen point -> model point."""
        return self._map(xy, self.model_w / self.screen_w, self.model_h / self.screen_h)

    def to_screen(self, xy) -> tuple[int, int]:
        """Model point -> screen point."""
        return self._map(xy, self.screen_w / self.model_w, self.screen_h / self.model_h)

    def _bbox(self, bbox, conv) -> list[int]:
        if bbox is None:
            return list(NO_BBOX)
        b = [int(v) for v in bbox]
        if len(b) != 4:
            raise ValueError(f"bbox must have 4 values, got {len(b)}")
        if b == NO_BBOX:
            return list(NO_BBOX)
        return [*conv((b[0], b[1])), *conv((b[2], b[3]))]

    def bbox_to_model(self, bbox) -> list[int]:
        """Screen [x0, y0, x1, y1] -> model; [-1]*4 (and None) stay [-1]*4."""
        return self._bbox(bbox, self.to_model)

    def bbox_to_screen(self, bbox) -> list[int]:
        """Model [x0, y0, x1, y1] -> screen; [-1]*4 (and None) stay [-1]*4."""
        return self._bbox(bbox, self.to_screen)

    def _action(self, a: Action, conv) -> Action:
        changes = {}
        if a.coordinate is not None:
            changes["coordinate"] = conv(a.coordinate)
        if a.coordinate2 is not None:
            changes["coordinate2"] = conv(a.coordinate2)
        return dataclasses.replace(a, **changes) if changes else a

    def action_to_model(self, a: Action) -> Action:
        """The same action with its coordinates converted screen -> model."""
        return self._action(a, self.to_model)

    def action_to_screen(self, a: Action) -> Action:
        """The same action with its coordinates converted model -> screen."""
        return self._action(a, self.to_screen)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def normalize_text(s: str | None) -> str:
    """Casefold, strip and collapse runs of whitespace to one space."""
    return _SPACE_RE.sub(" ", s or "").strip().casefold()


def swipe_direction(a: Action) -> str | None:
    """ "left"/"right"/"up"/"down" by the larger of |dx|, |dy| (ties: vertical); None if no movement."""
    if a.coordinate is None or a.coordinate2 is None:
        return None
    dx = a.coordinate2[0] - a.coordinate[0]
    dy = a.coordinate2[1] - a.coordinate[1]
    if dx == 0 and dy == 0:
        return None
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def has_bbox(bbox) -> bool:
    """True for a usable [x0, y0, x1, y1] (4 numbers, not [-1]*4, x0 <= x1, y0 <= y1)."""
    if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
        return False
    try:
        if not all(_is_number(v) and math.isfinite(v) for v in bbox):
            return False
    except OverflowError:  # an int too large for a float
        return False
    if list(bbox) == NO_BBOX:
        return False
    return bbox[0] <= bbox[2] and bbox[1] <= bbox[3]


def point_in_bbox(xy, bbox) -> bool:
    """Whether point xy lies inside bbox, edges included."""
    return bbox[0] <= xy[0] <= bbox[2] and bbox[1] <= xy[1] <= bbox[3]


def distance_to_bbox(xy, bbox) -> float:
    """Euclidean distance from xy to the nearest point of bbox (0 inside)."""
    dx = max(bbox[0] - xy[0], 0, xy[0] - bbox[2])
    dy = max(bbox[1] - xy[1], 0, xy[1] - bbox[3])
    return math.hypot(dx, dy)


def action_match(
    pred: Action | None, gold: Action, gold_bbox: list[int] | None, *, frame_wh: tuple[int, int] = DEFAULT_SCREEN_WH
) -> tuple[bool, bool]:
    """(type_ok, arg_ok) of a prediction against the gold action, both in ONE frame.

    click/long_press: inside gold_bbox, or within 5% of the frame diagonal (frame_wh, default the
    360x720 screen) of the gold point when gold_bbox is [-1]*4 or None; swipe: same dominant
    direction; type/open/key: normalised text equal; system_button/terminate: equal field;
    wait: always; call_user: non-empty question. arg_ok is False whenever type_ok is.
    """
    if pred is None or gold is None:
        return (False, False)
    if pred.type != gold.type:
        return (False, False)
    kind = gold.type
    if kind in POINT_ACTIONS:
        if pred.coordinate is None:
            return (True, False)
        if has_bbox(gold_bbox):
            return (True, point_in_bbox(pred.coordinate, gold_bbox))
        if gold.coordinate is None:
            return (True, False)
        diag = math.hypot(*frame_wh)
        d = math.dist(pred.coordinate, gold.coordinate)
        return (True, d <= 0.05 * diag)
    if kind == "swipe":
        d = swipe_direction(pred)
        return (True, d is not None and d == swipe_direction(gold))
    if kind in ("type", "open", "key"):
        return (True, normalize_text(pred.text) == normalize_text(gold.text))
    if kind == "system_button":
        return (True, pred.button == gold.button)
    if kind == "terminate":
        return (True, pred.status == gold.status)
    if kind == "wait":
        return (True, True)
    if kind == "call_user":
        return (True, bool(normalize_text(pred.text)))
    return (True, False)


def random_action(
    rng,
    width: int,
    height: int,
    kinds=ACTION_TYPES,
    texts=("hello", "20", "Alice Chen", "yes"),
    apps=("Chat", "Shop", "Wallet"),
    questions=("Should I go ahead?",),
    buttons=("Back", "Home", "Menu", "Enter"),
    statuses=("success", "failure"),
) -> "Action":
    """An action of a type drawn from `kinds` (repeat a kind to weight it) with random arguments drawn
    from the other tuples, points anywhere in a `width` x `height` frame: fuzzing input for the
    environment and the rewards, and the random reference policy (`evaluation.steps.RANDOM_POLICY`).

    Every call draws the kind, then a point (used or not), then what the kind needs; a tuple of one
    draws nothing. So the stream of draws, and a seeded policy's actions, depend only on the arguments."""
    kind = rng.choice(kinds)
    xy = (rng.randrange(width), rng.randrange(height))
    pick = lambda options: options[0] if len(options) == 1 else rng.choice(options)  # noqa: E731
    if kind in ("click", "long_press"):
        return Action(kind, coordinate=xy)
    if kind == "swipe":
        return Action(kind, coordinate=xy, coordinate2=(rng.randrange(width), rng.randrange(height)))
    if kind == "type":
        return Action(kind, text=pick(texts))
    if kind == "key":
        return Action(kind, text="Enter")
    if kind == "open":
        return Action(kind, text=pick(apps))
    if kind == "system_button":
        return Action(kind, button=pick(buttons))
    if kind == "wait":
        return Action(kind, time=1)
    if kind == "terminate":
        return Action(kind, status=pick(statuses))
    return Action("call_user", text=pick(questions))
