"""The inspector of episodes: an online episode (one line of `eval/<checkpoint>/trajectories.jsonl`) turn by turn.

Step predictions follow the expert's path, so they cannot show what the agent does after its own slip; an
online episode does. These plain functions of the episode records and their screenshots are shared by
notebook 06's episode inspector (`inspector.EpisodeInspector`) and the HTML report (`report.write_report`):

- which episodes to look at: `episode_kind` (the kind of the first wrong step, `evaluation.failures`, or
  "succeeded"), `filter_episodes` (by checkpoint, sub-category and kind, failed episodes first) and
  `kind_table` (the failed episodes of each checkpoint by kind);
- one turn drawn by `overlays.step_figure`: `turn_record` makes a turn look like a step prediction (its
  gold box comes from the turn itself or from the expert's step record, `expert_boxes`), `turn_figure` keeps
  the inquiry badge only where the agent asked or an ask was due, and writes the user's reply in it;
- the turn strip: `strip_figure` puts every turn of an episode in a row of one figure, the first wrong step
  and the turn that came back to the path marked; `turns_html` writes each turn's text in a column of
  the same width under it; `episode_header_html` says what happened in one line.

Screenshots and actions are in the screen frame (`evaluation.episodes.write_trajectories`).
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from PIL import Image

from ..evaluation.failures import KINDS, first_wrong_step, recovered
from ..runs.records import NO_BBOX
from . import overlays as viz

SUCCEEDED = "succeeded"
KIND_CHOICES: tuple[str, ...] = KINDS + (SUCCEEDED,)  # what the inspector's kind filter offers, in this order
FIRST_WRONG_COLOR = "#D50000"
BACK_ON_PATH_COLOR = "#2E7D32"
_BANNER_H = 36  # pixels above the turns for the first-wrong-step and back-on-path banners


# ----- which episodes -----------------------------------------------------------------------------
_EPISODE_FIELDS = (("task_id", str), ("subcategory", str), ("success", bool), ("frame", dict), ("steps", list))
_TURN_FIELDS = (("step", int), ("screenshot", str), ("outcome", str), ("gold_action", dict))
_FRAME_FIELDS = ("screen_w", "screen_h", "model_w", "model_h")


def episode_problem(episode: object) -> str | None:
    """What makes a trajectories.jsonl record unusable here (None when nothing does): the fields the views
    read, with their types, and an outcome the step outcomes name."""
    if not isinstance(episode, dict):
        return f"an episode must be a JSON object, got {type(episode).__name__}"
    for key, kind in _EPISODE_FIELDS:
        if not isinstance(episode.get(key), kind):
            return f"field {key!r} must be a {kind.__name__}, got {episode.get(key)!r:.60}"
    if not all(isinstance(episode["frame"].get(key), int) for key in _FRAME_FIELDS):
        return f"field 'frame' must hold the integers {', '.join(_FRAME_FIELDS)}"
    if not episode["steps"]:
        return "the episode has no turns"
    for k, st in enumerate(episode["steps"]):
        if not isinstance(st, dict):
            return f"turn {k} must be a JSON object"
        for key, kind in _TURN_FIELDS:
            if not isinstance(st.get(key), kind):
                return f"turn {k}: field {key!r} must be a {kind.__name__}, got {st.get(key)!r:.60}"
        if st["outcome"] not in viz.OUTCOME_COLORS:
            return f"turn {k}: outcome {st['outcome']!r:.40} is not one of {', '.join(viz.OUTCOME_COLORS)}"
        if not isinstance(st.get("parsed_action"), (dict, type(None))):
            return f"turn {k}: field 'parsed_action' must be an object or null"
    return None


def usable_episodes(trajectories: dict[str, list]) -> tuple[dict[str, list[dict]], list[tuple[str, str]]]:
    """(the well-formed episodes of each checkpoint, a (checkpoint, why) pair per episode left out)."""
    good, bad = {}, []
    for name, eps in trajectories.items():
        good[name] = []
        for i, ep in enumerate(eps):
            problem = episode_problem(ep)
            if problem is None:
                good[name].append(ep)
            else:
                bad.append((name, f"episode {i + 1} of trajectories.jsonl: {problem}"))
    return good, bad


def ask_due(step: dict) -> bool:
    """Whether the expert would have asked at this turn."""
    return (step.get("gold_action") or {}).get("action") == "call_user"


def asked(step: dict) -> bool:
    """Whether the agent asked the user at this turn."""
    return (step.get("parsed_action") or {}).get("action") == "call_user"


def episode_kind(episode: dict) -> str:
    """The kind filter's name for an episode: "succeeded", else its first wrong step's (`failures.KINDS`)."""
    return SUCCEEDED if episode["success"] else first_wrong_step(episode)[1]


def recovery_turn(episode: dict, k: int | None) -> int | None:
    """The first turn after `k` that is correct and on the expert's path: where `failures.recovered` sees the
    episode come back (None where it did not)."""
    if k is None:
        return None
    later = episode["steps"][k + 1 :]
    return next((k + 1 + j for j, st in enumerate(later) if st["outcome"] == "correct" and st.get("on_path")), None)


def episode_summary(episode: dict) -> dict:
    """What the header and the filters say of an episode: its first wrong turn and kind, and its recovery."""
    k, wrong = first_wrong_step(episode)
    back = recovered(episode, k)
    return {
        "checkpoint": episode.get("checkpoint", ""),
        "task_id": episode["task_id"],
        "subcategory": episode["subcategory"],
        "success": bool(episode["success"]),
        "kind": episode_kind(episode),
        "first_wrong": k,
        "first_wrong_kind": wrong,
        "recovered": back,
        "recovered_at": recovery_turn(episode, k) if back else None,
        "turns": len(episode["steps"]),
        "asks": sum(asked(st) for st in episode["steps"]),
    }


def filter_episodes(
    trajectories: dict[str, list[dict]],
    checkpoint: str | None = None,
    subcategory: str | None = None,
    kind: str | None = None,
) -> list[dict]:
    """The episodes matching every given filter (None matches anything; `kind` is one of `KIND_CHOICES`),
    each with its `checkpoint` set, failed ones first, file order within each."""
    if kind is not None and kind not in KIND_CHOICES:
        raise ValueError(f"kind {kind!r} is not one of {list(KIND_CHOICES)}")
    found = []
    for name, eps in trajectories.items():
        if checkpoint is not None and name != checkpoint:
            continue
        for ep in eps:
            if subcategory is not None and ep["subcategory"] != subcategory:
                continue
            if kind is not None and episode_kind(ep) != kind:
                continue
            found.append({**ep, "checkpoint": name})
    return sorted(found, key=lambda ep: bool(ep["success"]))  # stable: file order inside


def kind_table(trajectories: dict[str, list[dict]], checkpoints: list[str]) -> pd.DataFrame:
    """Per checkpoint (rows, in the given order): its episodes, the failed ones, those by the kind of their first
    wrong step (kinds with a count only) and how many of the failed came back to the path after it."""
    rows = {}
    for name in checkpoints:
        eps = trajectories.get(name, [])
        failed = [ep for ep in eps if not ep["success"]]
        row = {"episodes": len(eps), "failed": len(failed)}
        for kind in KINDS:
            row[kind] = sum(episode_kind(ep) == kind for ep in failed)
        row["recovered after it"] = sum(recovered(ep, first_wrong_step(ep)[0]) for ep in failed)
        rows[name] = row
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["episodes", "failed", *KINDS, "recovered after it"])
    table = table.loc[:, (table != 0).any(axis=0) | table.columns.isin(["episodes", "failed", "recovered after it"])]
    table.index.name = "checkpoint"
    return table.astype(int)


# ----- one turn -----------------------------------------------------------------------------------
def expert_boxes(preds: list[dict]) -> dict[tuple[str, int], tuple[dict, list[int]]]:
    """(task id, expert step) -> (gold action, gold box) of the step predictions that have a box. They follow
    the expert's path, so a turn on the path at the same step with the same gold action targets that box."""
    return {
        (p["task_id"], p["step"]): (p["gold_action"], list(p["gold_bbox"]))
        for p in preds
        if list(p.get("gold_bbox") or NO_BBOX) != NO_BBOX
    }


