"""Tables and plotly figures for exploring InquireBench.

Everything here is a pure function of a generated `DatasetDict` (see `inquire_lib.data.benchmark`), its
`stats`, or InquireMobile's sample files; nothing draws on a model. Figures are written by `pipeline.show_fig`.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

import datasets
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..data import benchmark as data
from ..data import external
from ..agent.actions import NO_BBOX, Action
from ..profiles import DataSettings, ModelSettings, Named, split_sizes
from ..agent.taxonomy import CATEGORIES, SAFE, subcategories
from ..world.apps import SCREEN_H, SCREEN_W

ORDER = [*CATEGORIES, SAFE]  # categories in taxonomy order, safe controls last
SUB_ORDER = [*subcategories(), SAFE]
CATEGORY_COLORS = {
    "risk": "#D32F2F",
    "privacy": "#7B1FA2",
    "intent": "#1565C0",
    "uncertainty": "#EF6C00",
    "combination": "#00897B",
    SAFE: "#9E9E9E",
}
GOLD = "#FFD600"
# columns that never need an image decoded
_TEXT_COLUMNS = [
    "id",
    "task_id",
    "step",
    "num_steps",
    "app",
    "template",
    "category",
    "subcategory",
    "instruction",
    "history",
    "a11y",
    "gold_action",
    "gold_bbox",
    "inquiry_required",
    "inquiry_reason",
    "user_reply",
]


# ------------------------------------------------------------------------------ sizes
def coverage_tasks() -> int:
    """The smallest benchmark size whose train split holds every sub-category at least once.

    Even task indices cycle through the 22 sub-categories, so the train split needs 43 tasks;
    `profiles.split_sizes` sets the rest aside for test."""
    need = 2 * len(subcategories()) - 1
    n = need
    while split_sizes(n)["train"] < need:
        n += 1
    return n


def benchmark_size(profile: DataSettings) -> int:
    """Tasks to build for exploring under a profile: its train + test tasks, raised to
    `coverage_tasks()` so that even the smoke profile shows the whole taxonomy."""
    return max(profile.benchmark_tasks, coverage_tasks())


# ------------------------------------------------------------------------------ tables
def text_rows(ds: datasets.Dataset) -> list[dict]:
    """The rows of a split without decoding images: `screenshot` is True and `prev_screenshot`
    True or None, placeholders enough for counting a prompt's images."""
    table = ds.select_columns([*_TEXT_COLUMNS, "prev_screenshot"]).with_format("arrow")[:]
    rows = table.to_pylist()
    for r in rows:
        r["screenshot"] = True
        r["prev_screenshot"] = True if r["prev_screenshot"] is not None else None
    return rows


def benchmark_tasks(dd: datasets.DatasetDict) -> pd.DataFrame:
    """One row per task: split, task_id, category, subcategory, template, app, num_steps,
    inquiry_required (the task has an inquiry step), instruction; splits in train, test order."""
    frames = []
    for split in sorted(dd, key=lambda s: (s != "train", s)):
        cols = (
            dd[split]
            .select_columns(
                [
                    "task_id",
                    "step",
                    "num_steps",
                    "category",
                    "subcategory",
                    "template",
                    "app",
                    "instruction",
                    "inquiry_required",
                ]
            )
            .to_pandas()
        )
        per_task = (
            cols.groupby("task_id", sort=False)
            .agg(
                category=("category", "first"),
                subcategory=("subcategory", "first"),
                template=("template", "first"),
                app=("app", "first"),
                num_steps=("num_steps", "first"),
                inquiry_required=("inquiry_required", "any"),
                instruction=("instruction", "first"),
            )
            .reset_index()
        )
        per_task.insert(0, "split", split)
        frames.append(per_task)
    return pd.concat(frames, ignore_index=True)


def category_table(tasks: pd.DataFrame) -> pd.DataFrame:
    """Tasks per (category, subcategory) and split, in taxonomy order, with a total column."""
    table = pd.crosstab([tasks["category"], tasks["subcategory"]], tasks["split"])
    order = [(c, s) for c in ORDER for s in (CATEGORIES.get(c) or [SAFE]) if (c, s) in table.index]
    table = table.reindex(order)
    table["total"] = table.sum(axis=1)
    return table


