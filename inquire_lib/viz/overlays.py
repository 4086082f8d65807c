"""Plotly figures of step predictions: overlays on screenshots, episode strips, outcome summaries.

Every builder here is a pure function of prediction records (the `step_predictions.jsonl` schema)
and PIL images; nothing reads the disk. `save_figure` is the one writer.

Gold and predicted actions in a prediction are in the SCREEN frame. `step_figure(frame="model")`
redraws them on the image as the model saw it, scaled by the record's `frame` sizes. That scale is
a drawing scale in floats, so marks sit exactly where the screen point lands on the resized image;
integer conversion of actions stays in `inquire_lib.agent.actions.Frame`.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from PIL import Image

from ..runs.paths import atomic_path
from ..runs.records import FAILURES, NO_BBOX, OUTCOMES

OUTCOME_COLORS: dict[str, str] = {
    "correct": "#2E7D32",
    "missed_inquiry": "#D32F2F",
    "needless_inquiry": "#F57C00",
    "wrong_type": "#7B1FA2",
    "wrong_argument": "#1565C0",
    "unparseable": "#616161",
}
# One colour per checkpoint in every figure, the report and the inspector (the outcome colours above
# are for outcomes only). Trained checkpoints darken along the recipe; references are greys.
CHECKPOINT_COLORS: dict[str, str] = {
    "untrained": "#9E9E9E",
    "base_agent": "#6D4C41",
    "sft_weak": "#80CBC4",
    "sft_full": "#00897B",
    "sft_dagger": "#FFB300",
    "sft_dagger_r1": "#F9A825",
    "sft_dagger_r2": "#EF6C00",
    "sft_more": "#7CB342",
    "grpo_weak": "#9FA8DA",
    "grpo_full": "#3949AB",
    "grpo_task": "#C2185B",
    "expert": "#212121",
    "always_act": "#BDBDBD",
    "always_ask": "#757575",
    "random": "#E0E0E0",
}
# names outside the recipe (ablation points, synthetic runs) get one of these, by a stable hash: saturated
# colours none of the fixed ones above uses, and no grey (greys are the references')
_EXTRA_COLORS = (
    "#E53935",
    "#1E88E5",
    "#43A047",
    "#8E24AA",
    "#FB8C00",
    "#00ACC1",
    "#D81B60",
    "#5E35B1",
    "#C0CA33",
    "#6D9EEB",
    "#FF7043",
    "#26A69A",
    "#AB47BC",
    "#827717",
    "#0D47A1",
    "#B71C1C",
)


def _lighter(colour: str, share: float) -> str:
    """`colour` mixed with white by `share` (0: itself)."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * share):02X}" for c in rgb)


def checkpoint_color(name: str) -> str:
    """The colour of checkpoint `name`, the same in every figure, the report and the inspector: fixed for the
    recipe's checkpoints and the references (greys); a further training seed of a stage (`grpo_weak_s1`)
    is its stage's colour, lighter with each seed; any other name one of `_EXTRA_COLORS` by a CRC of the
    name (the same in every process, unlike `hash`)."""
    import re
    import zlib

    if name in CHECKPOINT_COLORS:
        return CHECKPOINT_COLORS[name]
    seeded = re.fullmatch(r"(.+)_s(\d+)", name)
    if seeded and seeded.group(1) in CHECKPOINT_COLORS:
        return _lighter(CHECKPOINT_COLORS[seeded.group(1)], min(0.6, 0.25 * int(seeded.group(2))))
    return _EXTRA_COLORS[zlib.crc32(name.encode()) % len(_EXTRA_COLORS)]


# Gold marks use one colour found nowhere else, so they stand out on any outcome.
GOLD_COLOR = "#FFD600"

_FIG_HEIGHT = 760  # pixels; width follows the frame's aspect ratio
_MARGIN = dict(l=40, r=20, t=60, b=80)
_POINT_ACTIONS = ("click", "long_press")


def _esc(text: object) -> str:
    """Escape untrusted text for plotly annotation/title markup (which reads <br>, <b>, ...)."""
    return html.escape(str(text), quote=False)