def turn_gold_bbox(task_id: str, step: dict, boxes: dict | None = None) -> list[int] | None:
    """The gold element's box of a turn: the turn's own `gold_bbox` when it has one, else the expert step's
    (`expert_boxes`) when the turn is on the path there and due the same action; None where neither says."""
    own = step.get("gold_bbox")
    if own and list(own) != NO_BBOX:
        return list(own)
    if not step.get("on_path") or boxes is None:
        return None
    gold, bbox = boxes.get((task_id, step.get("path_index")), (None, None))
    return bbox if gold == step.get("gold_action") else None


def turn_record(episode: dict, k: int, boxes: dict | None = None) -> dict:
    """Turn `k` as a step-prediction-like record (the fields `overlays.step_figure` and
    `inspector.RunData.screenshot` read): an ask is required where the expert would have asked."""
    st = episode["steps"][k]
    gold = st.get("gold_action") or {}
    due = ask_due(st)
    bbox = turn_gold_bbox(episode["task_id"], st, boxes)
    return {
        "id": f"{episode['task_id']} turn {k}",
        "task_id": episode["task_id"],
        "step": k,
        "checkpoint": episode.get("checkpoint", ""),
        "screenshot": st["screenshot"],
        "frame": episode["frame"],
        "category": episode.get("category", ""),
        "subcategory": episode["subcategory"],
        "inquiry_required": due,
        "inquiry_reason": f"the expert asks “{gold.get('text') or ''}”" if due else "",
        "gold_action": gold,
        "gold_bbox": bbox if bbox is not None else list(NO_BBOX),
        "parsed_action": st.get("parsed_action"),
        "parse_error": st.get("parse_error"),
        "outcome": st["outcome"],
    }