def summary(dd: datasets.DatasetDict, fingerprint: str | None = None) -> dict:
    """Stats of the benchmark over both splits together, plus each split's `data.stats`:
    tasks, steps, inquiry steps, n_categories / n_subcategories (inquiry ones, safe excluded),
    safe_tasks, templates, mean steps per task, and the fingerprint."""
    per_split = data.stats(dd)
    tasks = benchmark_tasks(dd)
    inquiry = tasks[tasks["category"] != SAFE]
    return {
        "fingerprint": fingerprint if fingerprint is not None else data.fingerprint(dd),
        "tasks": int(len(tasks)),
        "steps": int(sum(s["steps"] for s in per_split.values())),
        "inquiry_steps": int(sum(s["inquiry_steps"] for s in per_split.values())),
        "n_categories": int(inquiry["category"].nunique()),
        "n_subcategories": int(inquiry["subcategory"].nunique()),
        "safe_tasks": int((tasks["category"] == SAFE).sum()),
        "inquiry_tasks": int(len(inquiry)),
        "templates": int(tasks["template"].nunique()),
        "mean_steps": round(float(tasks["num_steps"].mean()), 3),
        "splits": per_split,
    }


# ---------------------------------------------------------------------------- figures
def category_figure(tasks: pd.DataFrame) -> go.Figure:
    """Bars of tasks per category (left) and per sub-category (right), one bar group per split,
    coloured by category."""
    splits = list(dict.fromkeys(tasks["split"]))
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.22, 0.78],
        horizontal_spacing=0.06,
        subplot_titles=("per category", "per sub-category"),
    )
    patterns = ["", "/", ".", "x"]
    for i, split in enumerate(splits):
        part = tasks[tasks["split"] == split]
        cats = Counter(part["category"])
        subs = Counter(part["subcategory"])
        sub_cat = dict(zip(part["subcategory"], part["category"]))
        cat_x = [c for c in ORDER if cats[c]]
        sub_x = [s for s in SUB_ORDER if subs[s]]
        pattern = dict(shape=patterns[i % len(patterns)])
        fig.add_trace(
            go.Bar(
                name=split,
                legendgroup=split,
                x=cat_x,
                y=[cats[c] for c in cat_x],
                offsetgroup=split,
                marker=dict(color=[CATEGORY_COLORS[c] for c in cat_x], pattern=pattern),
                hovertemplate=f"{split}: %{{x}} %{{y}} tasks<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                name=split,
                legendgroup=split,
                showlegend=False,
                x=sub_x,
                y=[subs[s] for s in sub_x],
                offsetgroup=split,
                customdata=[sub_cat[s] for s in sub_x],
                marker=dict(color=[CATEGORY_COLORS[sub_cat[s]] for s in sub_x], pattern=pattern),
                hovertemplate=f"{split}: %{{x}} (%{{customdata}}) %{{y}} tasks<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_layout(
        barmode="group",
        title="InquireBench tasks per category and sub-category",
        legend_title="split (pattern)",
        width=1200,
        height=480,
        bargap=0.15,
    )
    fig.update_yaxes(title_text="tasks", row=1, col=1)
    fig.update_xaxes(tickangle=-50, row=1, col=2)
    return fig


def length_figure(tasks: pd.DataFrame) -> go.Figure:
    """Histogram of trajectory lengths (steps per task), inquiry tasks and safe controls side by side."""
    fig = go.Figure()
    for name, part in (
        ("inquiry tasks", tasks[tasks["category"] != SAFE]),
        ("safe controls", tasks[tasks["category"] == SAFE]),
    ):
        counts = Counter(part["num_steps"])
        xs = sorted(counts)
        fig.add_trace(
            go.Bar(
                name=name,
                x=xs,
                y=[counts[x] for x in xs],
                marker_color=CATEGORY_COLORS[SAFE] if name.startswith("safe") else "#1565C0",
                hovertemplate=f"{name}: %{{y}} tasks of %{{x}} steps<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        title="Trajectory length (expert steps per task, both splits)",
        xaxis_title="steps",
        yaxis_title="tasks",
        xaxis=dict(dtick=1),
        width=720,
        height=400,
    )
    return fig


# ----------------------------------------------------------------------- prompt lengths
def whitespace_tokens(text: str) -> int:
    """Number of whitespace-separated words: a tokenizer-free stand-in for a token count."""
    return len(text.split())


def count_tokens(tokenize: Callable | None, text: str) -> int:
    """Tokens of `text` by a tokenizer-like callable: its result may be an int, a sequence of ids,
    or a mapping with `input_ids` (as a Hugging Face tokenizer returns); None counts words."""
    if tokenize is None:
        return whitespace_tokens(text)
    out = tokenize(text)
    if isinstance(out, int):
        return out
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    return len(out)


def message_text(messages: list[dict]) -> tuple[str, int]:
    """The text parts of chat messages joined by newlines, and the number of image placeholders."""
    texts, images = [], 0
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content:
            if part.get("type") == "text":
                texts.append(part["text"])
            elif part.get("type") == "image":
                images += 1
    return "\n".join(texts), images


def prompt_lengths(rows: Iterable[dict], profile: ModelSettings, tokenize: Callable | None = None) -> pd.DataFrame:
    """Per step record: text tokens of its prompt (as `inquire_lib.agent.prompts` builds it for the
    profile), images, image tokens (the processor's grid of 28-pixel patches per screenshot) and
    their sum. `rows` are step records (`text_rows` gives them without decoding images)."""
    from ..agent import prompts  # the single prompt builder

    frame = prompts.frame_for(profile)
    per_image = (frame.model_w // 28) * (frame.model_h // 28)
    out = []
    for r in rows:
        text, n_images = message_text(prompts.prompt_messages(r, profile, frame))
        n_text = count_tokens(tokenize, text)
        out.append(
            {
                "id": r["id"],
                "category": r["category"],
                "text_tokens": n_text,
                "images": n_images,
                "image_tokens": n_images * per_image,
                "total_tokens": n_text + n_images * per_image,
            }
        )
    return pd.DataFrame(out)


def token_figure(lengths: pd.DataFrame, unit: str = "whitespace tokens") -> go.Figure:
    """Histogram of prompt text lengths, inquiry steps' tasks vs safe controls."""
    fig = go.Figure()
    for name, part in (
        ("inquiry tasks", lengths[lengths["category"] != SAFE]),
        ("safe controls", lengths[lengths["category"] == SAFE]),
    ):
        fig.add_trace(
            go.Histogram(
                name=name,
                x=part["text_tokens"],
                opacity=0.75,
                marker_color=CATEGORY_COLORS[SAFE] if name.startswith("safe") else "#1565C0",
            )
        )
    fig.update_layout(
        barmode="overlay",
        title=f"Prompt text length per step ({unit}; images not counted)",
        xaxis_title=unit,
        yaxis_title="steps",
        width=720,
        height=400,
    )
    return fig


# ----------------------------------------------------------------------- gold overlays
def example_indices(ds: datasets.Dataset) -> dict[str, int]:
    """Row index of one example step per category (taxonomy order, safe last): the inquiry step of
    the category's first task, and for safe controls the first click step."""
    cols = ds.select_columns(["category", "inquiry_required", "gold_action"])
    out: dict[str, int] = {}
    for i, (cat, inq, gold) in enumerate(zip(cols["category"], cols["inquiry_required"], cols["gold_action"])):
        if cat in out:
            continue
        if (cat != SAFE and inq) or (cat == SAFE and json.loads(gold)["action"] == "click"):
            out[cat] = i
    return {c: out[c] for c in ORDER if c in out}


def _wrap(text: str, width: int, max_lines: int = 6) -> str:
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [lines[max_lines - 1][: width - 1] + "…"]
    return "<br>".join(_esc(line) for line in lines)


def _esc(text: str) -> str:
    # plotly reads <br>, <b>, ... in annotation text: untrusted text is escaped
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def gold_caption(row: dict, width: int = 34) -> str:
    """Plotly-markup text of a step's gold action and, for an inquiry step, why and what the user says."""
    gold = Action.from_arguments(json.loads(row["gold_action"]))
    act = gold.type
    if gold.coordinate is not None:
        act += f" ({gold.coordinate[0]}, {gold.coordinate[1]})"
    if gold.text is not None and gold.type != "call_user":
        act += f" '{gold.text}'"
    if gold.status is not None:
        act += f" {gold.status}"
    lines = [f"<b>gold:</b> {_esc(act)}"]
    if row["inquiry_required"]:
        lines += [
            "<b>inquiry required</b>: " + _wrap(row["inquiry_reason"], width),
            "<b>asks:</b> " + _wrap(gold.text or "", width),
            "<b>user:</b> " + _wrap(row["user_reply"], width),
        ]
    else:
        lines.append("inquiry not needed")
    return "<br>".join(lines)


def _marks(fig: go.Figure, row: dict, col: int | None) -> None:
    """Gold bbox (rectangle) and gold point (star) of a step on subplot `col` (None: a plain figure)."""
    where = dict(row=1, col=col) if col else {}
    bbox = list(row["gold_bbox"])
    if bbox != NO_BBOX:
        fig.add_shape(
            type="rect",
            x0=bbox[0],
            y0=bbox[1],
            x1=bbox[2],
            y1=bbox[3],
            line=dict(color=GOLD, width=3),
            name="gold_bbox",
            **where,
        )
    gold = json.loads(row["gold_action"])
    if "coordinate" in gold:
        x, y = gold["coordinate"]
        fig.add_trace(
            go.Scatter(
                x=[x],
                y=[y],
                mode="markers",
                name="gold point",
                showlegend=False,
                marker=dict(symbol="star", size=16, color=GOLD, line=dict(color="black", width=1)),
                hovertemplate="gold (%{x}, %{y})<extra></extra>",
            ),
            **where,
        )


def gold_figure(row: dict) -> go.Figure:
    """One step's screenshot (screen frame) with its gold bbox and point and an inquiry badge."""
    fig = go.Figure()
    _marks(fig, row, None)
    color = CATEGORY_COLORS.get(row["category"], "#000")
    fig.add_layout_image(
        source=row["screenshot"],
        xref="x",
        yref="y",
        x=0,
        y=0,
        sizex=SCREEN_W,
        sizey=SCREEN_H,
        xanchor="left",
        yanchor="top",
        sizing="stretch",
        layer="below",
    )
    fig.add_annotation(
        text=gold_caption(row, width=44),
        xref="paper",
        yref="paper",
        x=0.02,
        y=0.98,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        align="left",
        font=dict(size=11),
        bgcolor="rgba(255,255,255,0.9)",
        bordercolor=color,
        borderwidth=2,
        name="badge",
    )
    fig.update_layout(
        title=dict(
            text=f"{_esc(row['id'])} · {row['category']} / {row['subcategory']}<br>"
            f"<sup>{_esc(row['instruction'])}</sup>",
            font=dict(size=13),
        ),
        width=460,
        height=820,
        margin=dict(l=40, r=20, t=80, b=30),
        plot_bgcolor="white",
        showlegend=False,
        xaxis=dict(range=[0, SCREEN_W], showgrid=False, zeroline=False, constrain="domain"),
        yaxis=dict(range=[SCREEN_H, 0], showgrid=False, zeroline=False, scaleanchor="x", scaleratio=1),
    )
    return fig


def examples_figure(rows: list[dict]) -> go.Figure:
    """Screenshots side by side, one per row (e.g. per category), each with its gold bbox and point
    and below it the gold action, and for inquiry steps the reason, the question and the reply."""
    n = len(rows)
    titles = [f"<b>{r['category']}</b><br>{r['subcategory']}" for r in rows]
    fig = make_subplots(rows=1, cols=n, subplot_titles=titles, horizontal_spacing=0.02)
    for k, row in enumerate(rows, start=1):
        _marks(fig, row, k)
        ax = "" if k == 1 else str(k)
        fig.add_layout_image(
            source=row["screenshot"],
            xref=f"x{ax}",
            yref=f"y{ax}",
            x=0,
            y=0,
            sizex=SCREEN_W,
            sizey=SCREEN_H,
            xanchor="left",
            yanchor="top",
            sizing="stretch",
            layer="below",
        )
        fig.add_annotation(
            text=gold_caption(row),
            xref=f"x{ax} domain",
            yref=f"y{ax} domain",
            x=0,
            y=-0.02,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            align="left",
            font=dict(size=10),
        )
        fig.update_xaxes(range=[0, SCREEN_W], showgrid=False, zeroline=False, showticklabels=False, row=1, col=k)
        fig.update_yaxes(
            range=[SCREEN_H, 0],
            showgrid=False,
            zeroline=False,
            showticklabels=False,
            scaleanchor=f"x{ax}",
            scaleratio=1,
            row=1,
            col=k,
        )
    for ann, row in zip(fig.layout.annotations, rows):  # subplot titles in the category's colour
        ann.font = dict(size=12, color=CATEGORY_COLORS.get(row["category"], "#000"))
    fig.update_layout(
        title="One step per category, gold action in yellow",
        width=230 * n + 60,
        height=760,
        margin=dict(l=20, r=20, t=110, b=230),
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig


# --------------------------------------------------------------------- InquireMobile samples
def external_samples(fixtures_dir: str | Path = external.SAMPLES_DIR) -> dict:
    """Validate InquireMobile's sample files: {"tasks_report", "grpo_report"} (report texts),
    "tasks" (the tasks as a DataFrame) and "frames" (the GRPO records' frame detection table)."""
    fixtures_dir = Path(fixtures_dir)
    tasks_path = fixtures_dir / "tasks_en.sample.jsonl"
    grpo_path = fixtures_dir / "interactive_grpo.sample.jsonl"
    tasks = external.load_inquiremobile_tasks(tasks_path).to_pandas()
    grpo = external.load_inquiremobile_grpo(grpo_path)
    return {
        "tasks_report": external.validate_file(tasks_path).to_text(),
        "grpo_report": external.validate_file(grpo_path).to_text(),
        "tasks": tasks[["line", "category", "category_norm", "need_login", "apps", "instruction"]],
        "frames": frame_table(grpo),
    }


def frame_table(grpo: datasets.Dataset) -> pd.DataFrame:
    """One row per GRPO record: line, action type, gold point, bbox (original frame), the original
    and resized sizes, and the frame the point was found in (see `external.detect_frame`)."""
    return pd.DataFrame(
        [
            {
                "line": r["line"],
                "action": r["action"]["type"],
                "point": tuple(r["point"]) if r["point"] else None,
                "bbox": tuple(r["bbox"]) if list(r["bbox"]) != NO_BBOX else None,
                "size": f"{r['width']}x{r['height']}",
                "resized": f"{r['resized_width']}x{r['resized_height']}",
                "frame": r["frame"],
            }
            for r in grpo
        ]
    )


def describe_counts(values) -> dict:
    """Mean, median, min, max and count of a sequence of numbers, as plain JSON numbers."""
    s = pd.Series(list(values), dtype="float64")
    if s.empty:
        return {"n": 0, "mean": None, "median": None, "min": None, "max": None}
    return {
        "n": int(s.size),
        "mean": round(float(s.mean()), 3),
        "median": float(s.median()),
        "min": float(s.min()),
        "max": float(s.max()),
    }


def metrics(
    profile: Named,
    seed: int,
    summary_: dict,
    tasks: pd.DataFrame,
    lengths: pd.DataFrame,
    samples: dict,
    figures: dict,
    build_s: float | None = None,
) -> dict:
    """What the benchmark notebook measured: benchmark size, fingerprint and stats, trajectory and prompt
    lengths, what InquireMobile's samples held, the figures written (`pipeline.write_notebook_metrics`
    adds the notebook's name and the run manifest)."""
    frames = samples["frames"]["frame"].value_counts().to_dict()
    return {
        "profile": profile.name,
        "seed": seed,
        "n_tasks": summary_["tasks"],
        "fingerprint": summary_["fingerprint"],
        "n_categories": summary_["n_categories"],
        "n_subcategories": summary_["n_subcategories"],
        "safe_tasks": summary_["safe_tasks"],
        "inquiry_tasks": summary_["inquiry_tasks"],
        "stats": summary_,
        "build_or_load_s": None if build_s is None else round(build_s, 3),
        "trajectory_length": {
            "inquiry": describe_counts(tasks.loc[tasks["category"] != SAFE, "num_steps"]),
            "safe": describe_counts(tasks.loc[tasks["category"] == SAFE, "num_steps"]),
        },
        "prompt_tokens": {
            "unit": "whitespace-separated words of the prompt text",
            "text": describe_counts(lengths["text_tokens"]),
            "image_tokens": describe_counts(lengths["image_tokens"]),
            "total": describe_counts(lengths["total_tokens"]),
        },
        "inquiremobile_samples": {
            "tasks": int(len(samples["tasks"])),
            "task_categories": samples["tasks"]["category"].value_counts().sort_index().to_dict(),
            "grpo_records": int(len(samples["frames"])),
            "grpo_frames": {f: int(frames.get(f, 0)) for f in external.FRAMES},
        },
        "figures": {
            name: {k: (str(v) if v is not None else None) for k, v in paths.items()} for name, paths in figures.items()
        },
    }
