"""Reading evaluation runs from disk, filtering step predictions, and the two ipywidgets inspectors.

A run directory is `papermill_runs/<profile>/`; this module reads
`eval/<checkpoint>/step_predictions.jsonl` (required), `eval/<checkpoint>/trajectories.jsonl`
(optional, task-level episodes), `eval/screens/*.png` and `metrics/step_*.json`.
`load_run`, `filter_steps` and `episodes` are plain functions; `Inspector` is the widget app of the
step predictions, `EpisodeInspector` that of the online episodes (drawn by `viz.episode_view`).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ..runs.records import (
    ORDER,
    OUTCOMES,
    PredictionFormatError,
    checkpoint_order,
    inspection_order,
    read_jsonl,
    read_predictions,
)
from . import episode_view as ev
from . import overlays as viz


def _pick(dd, value, what: str, none=None) -> None:
    """Set dropdown `dd` to `value` (None: the dropdown's `none` choice, "all" unless given), refusing a value it
    does not offer in one line; options may be plain values or (label, value) pairs."""
    value = (_ALL if none is None else none) if value is None else value
    values = [o[1] if isinstance(o, tuple) else o for o in dd.options]
    if value not in values:
        raise ValueError(f"{what} {value!r} is not one of {values}")
    dd.value = value


class UnsafePathError(PredictionFormatError):
    """A prediction names a file outside its run folder (absolute, `..`, or a symlink out)."""


@dataclass
class RunData:
    """Everything the inspector and report read from one run directory."""

    run_dir: Path
    preds: list[dict]  # every checkpoint's step predictions, checkpoint order
    checkpoints: list[str]  # values of the records' `checkpoint` field
    trajectories: dict[str, list[dict]] = field(default_factory=dict)  # per checkpoint; may be empty
    metrics: dict[str, dict] = field(default_factory=dict)  # metrics/step_<checkpoint>.json
    _images: dict[str, Image.Image] = field(default_factory=dict, repr=False)
    _boxes: dict | None = field(default=None, repr=False)
    _online: tuple | None = field(default=None, repr=False)

    @property
    def eval_dir(self) -> Path:
        return self.run_dir / "eval"

    def by_id(self, checkpoint: str, pred_id: str) -> dict | None:
        """The prediction of `checkpoint` for step `pred_id`, or None."""
        for p in self.preds:
            if p["checkpoint"] == checkpoint and p["id"] == pred_id:
                return p
        return None

    def online(self) -> dict[str, list[dict]]:
        """The well-formed online episodes of each checkpoint (`episode_view.usable_episodes`)."""
        if self._online is None:
            self._online = ev.usable_episodes(self.trajectories)
        return self._online[0]

    def malformed_episodes(self) -> list[tuple[str, str]]:
        """A (checkpoint, why) pair per episode `online` leaves out."""
        self.online()
        return self._online[1]

    def episode(self, checkpoint: str, task_id: str) -> dict | None:
        """The online episode of `checkpoint` on task `task_id` (with its `checkpoint` set), or None."""
        found = ev.filter_episodes(self.online(), checkpoint=checkpoint)
        return next((ep for ep in found if ep["task_id"] == task_id), None)

    def turn_records(self, episode: dict) -> list[dict]:
        """Every turn of `episode` as `episode_view.turn_record` makes it, gold boxes from this run's steps."""
        if self._boxes is None:
            self._boxes = ev.expert_boxes(self.preds)
        return [ev.turn_record(episode, k, self._boxes) for k in range(len(episode["steps"]))]

    def strip(self, episode: dict):
        """`episode_view.strip_figure` of `episode`, its screenshots read as `screenshot` reads them (a
        missing one or one outside the run folder raises as there)."""
        records = self.turn_records(episode)
        return ev.strip_figure(episode, records, [self.screenshot(r) for r in records])

    def screenshot_path(self, pred: dict) -> Path:
        """Where the step's screenshot lies: `eval/<screenshot>`, which must resolve (symlinks
        followed) inside the run folder; anything else raises UnsafePathError."""
        rel = pred["screenshot"]
        root = self.run_dir.resolve()
        who = f"prediction {pred['id']!r} ({pred['checkpoint']})"
        if "\x00" in rel or Path(rel).is_absolute():
            raise UnsafePathError(
                f"{who}: screenshot {rel!r} is an absolute path; only files inside the run folder {root} are read"
            )
        path = (self.eval_dir / rel).resolve()
        if not path.is_relative_to(root):
            raise UnsafePathError(f"{who}: screenshot {rel!r} resolves to {path}, outside the run folder {root}")
        return path

    def screenshot(self, pred: dict) -> Image.Image:
        """The step's screen-frame screenshot (cached); a missing file names the record, a file
        outside the run folder or not a PNG is refused (UnsafePathError, PredictionFormatError)."""
        from PIL import UnidentifiedImageError

        rel = pred["screenshot"]
        if rel not in self._images:
            path = self.screenshot_path(pred)
            if not path.is_file():
                raise FileNotFoundError(
                    f"screenshot {path} of prediction {pred['id']!r} ({pred['checkpoint']}) does not exist"
                )
            try:
                with Image.open(path, formats=["PNG"]) as im:
                    self._images[rel] = im.convert("RGB")
            except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
                raise PredictionFormatError(
                    f"screenshot {path} of prediction {pred['id']!r} "
                    f"({pred['checkpoint']}) is not a readable PNG "
                    f"({' '.join(str(exc).split())})"
                ) from None
        return self._images[rel]


def compare_pair(checkpoints) -> tuple[str | None, str | None]:
    """The two checkpoints to show side by side: (sft_weak, grpo_weak) when both exist, else the
    two latest trained ones in training order (earlier first), else the first two in
    `checkpoint_order` (trained ones first). A lone checkpoint gives (it, None); none (None, None).
    """
    ordered = checkpoint_order(checkpoints)
    if "sft_weak" in ordered and "grpo_weak" in ordered:
        return "sft_weak", "grpo_weak"
    trained = [n for n in ordered if n in ORDER]
    pick = trained[-2:] if len(trained) >= 2 else (trained + [n for n in ordered if n not in ORDER])[:2]
    pick += [None] * (2 - len(pick))
    return pick[0], pick[1]


def episode_checkpoints(run: RunData) -> list[str]:
    """The checkpoints with online episodes, in `inspection_order` (trained ones first)."""
    return inspection_order([name for name, eps in run.online().items() if eps])


def episode_pair(run: RunData) -> tuple[str | None, str | None]:
    """The two checkpoints the episode inspector opens on: the first (in `episode_checkpoints` order) with a
    failed episode, else the first; beside it the expert, whose episode shows the way, else the next one."""
    names = episode_checkpoints(run)
    if not names:
        return None, None
    failing = [n for n in names if any(not ep["success"] for ep in run.online()[n])]
    first = (failing or names)[0]
    others = [n for n in names if n != first]
    return first, "expert" if "expert" in others else (others[0] if others else None)


def episode_table(run: RunData):
    """`episode_view.kind_table` of the run: per checkpoint with episodes, its failed ones by the kind of their
    first wrong step, and how many came back to the path after it."""
    return ev.kind_table(run.online(), episode_checkpoints(run))


def load_run(run_dir: str | Path) -> RunData:
    """Read every eval/<checkpoint>/step_predictions.jsonl (and trajectories.jsonl, metrics) of a run.

    Checkpoints (and their predictions) come in `checkpoint_order`: training order, then reference
    policies, then the rest by name. Raises FileNotFoundError when the run has no predictions
    file, PredictionFormatError when they hold no record or a malformed one (file, line, field).
    """
    run_dir = Path(run_dir)
    eval_dir = run_dir / "eval"
    found = {path.parent.name: path for path in eval_dir.glob("*/step_predictions.jsonl")}
    files = [found[name] for name in checkpoint_order(found)]
    if not files:
        raise FileNotFoundError(f"no eval/<checkpoint>/step_predictions.jsonl under {run_dir}")
    preds: list[dict] = []
    checkpoints: list[str] = []
    trajectories: dict[str, list[dict]] = {}
    for path in files:
        recs = read_predictions(path)
        preds.extend(recs)
        for rec in recs:
            if rec["checkpoint"] not in checkpoints:
                checkpoints.append(rec["checkpoint"])
        traj = path.parent / "trajectories.jsonl"
        if traj.is_file():
            # Task-level episodes: kept as written; only their JSON validity is checked here.
            name = recs[0]["checkpoint"] if recs else path.parent.name
            trajectories[name] = [r for _, r in read_jsonl(traj)]
    if not preds:
        raise PredictionFormatError(f"the step_predictions.jsonl files under {eval_dir} hold no records")
    # The records' own `checkpoint` field names them; order those too (a folder may be renamed).
    checkpoints = checkpoint_order(checkpoints)
    rank = {c: i for i, c in enumerate(checkpoints)}
    preds.sort(key=lambda p: rank[p["checkpoint"]])  # stable: file order within a checkpoint
    metrics = {}
    for path in sorted((run_dir / "metrics").glob("step_*.json")):
        try:
            metrics[path.stem[len("step_") :]] = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise PredictionFormatError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    metrics = {name: metrics[name] for name in checkpoint_order(metrics)}
    return RunData(run_dir=run_dir, preds=preds, checkpoints=checkpoints, trajectories=trajectories, metrics=metrics)


def filter_steps(
    preds: list[dict],
    checkpoint: str | None = None,
    category: str | None = None,
    subcategory: str | None = None,
    outcome: str | None = None,
) -> list[dict]:
    """Predictions matching every given field (None matches anything), in input order."""
    wanted = {"checkpoint": checkpoint, "category": category, "subcategory": subcategory, "outcome": outcome}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    return [p for p in preds if all(p[k] == v for k, v in wanted.items())]


def episodes(preds: list[dict]) -> list[str]:
    """Distinct task ids of `preds`, in order of first appearance."""
    return list(dict.fromkeys(p["task_id"] for p in preds))


def episode_steps(preds: list[dict], checkpoint: str, task_id: str) -> list[dict]:
    """All predictions of one checkpoint for one task, sorted by step."""
    return sorted(
        (p for p in preds if p["checkpoint"] == checkpoint and p["task_id"] == task_id), key=lambda p: p["step"]
    )


def outcome_options(preds: list[dict]) -> list[str]:
    """Outcomes present in `preds`: missed_inquiry first when present, then OUTCOMES order."""
    present = {p["outcome"] for p in preds}
    order = ("missed_inquiry",) + tuple(o for o in OUTCOMES if o != "missed_inquiry")
    return [o for o in order if o in present]


_UNSET = object()
_ALL = "(all)"  # dropdown value meaning "no filter" (ipywidgets shows a None value as blank)
_NONE_B = "—"  # checkpoint B dropdown value meaning "no side-by-side"


def _val(value: str) -> str | None:
    return None if value in (_ALL, _NONE_B) else value


def _axes(layout) -> set[str]:
    """The names of the axes a plotly layout sets ("xaxis", "yaxis2", ...)."""
    return {key for key in layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", key)}


# ipywidgets' default label column (~80 px) cuts "checkpoint A" and "subcategory" short
_LABEL = dict(style={"description_width": "95px"})


def _check_choices(ckpts: list[str], **chosen) -> None:
    """Refuse, in one line, a checkpoint asked for that the run does not hold."""
    for name, value in chosen.items():
        if value is not None and value not in ckpts:
            raise ValueError(f"{name} {value!r} is not one of {ckpts}")


def _checkpoint_dropdowns(ckpts: list[str], checkpoint: str, checkpoint_b: str | None):
    """The checkpoint A and checkpoint B dropdowns both inspectors open with (B: none, or a second strip)."""
    import ipywidgets as w

    a = w.Dropdown(options=ckpts, value=checkpoint, description="checkpoint A", **_LABEL)
    b = w.Dropdown(
        options=[_NONE_B] + ckpts,
        value=_NONE_B if checkpoint_b is None else checkpoint_b,
        description="checkpoint B",
        **_LABEL,
    )
    return a, b


class _WidgetSlots:
    """What both widget apps share: one update chain per user change, and output widgets kept per slot."""

    _w = None  # the ipywidgets module, set by the app
    _busy = False
    _slots: dict

    def _guarded(self, *steps) -> None:
        # Programmatic changes fire observers too; one user change must run one update chain.
        if self._busy:
            return
        self._busy = True
        try:
            for step in steps:
                step()
        finally:
            self._busy = False

    def _figure_widget(self, slot: str, fig):
        """The widget of `slot` ("strip", "A", "B") showing `fig`.

        One FigureWidget per slot, updated in place: each new FigureWidget ships plotly.js to the
        browser (about 5 MB over the kernel's websocket, and again in a saved notebook), so a new
        one per slider move would make the app crawl. Without anywidget, FigureWidget cannot
        render; a static figure goes into the slot's Output widget instead.
        """
        widget = self._slots.get(slot)
        try:
            import anywidget  # noqa: F401
        except ImportError:
            if widget is None:
                widget = self._slots[slot] = self._w.Output()
            widget.clear_output(wait=True)
            with widget:
                fig.show()
            return widget
        import plotly.graph_objects as go

        if widget is None:
            widget = self._slots[slot] = go.FigureWidget(fig)
            return widget
        # Every figure of a slot sets the same top-level layout keys, so this relayout replaces
        # all of them; the traces are swapped whole. A turn strip has an axis pair per turn: a
        # relayout keeps the axes a longer episode left behind, so those are hidden.
        fig.update_layout({key: {"visible": False} for key in _axes(widget.layout) - _axes(fig.layout)})
        widget.layout = fig.layout
        widget.data = ()
        widget.add_traces(list(fig.data))
        return widget

    def _html(self, slot: str, value: str, width: str | None = None):
        """The slot's HTML widget (one per slot, kept), showing `value`."""
        widget = self._slots.get(slot)
        if widget is None:
            widget = self._slots[slot] = self._w.HTML()
        widget.value = value
        if width is not None:
            widget.layout.width = width
        return widget


class Inspector(_WidgetSlots):
    """Widget app: pick checkpoint(s), filters, an episode and a step; see overlays and text.

    Driven headless through `select(...)`, `state` and `current` / `current_b`; `widget` is the
    top-level ipywidgets container and `show()` displays it.

    The episode list holds the tasks with at least one step matching the filters; the step slider
    runs over every step of the chosen episode (for context). After a checkpoint or filter change
    the shown step stays when it still matches, else moves to the episode's first matching step.
    Checkpoint B, when set, shows the step with the same id side by side.

    Checkpoint A starts at `checkpoint`, else at the first checkpoint (in run order) with a missed
    inquiry, else the first; B at `checkpoint_b` (None: no side-by-side). The outcome filter
    starts at missed_inquiry when A has one.
    """

    def __init__(
        self,
        run_dir: str | Path | RunData,
        frame: str = "screen",
        checkpoint: str | None = None,
        checkpoint_b: str | None = None,
    ):
        import ipywidgets as w

        self.run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
        self._w = w
        self._busy = False
        # the trained checkpoints first, then the starts and the references (`runs.records.inspection_order`)
        ckpts = inspection_order(self.run.checkpoints)
        _check_choices(ckpts, checkpoint=checkpoint, checkpoint_b=checkpoint_b)
        if checkpoint is None:  # the first with a missed inquiry, else the first with any failure
            missed = {p["checkpoint"] for p in self.run.preds if p["outcome"] == "missed_inquiry"}
            failed = {p["checkpoint"] for p in self.run.preds if p["outcome"] != "correct"}
            checkpoint = next((c for c in ckpts if c in missed), next((c for c in ckpts if c in failed), ckpts[0]))
        label = _LABEL
        self.checkpoint_dd, self.checkpoint_b_dd = _checkpoint_dropdowns(ckpts, checkpoint, checkpoint_b)
        self.category_dd = w.Dropdown(options=[_ALL], value=_ALL, description="category", **label)
        self.subcategory_dd = w.Dropdown(options=[_ALL], value=_ALL, description="subcategory", **label)
        self.outcome_dd = w.Dropdown(options=[_ALL], value=_ALL, description="outcome", **label)
        self.episode_dd = w.Dropdown(options=[], description="episode", **label)
        self.frame_tb = w.ToggleButtons(
            options=["screen", "model"],
            value=frame,
            description="frame",
            style={"description_width": "60px", "button_width": "80px"},
        )
        self.step_slider = w.IntSlider(
            min=0, max=0, value=0, description="step #", continuous_update=False, style={"description_width": "60px"}
        )
        self.play = w.Play(min=0, max=0, interval=1200, description="play")
        w.jslink((self.play, "value"), (self.step_slider, "value"))
        self.step_label = w.HTML()
        self.strip_box = w.Box()
        # Rows that wrap instead of squeezing: a squeezed box clips its figures and lets the text
        # panels cover checkpoint B's (a narrow window puts B below A, the panels below both).
        self.fig_box = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self.text_box = w.HBox()
        self.figure_a = self.figure_b = self.strip = None
        self._slots: dict = {}  # kept output widgets by slot name, see _figure_widget
        self._steps: list[dict] = []  # every step of the current episode in checkpoint A

        self._fill_filter_options(keep=False)
        self._fill_episodes()
        self._render()
        self.checkpoint_dd.observe(
            lambda _c: self._guarded(lambda: self._fill_filter_options(keep=True), self._fill_episodes, self._render),
            names="value",
        )
        self.category_dd.observe(
            lambda _c: self._guarded(self._fill_subcategories, self._fill_episodes, self._render), names="value"
        )
        for dd in (self.subcategory_dd, self.outcome_dd):
            dd.observe(lambda _c: self._guarded(self._fill_episodes, self._render), names="value")
        self.episode_dd.observe(
            lambda _c: self._guarded(lambda: self._fill_steps(keep=False), self._render), names="value"
        )
        for dd in (self.checkpoint_b_dd, self.frame_tb, self.step_slider):
            dd.observe(lambda _c: self._guarded(self._render), names="value")

        controls = w.VBox(
            [
                w.HBox([self.checkpoint_dd, self.checkpoint_b_dd, self.frame_tb]),
                w.HBox([self.category_dd, self.subcategory_dd, self.outcome_dd]),
                w.HBox([self.episode_dd, self.play, self.step_slider, self.step_label]),
            ]
        )
        self.widget = w.VBox(
            [controls, self.strip_box, w.HBox([self.fig_box, self.text_box], layout=w.Layout(flex_flow="row wrap"))]
        )

    # ----- state -------------------------------------------------------------------------------
    def _preds_a(self) -> list[dict]:
        return filter_steps(self.run.preds, checkpoint=self.checkpoint_dd.value)

    def _filtered(self) -> list[dict]:
        return filter_steps(
            self._preds_a(),
            category=_val(self.category_dd.value),
            subcategory=_val(self.subcategory_dd.value),
            outcome=_val(self.outcome_dd.value),
        )

    @property
    def current(self) -> dict | None:
        """The shown prediction of checkpoint A, or None when nothing matches."""
        return self._steps[self.step_slider.value] if self._steps else None

    @property
    def current_b(self) -> dict | None:
        """The prediction of checkpoint B with the shown step's id, or None."""
        cur, b = self.current, _val(self.checkpoint_b_dd.value)
        return self.run.by_id(b, cur["id"]) if cur is not None and b is not None else None

    @property
    def state(self) -> dict:
        """Current selections (None = all / unset), the listed episodes and the shown ids."""
        cur, cur_b = self.current, self.current_b
        return {
            "checkpoint": self.checkpoint_dd.value,
            "checkpoint_b": _val(self.checkpoint_b_dd.value),
            "category": _val(self.category_dd.value),
            "subcategory": _val(self.subcategory_dd.value),
            "outcome": _val(self.outcome_dd.value),
            "episode": self.episode_dd.value,
            "episodes": list(self.episode_dd.options),
            "step": cur["step"] if cur else None,
            "frame": self.frame_tb.value,
            "id": cur["id"] if cur else None,
            "id_b": cur_b["id"] if cur_b else None,
        }

    # ----- updates -----------------------------------------------------------------------------
    @staticmethod
    def _set_options(dd, values: list[str], value: str) -> None:
        dd.options = [_ALL] + values
        dd.value = value if value in values else _ALL

    def _fill_filter_options(self, keep: bool) -> None:
        preds = self._preds_a()
        self._set_options(
            self.category_dd, sorted({p["category"] for p in preds}), self.category_dd.value if keep else _ALL
        )
        self._fill_subcategories(keep=keep)
        outcomes = outcome_options(preds)
        default = "missed_inquiry" if "missed_inquiry" in outcomes else _ALL
        self._set_options(self.outcome_dd, outcomes, self.outcome_dd.value if keep else default)

    def _fill_subcategories(self, keep: bool = False) -> None:
        preds = filter_steps(self._preds_a(), category=_val(self.category_dd.value))
        self._set_options(
            self.subcategory_dd, sorted({p["subcategory"] for p in preds}), self.subcategory_dd.value if keep else _ALL
        )

    def _fill_episodes(self) -> None:
        tasks = episodes(self._filtered())
        old = self.episode_dd.value
        self.episode_dd.options = tasks
        self.episode_dd.value = old if old in tasks else (tasks[0] if tasks else None)
        self._fill_steps(keep=self.episode_dd.value == old)

    def _fill_steps(self, keep: bool) -> None:
        """Load the episode's steps; keep the shown step number if asked and still matching."""
        old = self.current["step"] if keep and self.current else None
        task = self.episode_dd.value
        self._steps = episode_steps(self.run.preds, self.checkpoint_dd.value, task) if task else []
        self.step_slider.max = self.play.max = max(len(self._steps) - 1, 0)
        matching = {p["id"] for p in self._filtered()}
        idx = [i for i, p in enumerate(self._steps) if p["id"] in matching]
        kept = [i for i in idx if self._steps[i]["step"] == old]
        self.step_slider.value = (kept or idx or [0])[0]

    def select(
        self,
        checkpoint=_UNSET,
        checkpoint_b=_UNSET,
        category=_UNSET,
        subcategory=_UNSET,
        outcome=_UNSET,
        episode=_UNSET,
        step=_UNSET,
        frame=_UNSET,
    ) -> dict:
        """Set the given selections in the order listed and return `state`.

        None means "all" for the filters and "no side-by-side" for checkpoint_b; `step` is a step
        number of the chosen episode. A value not on offer raises ValueError.
        """

        self._busy = True
        try:
            if checkpoint is not _UNSET:
                _pick(self.checkpoint_dd, checkpoint, "checkpoint")
                self._fill_filter_options(keep=True)
            if checkpoint_b is not _UNSET:
                _pick(self.checkpoint_b_dd, checkpoint_b, "checkpoint_b", none=_NONE_B)
            if category is not _UNSET:
                _pick(self.category_dd, category, "category")
                self._fill_subcategories()
            if subcategory is not _UNSET:
                _pick(self.subcategory_dd, subcategory, "subcategory")
            if any(v is not _UNSET for v in (checkpoint, category, subcategory, outcome)):
                if outcome is not _UNSET:
                    _pick(self.outcome_dd, outcome, "outcome")
                self._fill_episodes()
            if episode is not _UNSET:
                _pick(self.episode_dd, episode, "episode")
                self._fill_steps(keep=False)
            if step is not _UNSET:
                numbers = [p["step"] for p in self._steps]
                if step not in numbers:
                    raise ValueError(f"step {step!r} is not one of {numbers}")
                self.step_slider.value = numbers.index(step)
            if frame is not _UNSET:
                _pick(self.frame_tb, frame, "frame")
            self._render()
        finally:
            self._busy = False
        return self.state

    # ----- rendering ---------------------------------------------------------------------------
    def _render(self) -> None:
        cur = self.current
        self.figure_a = self.figure_b = self.strip = None
        if cur is None:
            self.step_label.value = "<i>no step matches these filters</i>"
            self.fig_box.children, self.strip_box.children, self.text_box.children = (), (), ()
            return
        self.step_label.value = (
            f"step {cur['step']} ({self.step_slider.value + 1}/{len(self._steps)}) · "
            f"<b style='color:{viz.OUTCOME_COLORS[cur['outcome']]}'>{cur['outcome']}</b>"
        )
        try:
            shots = [self.run.screenshot(p) for p in self._steps]
            self.strip = viz.trajectory_strip(self._steps, shots, highlight_step=cur["step"])
            self.strip_box.children = (self._figure_widget("strip", self.strip),)
        except FileNotFoundError as exc:
            self.strip_box.children = (self._html("strip_msg", f"<pre>{html.escape(str(exc))}</pre>"),)
        b_name = _val(self.checkpoint_b_dd.value)
        shown = [("A", cur)] + ([("B", self.current_b)] if b_name is not None else [])
        figs, texts = [], []
        for side, pred in shown:
            if pred is None:
                figs.append(
                    self._html(
                        f"{side}_msg", f"<i>checkpoint {html.escape(b_name)} has no step {html.escape(cur['id'])}</i>"
                    )
                )
                continue
            try:
                fig = viz.step_figure(pred, self.run.screenshot(pred), frame=self.frame_tb.value)
            except FileNotFoundError as exc:
                figs.append(self._html(f"{side}_msg", f"<pre>{html.escape(str(exc))}</pre>"))
            else:
                setattr(self, "figure_a" if side == "A" else "figure_b", fig)
                figs.append(self._figure_widget(side, fig))
            texts.append(self._html(f"{side}_text", viz.step_details_html(pred), width="420px" if b_name else "560px"))
        self.fig_box.children = tuple(figs)
        self.text_box.children = tuple(texts)

    def show(self) -> None:
        """Display the app in the running notebook."""
        from IPython.display import display

        display(self.widget)


class EpisodeInspector(_WidgetSlots):
    """Widget app over a run's online episodes: pick a checkpoint, a sub-category, a kind of failure (the kind of
    the first wrong step, `evaluation.failures.KINDS`, or "succeeded") and an episode; see its turn strip.

    Each turn shows its screenshot with the gold box and point, the predicted point (or the typed text, the
    opened app under it), an inquiry badge where the agent asked or an ask was due (with the user's reply),
    and under it the reasoning and the raw output; the first wrong step and the turn that came back to the
    path are marked (`episode_view.strip_figure`). The episode list holds checkpoint A's episodes that
    match the filters, failed ones first. Checkpoint B, when set, shows its episode on the same task under
    A's, turn under turn: the strips are wider than a screen, so stacked they scroll as one and compare turn by
    turn, where side by side each would show a turn or two.

    Driven headless through `select(...)` and `state`; `figure_a` / `figure_b` are the shown strips, `widget`
    the top-level container and `show()` displays it. Checkpoint A starts at `checkpoint`, else at the first
    checkpoint (trained ones first) with a failed episode.
    """

    def __init__(self, run_dir: str | Path | RunData, checkpoint: str | None = None, checkpoint_b: str | None = None):
        import ipywidgets as w

        self.run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
        self._w = w
        self._slots: dict = {}
        ckpts = episode_checkpoints(self.run)
        if not ckpts:
            raise ValueError(f"{self.run.run_dir} has no online episodes (eval/<checkpoint>/trajectories.jsonl)")
        _check_choices(ckpts, checkpoint=checkpoint, checkpoint_b=checkpoint_b)
        checkpoint = checkpoint or episode_pair(self.run)[0]
        label = _LABEL
        self.checkpoint_dd, self.checkpoint_b_dd = _checkpoint_dropdowns(ckpts, checkpoint, checkpoint_b)
        self.subcategory_dd = w.Dropdown(options=[_ALL], value=_ALL, description="subcategory", **label)
        self.kind_dd = w.Dropdown(options=[_ALL], value=_ALL, description="failure kind", **label)
        self.episode_dd = w.Dropdown(options=[], description="episode", layout=w.Layout(width="560px"), **label)
        self.count_label = w.HTML()
        self.box_a, self.box_b = w.VBox(), w.VBox()
        self.figure_a = self.figure_b = None

        self._fill_filter_options(keep=False)
        self._fill_episodes()
        self._render()
        self.checkpoint_dd.observe(
            lambda _c: self._guarded(lambda: self._fill_filter_options(keep=True), self._fill_episodes, self._render),
            names="value",
        )
        for dd in (self.subcategory_dd, self.kind_dd):
            dd.observe(lambda _c: self._guarded(self._fill_episodes, self._render), names="value")
        for dd in (self.episode_dd, self.checkpoint_b_dd):
            dd.observe(lambda _c: self._guarded(self._render), names="value")
        controls = w.VBox(
            [
                w.HBox([self.checkpoint_dd, self.checkpoint_b_dd]),
                w.HBox([self.subcategory_dd, self.kind_dd]),
                w.HBox([self.episode_dd, self.count_label]),
            ]
        )
        self.widget = w.VBox([controls, self.box_a, self.box_b])

    # ----- state -------------------------------------------------------------------------------
    def _listed(self) -> list[dict]:
        return ev.filter_episodes(
            self.run.online(),
            checkpoint=self.checkpoint_dd.value,
            subcategory=_val(self.subcategory_dd.value),
            kind=_val(self.kind_dd.value),
        )

    @property
    def current(self) -> dict | None:
        """Checkpoint A's shown episode, or None when none matches the filters."""
        task = self.episode_dd.value
        return self.run.episode(self.checkpoint_dd.value, task) if task is not None else None

    @property
    def current_b(self) -> dict | None:
        """Checkpoint B's episode on the shown task, or None."""
        b, task = _val(self.checkpoint_b_dd.value), self.episode_dd.value
        return self.run.episode(b, task) if b is not None and task is not None else None

    @property
    def state(self) -> dict:
        """Current selections (None = all / unset), the listed task ids and what the shown episodes say."""
        shown = {
            side: ev.episode_summary(ep) if ep else None for side, ep in (("a", self.current), ("b", self.current_b))
        }
        return {
            "checkpoint": self.checkpoint_dd.value,
            "checkpoint_b": _val(self.checkpoint_b_dd.value),
            "subcategory": _val(self.subcategory_dd.value),
            "kind": _val(self.kind_dd.value),
            "episode": self.episode_dd.value,
            "episodes": [value for _, value in self.episode_dd.options],
            "shown": shown["a"],
            "shown_b": shown["b"],
        }

    # ----- updates -----------------------------------------------------------------------------
    def _fill_filter_options(self, keep: bool) -> None:
        eps = ev.filter_episodes(self.run.online(), checkpoint=self.checkpoint_dd.value)
        subs = sorted({ep["subcategory"] for ep in eps})
        kinds = [k for k in ev.KIND_CHOICES if k in {ev.episode_kind(ep) for ep in eps}]
        for dd, values in ((self.subcategory_dd, subs), (self.kind_dd, kinds)):
            old = dd.value if keep else _ALL
            dd.options = [_ALL] + values
            dd.value = old if old in values else _ALL

    def _fill_episodes(self) -> None:
        listed = self._listed()
        old = self.episode_dd.value
        self.episode_dd.options = [(self._label(ep), ep["task_id"]) for ep in listed]
        tasks = [ep["task_id"] for ep in listed]
        self.episode_dd.value = old if old in tasks else (tasks[0] if tasks else None)
        failed = sum(not ep["success"] for ep in listed)
        left_out = len(self.run.malformed_episodes())
        self.count_label.value = f"{len(listed)} episode(s), {failed} failed" + (
            f"; {left_out} malformed one(s) left out (see `run.malformed_episodes()`)" if left_out else ""
        )

    @staticmethod
    def _label(episode: dict) -> str:
        s = ev.episode_summary(episode)
        where = f" at turn {s['first_wrong']}" if s["first_wrong"] is not None and not s["success"] else ""
        return f"{s['task_id']} · {s['subcategory']} · {s['kind']}{where}"

    def select(self, checkpoint=_UNSET, checkpoint_b=_UNSET, subcategory=_UNSET, kind=_UNSET, episode=_UNSET) -> dict:
        """Set the given selections in the order listed and return `state`; None means "all" for the filters
        and "no second strip" for checkpoint_b; `episode` is a task id. A value not on offer raises ValueError."""

        self._busy = True
        try:
            if checkpoint is not _UNSET:
                _pick(self.checkpoint_dd, checkpoint, "checkpoint")
                self._fill_filter_options(keep=True)
            if checkpoint_b is not _UNSET:
                _pick(self.checkpoint_b_dd, checkpoint_b, "checkpoint_b", none=_NONE_B)
            if subcategory is not _UNSET:
                _pick(self.subcategory_dd, subcategory, "subcategory")
            if kind is not _UNSET:
                _pick(self.kind_dd, kind, "kind")
            if any(v is not _UNSET for v in (checkpoint, subcategory, kind)):
                self._fill_episodes()
            if episode is not _UNSET:
                _pick(self.episode_dd, episode, "episode")
            self._render()
        finally:
            self._busy = False
        return self.state

    # ----- rendering ---------------------------------------------------------------------------
    def _strip_box(self, side: str, episode: dict | None, name: str | None) -> tuple:
        """The header, and the strip figure with the turns' text under it in one scrolling box."""
        if episode is None:
            task = self.episode_dd.value
            why = "no episode matches these filters" if task is None else f"{name} has no episode on task {task}"
            return (self._html(f"{side}_head", f"<i>{html.escape(why)}</i>"),)
        head = self._html(f"{side}_head", ev.episode_header_html(episode))
        try:
            fig = self.run.strip(episode)
        except (FileNotFoundError, PredictionFormatError) as exc:
            return head, self._html(f"{side}_msg", f"<pre>{html.escape(str(exc))}</pre>")
        setattr(self, "figure_a" if side == "A" else "figure_b", fig)
        width = int(fig.layout.width)
        text = self._html(f"{side}_turns", ev.turns_html(episode, width // len(episode["steps"])), f"{width}px")
        strip = self._figure_widget(side, fig)
        inner = self._slots.setdefault(f"{side}_inner", self._w.VBox())
        inner.children = (strip, text)
        inner.layout.width, inner.layout.flex = f"{width}px", "none"
        scroller = self._slots.setdefault(f"{side}_scroll", self._w.Box(layout=self._w.Layout(overflow="auto")))
        scroller.children = (inner,)
        return head, scroller

    def _render(self) -> None:
        self.figure_a = self.figure_b = None
        self.box_a.children = self._strip_box("A", self.current, self.checkpoint_dd.value)
        b = _val(self.checkpoint_b_dd.value)
        self.box_b.children = () if b is None else self._strip_box("B", self.current_b, b)

    def show(self) -> None:
        """Display the app in the running notebook."""
        from IPython.display import display

        display(self.widget)