def turn_figure(record: dict, step: dict, screenshot: Image.Image) -> go.Figure:
    """`overlays.step_figure` of one turn: gold box and point, predicted point, the actions under it; the
    inquiry badge only where the agent asked or an ask was due (elsewhere it would hide the screen), with
    the user's reply in it."""
    fig = viz.step_figure(record, screenshot, frame="screen")
    reply = step.get("user_reply")
    keep = ask_due(step) or asked(step) or bool(reply)
    annotations = []
    for ann in fig.layout.annotations:
        if ann.name == "badge":
            if not keep:
                continue
            if reply:
                ann.text += "<br>" + viz._wrap(f"User: {reply}", max_lines=3).replace("User:", "<b>User:</b>", 1)
        annotations.append(ann)
    fig.layout.annotations = annotations
    return fig


# ----- the turn strip -----------------------------------------------------------------------------
def _axis(kind: str, i: int) -> str:
    """Plotly's name of the i-th (0-based) x or y axis: "x", "x2", ..."""
    return kind + ("" if i == 0 else str(i + 1))


def _moved(item: dict, i: int) -> dict:
    """A shape, annotation or image of a one-turn figure, referred to the i-th column's axes: its data
    coordinates to that column's axes, its paper coordinates to that column's plot area."""
    out = dict(item)
    for key, kind in (("xref", "x"), ("yref", "y"), ("axref", "x"), ("ayref", "y")):
        if key not in out:
            continue
        if out[key] == kind:
            out[key] = _axis(kind, i)
        elif out[key] == "paper":
            out[key] = _axis(kind, i) + " domain"
    return out


def _banner(name: str, i: int, text: str, color: str) -> dict:
    return dict(
        name=name,
        text=text,
        xref=_axis("x", i) + " domain",
        yref=_axis("y", i) + " domain",
        x=0,
        y=1,
        xanchor="left",
        yanchor="bottom",
        yshift=26,
        showarrow=False,
        font=dict(color="white", size=12),
        bgcolor=color,
        borderpad=3,
    )


def _column_frame(name: str, i: int, one) -> dict:
    """A dashed frame around the i-th column: its ticks, the turn's title and banner above, the actions under
    it (`one` is a one-turn figure's layout: the frame keeps 3 px inside that column's margins)."""
    plot_w = one.width - one.margin.l - one.margin.r
    plot_h = one.height - one.margin.t - one.margin.b
    return dict(
        name=name,
        type="rect",
        xref=_axis("x", i) + " domain",
        yref=_axis("y", i) + " domain",
        x0=-(one.margin.l - 3) / plot_w,
        x1=1 + (one.margin.r - 3) / plot_w,
        y0=-(one.margin.b - 8) / plot_h,
        y1=1 + (_BANNER_H + 20) / plot_h,
        line=dict(color=FIRST_WRONG_COLOR, width=3, dash="dash"),
        layer="above",
    )