# The plot area is about 310 px wide at any frame (fixed height, 1:2 screen); an 11 px font
# fits about 46 characters a line inside the badge's padding.
_BADGE_CHARS = 46


def _wrap(text: str, width: int = _BADGE_CHARS, max_lines: int = 4) -> str:
    """Escape and wrap text into at most `max_lines` plotly lines joined by <br>."""
    lines = textwrap.wrap(str(text), width=width) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 1] + "…"
    return "<br>".join(_esc(line) for line in lines)


def frame_size(pred: dict, frame: str) -> tuple[int, int]:
    """Width and height of the record's `screen` or `model` frame."""
    if frame not in ("screen", "model"):
        raise ValueError(f"frame must be 'screen' or 'model', got {frame!r}")
    f = pred["frame"]
    return (int(f["screen_w"]), int(f["screen_h"])) if frame == "screen" else (int(f["model_w"]), int(f["model_h"]))


def _scale(pred: dict, frame: str) -> tuple[float, float]:
    """Multipliers taking screen-frame pixels to the given frame (1.0 for the screen frame)."""
    if frame == "screen":
        return 1.0, 1.0
    f = pred["frame"]
    return f["model_w"] / f["screen_w"], f["model_h"] / f["screen_h"]


def _xy(point, sx: float, sy: float) -> tuple[float, float]:
    return point[0] * sx, point[1] * sy


def action_text(args: dict | None, sx: float = 1.0, sy: float = 1.0) -> str:
    """One-line plain-text summary of an action: coordinates scaled by (sx, sy), texts cut to 24 chars."""
    if args is None:
        return "none"
    parts = [str(args.get("action", "?"))]
    for key in ("coordinate", "coordinate2"):
        if key in args and isinstance(args[key], (list, tuple)) and len(args[key]) == 2:
            x, y = _xy(args[key], sx, sy)
            parts.append(("→ " if key == "coordinate2" else "") + f"({x:.0f}, {y:.0f})")
    for key in ("text", "button", "status", "time"):
        if key in args and args[key] is not None:
            value = args[key]
            if isinstance(value, str):
                value = json.dumps(value if len(value) <= 24 else value[:23] + "…", ensure_ascii=False)
            parts.append(f"{key}={value}")
    return " ".join(parts)


def badge_text(pred: dict) -> str:
    """Plotly-markup text of the inquiry badge: required or not and why, and the model's question."""
    if pred["inquiry_required"]:
        head = "<b>Inquiry required</b>"
        why = f"{_esc(pred['category'])} / {_esc(pred['subcategory'])}"
        lines = [head, why]
        if pred.get("inquiry_reason"):
            # wrapped with its label, so that the label's width counts on the first line
            lines.append(_wrap("reason: " + pred["inquiry_reason"], max_lines=3))
    else:
        lines = ["<b>Inquiry not required</b>", f"{_esc(pred['category'])} / {_esc(pred['subcategory'])}"]
    parsed = pred.get("parsed_action")
    if parsed is not None and parsed.get("action") == "call_user":
        asked = _wrap(f"Model asked: “{parsed.get('text') or ''}”", max_lines=4)
        lines.append(asked.replace("Model asked:", "<b>Model asked:</b>", 1))
    return "<br>".join(lines)


def _layout_image(image: Image.Image, width: int, height: int) -> dict:
    # Anchored at the top-left pixel; with the y axis reversed, y=0 is the top of the plot.
    return dict(
        source=image,
        xref="x",
        yref="y",
        x=0,
        y=0,
        sizex=width,
        sizey=height,
        xanchor="left",
        yanchor="top",
        sizing="stretch",
        layer="below",
        opacity=1.0,
    )


def _frame_axes(width: int, height: int) -> dict:
    common = dict(showgrid=False, zeroline=False, ticks="outside", constrain="domain")
    return dict(
        xaxis=dict(range=[0, width], **common),
        yaxis=dict(range=[height, 0], scaleanchor="x", scaleratio=1, **common),
    )