def strip_figure(episode: dict, records: list[dict], screenshots: list[Image.Image]) -> go.Figure:
    """Every turn of an episode in a row of one figure, each drawn as `turn_figure` draws it, at the width of
    a one-turn figure (`turns_html` writes the text under it at the same width).

    Above each turn its number and outcome; above the first wrong step a red banner with its kind (and
    "did not recover" where the episode never came back), above the turn that came back a green one, and a
    dashed frame around the first wrong step. Element names are prefixed by the turn: "5/gold_bbox",
    "5/predicted", "5/badge", "first_wrong", "back_on_path", "first_wrong_frame"."""
    if not records or len(records) != len(screenshots) or len(records) != len(episode["steps"]):
        raise ValueError(
            f"{len(episode['steps'])} turns, {len(records)} records and {len(screenshots)} screenshots: "
            "one of each per turn expected, at least one"
        )
    figs = [turn_figure(r, st, shot) for r, st, shot in zip(records, episode["steps"], screenshots)]
    one = figs[0].layout
    col_w, margin = one.width, one.margin
    width = col_w * len(figs)
    summary = episode_summary(episode)
    traces, images, shapes, annotations, axes = [], [], [], [], {}
    for i, (fig, st) in enumerate(zip(figs, episode["steps"])):
        x_domain = [(i * col_w + margin.l) / width, ((i + 1) * col_w - margin.r) / width]
        axes[_axis("xaxis", i)] = {
            **fig.layout.xaxis.to_plotly_json(),
            "domain": x_domain,
            "anchor": _axis("y", i),
            "visible": True,
        }
        axes[_axis("yaxis", i)] = {
            **fig.layout.yaxis.to_plotly_json(),
            "scaleanchor": _axis("x", i),
            "anchor": _axis("x", i),
            "visible": True,
        }
        for trace in fig.data:
            traces.append(trace.update(xaxis=_axis("x", i), yaxis=_axis("y", i), name=f"{i}/{trace.name}"))
        images += [_moved(im.to_plotly_json(), i) for im in fig.layout.images]
        shapes += [{**_moved(s.to_plotly_json(), i), "name": f"{i}/{s.name}"} for s in fig.layout.shapes]
        annotations += [{**_moved(a.to_plotly_json(), i), "name": f"{i}/{a.name}"} for a in fig.layout.annotations]
        color = viz.OUTCOME_COLORS[st["outcome"]]
        annotations.append(
            {
                **_banner(f"{i}/title", i, f"<b>turn {i}</b> · {viz._esc(st['outcome'].replace('_', ' '))}", color),
                "yshift": 2,
                "bgcolor": "rgba(0,0,0,0)",
                "font": dict(color=color, size=13),
            }
        )
    k, back = summary["first_wrong"], summary["recovered_at"]
    if k is not None:
        tail = "" if summary["recovered"] else " · did not recover"
        wrong = viz._esc(summary["first_wrong_kind"])
        annotations.append(_banner("first_wrong", k, f"<b>first wrong step: {wrong}</b>{tail}", FIRST_WRONG_COLOR))
        shapes.append(_column_frame("first_wrong_frame", k, one))
    if back is not None:
        annotations.append(_banner("back_on_path", back, "<b>back on the path</b>", BACK_ON_PATH_COLOR))
    result = go.Figure(data=traces)
    result.update_layout(
        title=dict(
            text=viz._esc(episode_header_text(episode)),
            font=dict(size=14),
            x=0.005,
            xanchor="left",
            yref="container",
            y=1 - 6 / (one.height + _BANNER_H),
            yanchor="top",
        ),
        width=width,
        height=one.height + _BANNER_H,
        margin=dict(l=0, r=0, t=margin.t + _BANNER_H, b=margin.b),
        showlegend=False,
        plot_bgcolor="white",
        images=images,
        shapes=shapes,
        annotations=annotations,
        **axes,
    )
    return result


# ----- the text -----------------------------------------------------------------------------------
def episode_header_text(episode: dict) -> str:
    """One line of plain text: checkpoint, task, outcome, first wrong step and recovery."""
    s = episode_summary(episode)
    line = (
        f"{s['checkpoint']} · {s['task_id']} ({s['subcategory']}): "
        f"{'success' if s['success'] else 'failure'} in {s['turns']} turns"
    )
    if s["first_wrong"] is None:
        return line + (" · no wrong step" if s["success"] else " · no wrong step, it ran out of turns or stopped")
    back = f"recovered at turn {s['recovered_at']}" if s["recovered"] else "did not recover"
    return line + f" · first wrong step: turn {s['first_wrong']}, {s['first_wrong_kind']} · {back}"


def episode_header_html(episode: dict) -> str:
    """The header line in HTML (the checkpoint's colour swatch, the failure in red) with the instruction under it."""
    esc = html.escape
    s = episode_summary(episode)
    swatch = (
        f"<span style='display:inline-block;width:10px;height:10px;margin-right:4px;"
        f"background:{viz.checkpoint_color(s['checkpoint'])}'></span>"
    )
    verdict = (
        "<b style='color:#2E7D32'>success</b>" if s["success"] else f"<b style='color:{FIRST_WRONG_COLOR}'>failure</b>"
    )
    wrong = ""
    if s["first_wrong"] is not None:
        back = f"recovered at turn {s['recovered_at']}" if s["recovered"] else "did not recover"
        wrong = (
            f" · <b style='color:{FIRST_WRONG_COLOR}'>first wrong step: turn {s['first_wrong']}, "
            f"{esc(s['first_wrong_kind'])}</b> · {back}"
        )
    return (
        f"<div class='episode-head' data-task='{esc(s['task_id'], quote=True)}' "
        f"data-kind='{esc(s['kind'], quote=True)}'>{swatch}<b>{esc(s['checkpoint'])}</b> · "
        f"{esc(s['task_id'])} ({esc(s['subcategory'])}): {verdict} in {s['turns']} turns, "
        f"{s['asks']} ask(s){wrong}<div><b>instruction:</b> {esc(episode.get('instruction', ''))}</div></div>"
    )


def _pre(text: str | None) -> str:
    if text is None:
        return " <i>—</i>"
    return (
        "<pre style='white-space:pre-wrap;max-height:180px;overflow:auto;background:#f6f6f6;"
        f"padding:4px;margin:2px 0;font-size:11px'>{html.escape(text)}</pre>"
    )


def turn_html(episode: dict, k: int, width: int) -> str:
    """Turn `k`'s text in a column `width` px wide: screen, outcome and path; predicted against the expert's
    action; the question asked and the user's reply; the reasoning and the raw output. The first wrong step
    and the turn that came back say so. Every record text is escaped (model output is untrusted)."""
    esc = html.escape
    st = episode["steps"][k]
    s = episode_summary(episode)
    color = viz.OUTCOME_COLORS.get(st["outcome"], "#000")
    path = f"on the path (expert step {st.get('path_index')})" if st.get("on_path") else "off the path"
    marks = []
    if k == s["first_wrong"]:
        tail = f", recovered at turn {s['recovered_at']}" if s["recovered"] else ", did not recover"
        marks.append(
            f"<div class='first-wrong' style='background:{FIRST_WRONG_COLOR};color:white;padding:2px 4px'>"
            f"<b>first wrong step: {esc(s['first_wrong_kind'])}</b>{tail}</div>"
        )
    if k == s["recovered_at"]:
        marks.append(
            f"<div class='back-on-path' style='background:{BACK_ON_PATH_COLOR};color:white;padding:2px 4px'>"
            "<b>back on the path</b></div>"
        )
    flags = [name for name in ("unsafe", "needless") if st.get(name)]
    ask = ""
    if asked(st):
        ask += f"<div><b>asked:</b> {esc((st.get('parsed_action') or {}).get('text') or '')}</div>"
    elif ask_due(st):
        ask += f"<div><b>an ask was due:</b> {esc((st.get('gold_action') or {}).get('text') or '')}</div>"
    if st.get("user_reply"):
        ask += (
            "<div class='user-reply' style='background:#E3F2FD;padding:2px 4px'>"
            f"<b>user replied:</b> {esc(st['user_reply'])}</div>"
        )
    error = f" ({esc(st['parse_error'])})" if st.get("parse_error") else ""
    border = f"3px dashed {FIRST_WRONG_COLOR}" if k == s["first_wrong"] else "1px solid #ddd"
    return (
        f"<div class='turn' data-turn='{k}' data-outcome='{esc(st['outcome'], quote=True)}' "
        f"style='box-sizing:border-box;width:{width}px;flex:none;padding:4px 6px;font-size:12px;"
        f"overflow-wrap:anywhere;border:{border};border-top:6px solid {color}'>"
        f"<div><b>turn {k}</b> · {esc(st.get('screen_title', ''))} · <b style='color:{color}'>"
        f"{esc(st['outcome'])}</b> · {path}" + (f" · <b>{', '.join(flags)}</b>" if flags else "") + "</div>"
        f"{''.join(marks)}"
        f"<div><b>predicted:</b> {esc(viz.action_text(st.get('parsed_action')))}{error}</div>"
        f"<div><b>expert:</b> {esc(viz.action_text(st.get('gold_action')))}</div>"
        f"{ask}<div><b>think:</b>{_pre(st.get('think'))}</div>"
        f"<div><b>raw output:</b>{_pre(st.get('raw_output'))}</div></div>"
    )


def turns_html(episode: dict, width: int) -> str:
    """Every turn's `turn_html` in a row of columns `width` px wide, under the strip figure's turns."""
    cols = "".join(turn_html(episode, k, width) for k in range(len(episode["steps"])))
    # line-height set here: the widget's HTML box otherwise gives every line the height of a control
    style = f"display:flex;width:{width * len(episode['steps'])}px;line-height:1.35"
    return f"<div class='turns' style='{style}'>{cols}</div>"