def _arrow(name: str, start, end, color: str) -> dict:
    return dict(
        name=name,
        x=end[0],
        y=end[1],
        ax=start[0],
        ay=start[1],
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        text="",
        showarrow=True,
        arrowhead=2,
        arrowsize=1.5,
        arrowwidth=3,
        arrowcolor=color,
    )


def step_figure(pred: dict, screenshot: Image.Image, frame: str = "screen") -> go.Figure:
    """Screenshot of one step with gold bbox/point, predicted point or swipe, and an inquiry badge.

    Drawn in the `screen` frame, or in the `model` frame (image resized to the model's size, every
    mark scaled by model/screen). Axis ranges equal the frame size, y reversed, so axis values are
    pixel coordinates. Named elements (for tests and callers): shapes `gold_bbox`, `outcome_frame`;
    traces `gold`, `predicted`; annotations `badge`, `actions`, `gold_swipe`, `predicted_swipe`.
    """
    width, height = frame_size(pred, frame)
    sx, sy = _scale(pred, frame)
    outcome = pred["outcome"]
    color = OUTCOME_COLORS[outcome]
    image = screenshot.convert("RGB")
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BICUBIC)

    fig = go.Figure()
    shapes: list[dict] = []
    annotations: list[dict] = []

    bbox = list(pred.get("gold_bbox") or NO_BBOX)
    if bbox != NO_BBOX:
        shapes.append(
            dict(
                name="gold_bbox",
                type="rect",
                xref="x",
                yref="y",
                x0=bbox[0] * sx,
                y0=bbox[1] * sy,
                x1=bbox[2] * sx,
                y1=bbox[3] * sy,
                line=dict(color=GOLD_COLOR, width=3),
                fillcolor="rgba(0,0,0,0)",
            )
        )

    gold = pred["gold_action"]
    if gold.get("action") == "swipe" and "coordinate" in gold and "coordinate2" in gold:
        annotations.append(
            _arrow("gold_swipe", _xy(gold["coordinate"], sx, sy), _xy(gold["coordinate2"], sx, sy), GOLD_COLOR)
        )
    elif gold.get("action") in _POINT_ACTIONS and "coordinate" in gold:
        gx, gy = _xy(gold["coordinate"], sx, sy)
        fig.add_trace(
            go.Scatter(
                name="gold",
                x=[gx],
                y=[gy],
                mode="markers",
                marker=dict(symbol="star", size=18, color=GOLD_COLOR, line=dict(color="black", width=1)),
                hovertemplate=f"gold {_esc(gold['action'])} (%{{x:.0f}}, %{{y:.0f}})<extra></extra>",
            )
        )

    parsed = pred.get("parsed_action")
    if parsed is not None:
        kind = parsed.get("action")
        if kind == "swipe" and "coordinate" in parsed and "coordinate2" in parsed:
            annotations.append(
                _arrow("predicted_swipe", _xy(parsed["coordinate"], sx, sy), _xy(parsed["coordinate2"], sx, sy), color)
            )
        elif kind in _POINT_ACTIONS and "coordinate" in parsed:
            px, py = _xy(parsed["coordinate"], sx, sy)
            fig.add_trace(
                go.Scatter(
                    name="predicted",
                    x=[px],
                    y=[py],
                    mode="markers",
                    marker=dict(symbol="x", size=16, color=color, line=dict(color="white", width=2)),
                    hovertemplate=f"predicted {_esc(kind)} (%{{x:.0f}}, %{{y:.0f}})<extra></extra>",
                )
            )

    annotations.append(
        dict(
            name="badge",
            text=badge_text(pred),
            xref="paper",
            yref="paper",
            x=0.01,
            y=0.99,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            align="left",
            font=dict(size=11),
            bgcolor="rgba(255,255,255,0.88)",
            bordercolor=color,
            borderwidth=2,
            borderpad=4,
        )
    )
    annotations.append(
        dict(
            name="actions",
            xref="paper",
            yref="paper",
            x=0,
            y=-0.045,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            align="left",
            font=dict(size=11),
            text=(
                f"gold: {_esc(action_text(gold, sx, sy))}   [{frame} px]<br>"
                f"predicted: {_esc(action_text(parsed, sx, sy))}"
                + (f" ({_esc(pred['parse_error'])})" if pred.get("parse_error") else "")
            ),
        )
    )

    # A coloured frame around the plot area: the outcome at a glance, even in thumbnails.
    shapes.append(
        dict(
            name="outcome_frame",
            type="rect",
            xref="paper",
            yref="paper",
            x0=0,
            y0=0,
            x1=1,
            y1=1,
            line=dict(color=color, width=5),
            fillcolor="rgba(0,0,0,0)",
            layer="above",
        )
    )

    plot_h = _FIG_HEIGHT - _MARGIN["t"] - _MARGIN["b"]
    fig.update_layout(
        # Title below the modebar (which plotly draws in the top 30 px of a narrow figure).
        title=dict(
            text=f"{_esc(pred['id'])} · {_esc(pred['checkpoint'])} · <b>{_esc(outcome)}</b>",
            font=dict(color=color, size=15),
            x=0.02,
            xanchor="left",
            yref="container",
            y=1 - 32 / _FIG_HEIGHT,
            yanchor="top",
        ),
        width=int(plot_h * width / height) + _MARGIN["l"] + _MARGIN["r"],
        height=_FIG_HEIGHT,
        margin=_MARGIN,
        showlegend=False,
        plot_bgcolor="white",
        images=[_layout_image(image, width, height)],
        shapes=shapes,
        annotations=annotations,
        **_frame_axes(width, height),
    )
    return fig


def trajectory_strip(
    preds_of_one_task: list[dict],
    screenshots: list[Image.Image],
    highlight_step: int | None = None,
    thumb_width: int = 90,
) -> go.Figure:
    """One row of thumbnails of an episode, ordered by step, each framed in its outcome colour.

    Labels above each thumbnail say the step number; below, the outcome. `highlight_step` draws
    a thicker frame around that step.
    """
    if len(preds_of_one_task) != len(screenshots):
        raise ValueError(f"{len(preds_of_one_task)} predictions but {len(screenshots)} screenshots")
    if not preds_of_one_task:
        raise ValueError("trajectory_strip needs at least one step")
    task_ids = {p["task_id"] for p in preds_of_one_task}
    if len(task_ids) != 1:
        raise ValueError(f"predictions of one task expected, got tasks {sorted(task_ids)}")
    pairs = sorted(zip(preds_of_one_task, screenshots), key=lambda ps: ps[0]["step"])
    sw, sh = frame_size(pairs[0][0], "screen")
    tw, th = thumb_width, round(thumb_width * sh / sw)
    gap = 14
    images, shapes, annotations = [], [], []
    for i, (pred, shot) in enumerate(pairs):
        x0 = i * (tw + gap)
        thumb = shot.convert("RGB").resize((tw, th), Image.Resampling.BICUBIC)
        images.append(
            dict(
                source=thumb,
                xref="x",
                yref="y",
                x=x0,
                y=0,
                sizex=tw,
                sizey=th,
                xanchor="left",
                yanchor="top",
                sizing="stretch",
                layer="below",
            )
        )
        color = OUTCOME_COLORS[pred["outcome"]]
        wide = highlight_step is not None and pred["step"] == highlight_step
        shapes.append(
            dict(
                name=f"frame_{pred['step']}",
                type="rect",
                xref="x",
                yref="y",
                x0=x0,
                y0=0,
                x1=x0 + tw,
                y1=th,
                line=dict(color=color, width=7 if wide else 3),
            )
        )
        annotations.append(
            dict(
                name=f"step_{pred['step']}",
                x=x0 + tw / 2,
                y=0,
                xref="x",
                yref="y",
                yanchor="bottom",
                showarrow=False,
                text=f"<b>step {pred['step']}</b>",
                font=dict(size=11),
            )
        )
        annotations.append(
            dict(
                name=f"outcome_{pred['step']}",
                x=x0 + tw / 2,
                y=th,
                xref="x",
                yref="y",
                yanchor="top",
                showarrow=False,
                text=_esc(pred["outcome"].replace("_", " ")),
                font=dict(size=10, color=color),
            )
        )
    total_w = len(pairs) * (tw + gap) - gap
    fig = go.Figure(
        go.Scatter(
            name="steps",
            x=[i * (tw + gap) + tw / 2 for i in range(len(pairs))],
            y=[th / 2] * len(pairs),
            mode="markers",
            marker=dict(size=tw // 2, opacity=0),
            customdata=[p["id"] for p, _ in pairs],
            hovertext=[f"{p['id']}: {p['outcome']}" for p, _ in pairs],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        title=dict(
            text=f"episode {_esc(pairs[0][0]['task_id'])} · {_esc(pairs[0][0]['checkpoint'])}", font=dict(size=13)
        ),
        width=total_w + 60,
        height=th + 110,
        margin=dict(l=30, r=30, t=50, b=40),
        showlegend=False,
        plot_bgcolor="white",
        images=images,
        shapes=shapes,
        annotations=annotations,
        xaxis=dict(range=[-gap / 2, total_w + gap / 2], visible=False),
        yaxis=dict(range=[th + 2, -2], visible=False),
    )
    return fig


def episode_strip(episode: dict, eval_dir: str | Path, highlight_step: int | None = None) -> go.Figure:
    """`trajectory_strip` of one saved episode (`evaluation.episodes`' trajectories.jsonl): its screenshots,
    read from `eval_dir`, framed in each turn's outcome colour."""
    eval_dir = Path(eval_dir)
    preds, shots = [], []
    for st in episode["steps"]:
        preds.append(
            {
                "id": f"{episode['task_id']}/{st['step']}",
                "task_id": episode["task_id"],
                "step": st["step"],
                "outcome": st["outcome"],
                "frame": episode["frame"],
                "checkpoint": episode.get("checkpoint", ""),
            }
        )
        with Image.open(eval_dir / st["screenshot"]) as im:
            shots.append(im.convert("RGB"))
    fig = trajectory_strip(preds, shots, highlight_step=highlight_step)
    fig.update_layout(
        title_text=f"{episode.get('checkpoint', '')} · {episode['task_id']} ({episode['subcategory']}): "
        f"{'success' if episode['success'] else 'failure'}"
    )
    return fig


def outcome_summary(preds: list[dict]) -> pd.DataFrame:
    """Counts of predictions per category (rows, sorted) and outcome (columns, in OUTCOMES order)."""
    frame = pd.DataFrame([(p["category"], p["outcome"]) for p in preds], columns=["category", "outcome"])
    table = pd.crosstab(frame["category"], frame["outcome"]) if len(frame) else pd.DataFrame()
    table = table.reindex(columns=list(OUTCOMES), fill_value=0).fillna(0).astype(int)
    table = table.sort_index()
    table.index.name, table.columns.name = "category", "outcome"
    return table


def outcome_table(preds: list[dict], checkpoints: list[str] | None = None) -> pd.DataFrame:
    """Counts of predictions per checkpoint (rows: `checkpoints` in the given order, else in order
    of first appearance) and outcome (columns, OUTCOMES order), with a total column `n`."""
    names = list(checkpoints) if checkpoints is not None else list(dict.fromkeys(p["checkpoint"] for p in preds))
    rows = {name: {o: 0 for o in OUTCOMES} for name in names}
    for p in preds:
        if p["checkpoint"] in rows:
            rows[p["checkpoint"]][p["outcome"]] += 1
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(OUTCOMES), dtype=int)
    table = table.reindex(names).fillna(0).astype(int)
    table["n"] = table.sum(axis=1)
    table.index.name, table.columns.name = "checkpoint", "outcome"
    return table


def failure_bar(preds: list[dict], title: str = "Failures per category") -> go.Figure:
    """Stacked bars of failure counts per category, one trace per failure outcome."""
    table = outcome_summary(preds)
    totals = table.sum(axis=1)
    fig = go.Figure()
    for outcome in FAILURES:
        counts = table[outcome] if outcome in table else pd.Series(dtype=int)
        fig.add_trace(
            go.Bar(
                name=outcome,
                x=list(table.index),
                y=[int(v) for v in counts],
                marker_color=OUTCOME_COLORS[outcome],
                customdata=[[int(c), int(t)] for c, t in zip(counts, totals)],
                hovertemplate=f"{outcome}: %{{customdata[0]}} of %{{customdata[1]}} steps<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title=title,
        xaxis_title="category",
        yaxis_title="steps",
        legend_title="outcome",
        width=720,
        height=420,
    )
    return fig


_png_notice_printed = False


def find_chrome() -> str | None:
    """Path of a Chrome/Chromium kaleido can drive, or None: PATH first, then kaleido's own search."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    try:
        from choreographer.browsers.chromium import Chromium  # kaleido's browser finder

        return Chromium.find_browser(skip_local=False)
    except Exception:  # its search is best effort; any failure means "not found"
        return None


def save_figure(
    fig: go.Figure, path_stem: str | os.PathLike, png: bool = True, shared_js: bool = False
) -> dict[str, Path | None]:
    """Write `<stem>.html` and `<stem>.png` when Chrome exists and `png` is set.

    The HTML inlines plotly.js (works offline, ~4.6 MB) unless `shared_js`, which writes
    plotly.min.js once beside it and references it (a folder of many figures stays small).
    Returns {"html": path, "png": path or None}. Without a Chrome the PNG is skipped and a single
    message per process says so and why.
    """
    global _png_notice_printed
    stem = Path(path_stem)
    html_path = stem.with_name(stem.name + ".html")
    js = "directory" if shared_js else True
    with atomic_path(html_path) as tmp:
        fig.write_html(tmp, include_plotlyjs=js, full_html=True)
    png_path: Path | None = stem.with_name(stem.name + ".png")
    if not png:
        png_path = None
    elif find_chrome() is None:
        if not _png_notice_printed:
            print(
                "save_figure: PNG export skipped: kaleido needs Chrome/Chromium and none was "
                "found (install it with `apt-get install -y chromium`); HTML files are written."
            )
            _png_notice_printed = True
        png_path = None
    else:
        png_bytes = _to_png(fig)
        with atomic_path(png_path) as tmp:
            Path(tmp).write_bytes(png_bytes)
    return {"html": html_path, "png": png_path}


_kaleido_server = False


def _to_png(fig: go.Figure) -> bytes:
    """PNG bytes through one Chromium kept open for the process (about 0.2 s a figure instead of 2.5 s
    for a Chromium started per figure)."""
    global _kaleido_server
    import atexit
    import warnings

    import kaleido

    if not _kaleido_server:
        kaleido.start_sync_server(silence_warnings=True)
        atexit.register(kaleido.stop_sync_server, silence_warnings=True)
        _kaleido_server = True
    with warnings.catch_warnings():
        # plotly passes its default options to a running server too, which then warns that it ignores them
        warnings.filterwarnings("ignore", message="The kopts argument is ignored", category=UserWarning)
        return fig.to_image(format="png")


def figure_bundle(fig: go.Figure, png_path: str | os.PathLike | None) -> dict:
    """A display bundle with the interactive figure (JupyterLab renders plotly's mimetype) and, when
    a PNG was written, the same figure as a static image, which nbconvert HTML, GitHub and nbviewer
    show (they do not run plotly)."""
    import base64

    import plotly.io as pio

    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())
    if png_path is not None:
        bundle["image/png"] = base64.b64encode(Path(png_path).read_bytes()).decode()
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else "figure"
    bundle["text/plain"] = f"<figure: {title}>"
    return bundle


def _cell(value) -> str:
    if value is None:
        return "<i>—</i>"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return html.escape(text)


def _raw_html(raw: str) -> str:
    """The raw output in a <pre>; one that is empty or only whitespace is named as such (a tiny
    model can emit 64 newlines, which would show as a tall blank box)."""
    if not raw:
        return " <i class='raw-blank'>empty</i>"
    if not raw.strip():
        kinds = " ".join(sorted({"space" if c == " " else repr(c)[1:-1] for c in raw}))
        return f" <i class='raw-blank'>only whitespace: {len(raw)} characters ({html.escape(kinds)})</i>"
    return f"<pre style='white-space:pre-wrap'>{html.escape(raw)}</pre>"


def _answered_html(pred: dict) -> str:
    """Whether the simulated user would answer the step's question (`evaluation.steps.ask_answered`); nothing
    where the step did not ask or the record predates the field."""
    answered = pred.get("ask_answered")
    if answered is None:
        return ""
    word = "answered" if answered else "not answered: the question names nothing the step misses"
    if answered is False and not pred["inquiry_required"]:
        word = "not answered: nothing to ask here"
    return f"<div><b>user:</b> {word}</div>"


def step_details_html(pred: dict) -> str:
    """HTML of one step's text: instruction, history, think, raw output, gold vs predicted, rewards.

    All record text is escaped: model output is untrusted.
    """
    esc = html.escape
    color = OUTCOME_COLORS.get(pred["outcome"], "#000")
    items = "".join(f"<li>{esc(h)}</li>" for h in pred.get("history") or [])
    history = f"<ol start='0'>{items}</ol>" if items else " <i>none</i>"
    gold, parsed = pred["gold_action"], pred.get("parsed_action")
    keys = ["action"] + sorted((set(gold) | set(parsed or {})) - {"action"})
    rows = []
    for key in keys:
        g, p = gold.get(key), (parsed or {}).get(key)
        same = g == p
        rows.append(
            f"<tr><td>{esc(key)}</td><td>{_cell(g)}</td><td>{_cell(p)}</td>"
            f"<td style='color:{'#2E7D32' if same else '#D32F2F'}'>{'=' if same else '≠'}</td></tr>"
        )
    rows.append(f"<tr><td>gold_bbox</td><td>{_cell(pred.get('gold_bbox'))}</td><td></td><td></td></tr>")
    rewards = pred.get("rewards") or {}
    reward_rows = "".join(f"<tr><td>{esc(k)}</td><td>{float(v):+.3f}</td></tr>" for k, v in rewards.items())
    inquiry = (
        f"required ({esc(pred['category'])} / {esc(pred['subcategory'])}): {esc(pred.get('inquiry_reason') or '')}"
        if pred["inquiry_required"]
        else f"not required ({esc(pred['category'])} / {esc(pred['subcategory'])})"
    )
    return (
        f"<div class='step-details' data-id='{esc(pred['id'])}'>"
        f"<div><b>{esc(pred['id'])}</b> · {esc(pred['checkpoint'])} · "
        f"<b style='color:{color}'>{esc(pred['outcome'])}</b></div>"
        f"<div><b>inquiry:</b> {inquiry}</div>"
        f"{_answered_html(pred)}"
        f"<div><b>instruction:</b> {esc(pred['instruction'])}</div>"
        f"<div><b>history:</b>{history}</div>"
        f"<div><b>think:</b><pre style='white-space:pre-wrap'>{_cell(pred.get('think'))}</pre></div>"
        f"<div><b>raw model output:</b>{_raw_html(pred['raw_output'])}</div>"
        f"<div><b>gold vs predicted</b> (screen frame) — format_ok={pred['format_ok']}, "
        f"type_ok={pred['type_ok']}, arg_ok={pred['arg_ok']}, "
        f"parse_error={_cell(pred.get('parse_error'))}"
        f"<table class='diff'><tr><th></th><th>gold</th><th>predicted</th><th></th></tr>"
        f"{''.join(rows)}</table></div>"
        + (f"<div><b>rewards</b><table class='rewards'>{reward_rows}</table></div>" if rewards else "")
        + "</div>"
    )
