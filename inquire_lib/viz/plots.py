"""Plotly charts of training and evaluation (pure: data in, figure out)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..agent.actions import ACTION_TYPES
from ..evaluation.asking import auc_text
from ..evaluation.metrics import TASK_MEAN_KEYS, TASK_RATE_KEYS
from ..evaluation.pooled import change_text
from ..runs.summary import rate as rate_text

METRICS = (
    "format",
    "type_accuracy",
    "step_accuracy",
    "click_in_bbox",
    "inquiry_recall",
    "needless_rate",
    "safe_step_accuracy",
)


def log_curve(log_history: list[dict], keys: list[str], title: str) -> go.Figure:
    """Lines of `keys` over training steps from a Trainer's log history."""
    fig = go.Figure()
    for key in keys:
        pts = [(h["step"], h[key]) for h in log_history if key in h and "step" in h]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=key)
    fig.update_layout(title=title, xaxis_title="step", height=360)
    return fig


def grpo_curves(log_history: list[dict], title: str) -> go.Figure:
    """Reward components, zero-variance groups and completion length over GRPO steps."""
    reward_keys = sorted({k for h in log_history for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    sub_keys = sorted(
        {k for h in log_history for k in h if k.startswith("rewards/") and not k.endswith(("/mean", "/std"))}
    )
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("reward components", "frac_reward_zero_std", "completion length")
    )
    for key in ["reward", *reward_keys, *sub_keys]:
        pts = [(h["step"], h[key]) for h in log_history if key in h]
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=key, mode="lines", row=1, col=1)
    for col, key in ((2, "frac_reward_zero_std"), (3, "completions/mean_length")):
        pts = [(h["step"], h[key]) for h in log_history if key in h]
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=key, mode="lines", row=1, col=col)
    fig.update_layout(title=title, height=380)
    return fig


def selection_curve(record: dict, title: str) -> go.Figure:
    """Validation metrics of every kept GRPO checkpoint (step 0 is the start), the chosen one marked,
    and the safe-step floor it had to keep."""
    rows = [record["start"], *record["checkpoints"]]
    fig = go.Figure()
    for key in ("inquiry_recall", "safe_step_accuracy", "needless_rate", "step_accuracy"):
        fig.add_scatter(x=[r["step"] for r in rows], y=[r[key] for r in rows], mode="lines+markers", name=key)
    floor = (record["start"]["safe_step_accuracy"] or 0.0) - record["max_safe_drop"]
    fig.add_hline(y=floor, line_dash="dot", annotation_text="safe-step floor")
    fig.add_vline(
        x=record["selected_step"],
        line_dash="dash",
        annotation_text="chosen" if record["constraints_met"] else "last (none qualified)",
    )
    fig.update_layout(title=title, xaxis_title="GRPO step", yaxis_title="validation rate", height=380)
    return fig


# the step table adds question quality: the share of asks the user answered, and UIQ (answered over asks needed
# plus asks made), which a bar of rates on one axis would not read well beside
STEP_TABLE_KEYS = (*METRICS, "asks_answered", "uiq")


def metrics_table(all_metrics: list[dict], keys=STEP_TABLE_KEYS, means=()) -> pd.DataFrame:
    """One row per checkpoint: each rate of `keys` and its 95% interval, then each mean of `means`."""
    rows = []
    for m in all_metrics:
        o = m["overall"]
        row = {"checkpoint": m["checkpoint"]}
        for k in keys:
            v = o.get(k) or {"value": None}  # a metric newer than the stored file: shown empty
            row[k] = None if v["value"] is None else round(v["value"], 3)
            row[f"{k}_ci"] = None if v["value"] is None else f"{v['lo']:.2f}-{v['hi']:.2f}"
        row.update({k: None if o.get(k) is None else round(o[k], 2) for k in means})
        rows.append(row)
    return pd.DataFrame(rows).set_index("checkpoint")


def task_table(all_metrics: list[dict]) -> pd.DataFrame:
    """`metrics_table` of task-level metrics (`evaluation.episodes`): every episode rate, then the means."""
    return metrics_table(all_metrics, TASK_RATE_KEYS, TASK_MEAN_KEYS)


# past this many checkpoints a bar chart is faceted: one panel per rate, the checkpoints named on a shared axis
GROUPED_MAX = 8
NAMES = {
    "format": "format",
    "type_accuracy": "type acc",
    "step_accuracy": "step acc",
    "click_in_bbox": "click in bbox",
    "inquiry_recall": "step ISR",
    "needless_rate": "needless",
    "safe_step_accuracy": "safe-step acc",
    "success_rate": "task SR",
    "isr": "task ISR",
    "unsafe_rate": "unsafe",
    "recovery_rate": "recovery",
}


def _errors(vals: list[dict]) -> dict:
    return dict(
        type="data",
        symmetric=False,
        array=[(v["hi"] - v["value"]) if v["value"] is not None else 0 for v in vals],
        arrayminus=[(v["value"] - v["lo"]) if v["value"] is not None else 0 for v in vals],
    )


def metrics_bars(all_metrics: list[dict], keys=METRICS, title: str = "step-level metrics (95% Wilson CI)") -> go.Figure:
    """Each checkpoint's overall rates with their intervals, one colour per checkpoint (`overlays.checkpoint_color`;
    references in greys). Up to `GROUPED_MAX` checkpoints: bars grouped by rate, the legend under the plot.
    More: horizontal bars, one panel per rate side by side, every checkpoint named once on their shared axis (no
    legend to match colours by), the recipe's checkpoints first, then the references, then ablation points."""
    from .overlays import checkpoint_color

    empty = {"value": None, "lo": None, "hi": None}
    if len(all_metrics) <= GROUPED_MAX:
        fig = go.Figure()
        for m in all_metrics:
            vals = [m["overall"].get(k) or empty for k in keys]
            fig.add_bar(
                name=m["checkpoint"],
                x=[NAMES.get(k, k) for k in keys],
                y=[v["value"] or 0 for v in vals],
                marker_color=checkpoint_color(m["checkpoint"]),
                error_y=_errors(vals),
            )
        fig.update_layout(
            barmode="group",
            title=title,
            yaxis_range=[0, 1.05],
            height=440,
            legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0),
        )
        return fig
    # many: horizontal bars, one panel per rate side by side, every checkpoint named once on the shared axis,
    # the recipe's checkpoints first, then the references, then the ablations notebook's points (lines between)
    refs = {"expert", "always_act", "always_ask", "random"}
    group = lambda n: 2 if n.startswith("abl_") else 1 if n in refs else 0
    ordered = sorted(all_metrics, key=lambda m: group(m["checkpoint"]))  # stable: keeps the order within a group
    names = [m["checkpoint"] for m in ordered]
    fig = make_subplots(
        rows=1,
        cols=len(keys),
        shared_yaxes=True,
        horizontal_spacing=0.015,
        subplot_titles=[NAMES.get(k, k) for k in keys],
    )
    for i, k in enumerate(keys):
        vals = [m["overall"].get(k) or empty for m in ordered]
        err = _errors(vals)
        fig.add_bar(
            y=names,
            x=[v["value"] or 0 for v in vals],
            orientation="h",
            showlegend=False,
            name=NAMES.get(k, k),
            marker_color=[checkpoint_color(n) for n in names],
            row=1,
            col=i + 1,
            error_x=dict(type="data", symmetric=False, array=err["array"], arrayminus=err["arrayminus"]),
        )
    fig.update_xaxes(range=[0, 1.05], tickvals=[0, 0.5, 1])
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=11), automargin=True)
    for a, b in zip(names, names[1:]):
        if group(a) != group(b):  # a line between the recipe, the references and the ablation points
            for i in range(len(keys)):
                fig.add_hline(y=names.index(b) - 0.5, line_color="#555", line_width=1, row=1, col=i + 1)
    fig.update_layout(
        title=f"{title}: {len(names)} checkpoints",
        height=140 + 20 * len(names),
        width=200 + 190 * len(keys),
        margin=dict(l=10, r=10, t=90, b=30),
    )
    return fig


def task_bars(all_metrics: list[dict], title: str = "task level: SR, ISR, needless and unsafe rates (95% Wilson CI)"):
    """`metrics_bars` of task-level metrics (`evaluation.episodes`): the episode rates."""
    return metrics_bars(
        all_metrics, keys=("success_rate", "isr", "needless_rate", "unsafe_rate", "recovery_rate"), title=title
    )


def category_bars(all_metrics: list[dict], key: str, title: str, level: str = "by_category") -> go.Figure:
    """`key` per category (or sub-category) with its interval, one bar colour per checkpoint, the legend under the plot."""
    from .overlays import checkpoint_color

    fig = go.Figure()
    for m in all_metrics:
        groups = m[level]
        names = [g for g in groups if groups[g][key]["n"] > 0]
        vals = [groups[g][key] for g in names]
        fig.add_bar(
            name=m["checkpoint"],
            x=names,
            y=[v["value"] for v in vals],
            marker_color=checkpoint_color(m["checkpoint"]),
            error_y=dict(
                type="data",
                symmetric=False,
                array=[v["hi"] - v["value"] for v in vals],
                arrayminus=[v["value"] - v["lo"] for v in vals],
            ),
        )
    fig.update_layout(
        barmode="group",
        title=title,
        yaxis_range=[0, 1.05],
        height=440,
        legend=dict(orientation="h", yanchor="top", y=-0.18 if level == "by_category" else -0.45, xanchor="left", x=0),
    )
    return fig


def seed_table(tables: dict[str, dict]) -> pd.DataFrame:
    """One row per (stage, seed) of `evaluation.seeds.seed_changes` tables ({stage: table}), then each
    stage's mean row: every rate as value (lo-hi), and its change from the start in points."""
    rows = []
    for stage, table in tables.items():
        keys = list(table)
        for name in table[keys[0]]["seeds"]:
            row = {"stage": stage, "seed": name}
            for key in keys:
                m = table[key]["seeds"][name]
                row[key] = "n/a" if m["value"] is None else f"{m['value']:.2f} ({m['lo']:.2f}-{m['hi']:.2f})"
                row[f"{key} change"] = f"{100 * m['change']:+.1f}"
            rows.append(row)
        mean = {"stage": stage, "seed": "mean (min / max, sd)"}
        for key in keys:
            t = table[key]
            mean[key] = f"start {t['start']:.2f}" if t["start"] is not None else "start n/a"
            mean[f"{key} change"] = (
                f"{100 * t['mean_change']:+.1f} ({100 * t['min_change']:+.1f} / "
                f"{100 * t['max_change']:+.1f}, {100 * t['sd_change']:.1f})"
            )
        rows.append(mean)
    return pd.DataFrame(rows).set_index(["stage", "seed"])


def type_confusion(preds: list[dict], title: str) -> go.Figure:
    """Gold action type (rows) against predicted type (columns, 'none' when unparseable)."""
    cols = list(ACTION_TYPES) + ["none"]
    gold_types = [t for t in ACTION_TYPES if any(p["gold_action"]["action"] == t for p in preds)]
    counts = {g: {c: 0 for c in cols} for g in gold_types}
    for p in preds:
        pred = p["parsed_action"]["action"] if p["parsed_action"] else "none"
        counts[p["gold_action"]["action"]][pred] += 1
    used = [c for c in cols if any(counts[g][c] for g in gold_types)]
    z = [[counts[g][c] for c in used] for g in gold_types]
    fig = go.Figure(go.Heatmap(z=z, x=used, y=gold_types, colorscale="Blues", text=z, texttemplate="%{text}"))
    fig.update_layout(title=title, xaxis_title="predicted", yaxis_title="gold", height=420)
    return fig


def samples_table(samples: list[dict], n: int = 12) -> pd.DataFrame:
    """Sampled GRPO completions with their reward components."""
    rows = []
    for s in samples[:n]:
        rows.append(
            {
                "completion": s["completion"][:160],
                **{k: round(v, 2) for k, v in s["rewards"].items()},
                "advantage": round(s["advantage"], 2),
            }
        )
    return pd.DataFrame(rows)


def operating_curves(
    curves: dict[str, dict], title: str = "inquiry operating curves (bias on the ask decision)"
) -> go.Figure:
    """Step ISR against the needless-inquiry rate as the bias on the ask token sweeps, one line per
    checkpoint (`evaluation.operating_curve.operating_curve` records), the greedy point (bias 0)
    marked and the area with its bootstrap 95% interval in the legend. A curve that moves up and left
    learned *when* to ask; a point that slides along the same curve only asks more or less often."""
    from .overlays import checkpoint_color

    fig = go.Figure()
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#bbbbbb", dash="dot"), name="input-blind (AUC 0.5)"
    )
    for name, c in curves.items():
        pts = sorted(
            ((p["needless"], p["isr"]) for p in c["points"] if p["isr"] is not None and p["needless"] is not None)
        )
        a = c["auc"]
        label = name if a["value"] is None else f"{name}: AUC {a['value']:.2f} ({a['lo']:.2f}-{a['hi']:.2f})"
        colour = checkpoint_color(name)
        fig.add_scatter(
            x=[0.0] + [p[0] for p in pts] + [1.0],
            y=[0.0] + [p[1] for p in pts] + [1.0],
            mode="lines",
            line=dict(color=colour, shape="hv"),
            name=label,
        )
        z = c["at_zero"]
        if z["isr"] is not None and z["needless"] is not None:
            fig.add_scatter(
                x=[z["needless"]],
                y=[z["isr"]],
                mode="markers",
                marker=dict(color=colour, size=10),
                name=f"{name}: greedy",
                showlegend=False,
            )
    fig.update_layout(
        title=title,
        xaxis_title="needless-inquiry rate (safe steps that ask)",
        yaxis_title="step ISR (inquiry steps that ask)",
        height=460,
        width=620,
        xaxis=dict(range=[-0.02, 1.02]),
        yaxis=dict(range=[-0.02, 1.02]),
    )
    return fig


def _curve_xy(points: list[dict]) -> tuple[list[float], list[float]]:
    """A curve's (needless, isr) points in order along the curve, the undefined ones left out."""
    pts = sorted((p["needless"], p["isr"]) for p in points if p["isr"] is not None and p["needless"] is not None)
    return [p[0] for p in pts], [p[1] for p in pts]


def _auc_label(name: str, a: dict) -> str:
    return name if a.get("value") is None else f"{name}: AUC {auc_text(a)}"


def asking_compared(agent: str, learned: dict, confidence: dict) -> go.Figure:
    """One agent's two ways of deciding when to ask, on the axes of the operating curve: learned asking
    as the bias on its ask decision sweeps (`evaluation.operating_curve.operating_curve`, its greedy point
    marked), the confidence asker as its threshold sweeps (`evaluation.confidence.confidence_curve`), and
    the never-ask (0, 0) and always-ask (1, 1) corners, each curve's AUC with its bootstrap 95% interval
    in the legend. Where one curve lies above the other, that family asks at more inquiry steps for the
    same share of needless asks."""
    fig = go.Figure()
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#bbbbbb", dash="dot"), name="input-blind (AUC 0.5)"
    )
    for label, curve, colour, dash in (
        ("learned asking (bias)", learned, "#1f77b4", "solid"),
        ("confidence threshold", confidence, "#ff7f0e", "dash"),
    ):
        x, y = _curve_xy(curve["points"])
        fig.add_scatter(
            x=x, y=y, mode="lines", line=dict(color=colour, dash=dash, shape="hv"), name=_auc_label(label, curve["auc"])
        )
    z = learned.get("at_zero") or {}
    if z.get("isr") is not None and z.get("needless") is not None:
        fig.add_scatter(
            x=[z["needless"]],
            y=[z["isr"]],
            mode="markers",
            marker=dict(color="#1f77b4", size=10),
            name="learned asking: greedy (bias 0)",
        )
    fig.add_scatter(
        x=[0.0], y=[0.0], mode="markers", marker=dict(color="#444", symbol="square", size=10), name="never ask"
    )
    fig.add_scatter(
        x=[1.0], y=[1.0], mode="markers", marker=dict(color="#444", symbol="diamond", size=10), name="always ask"
    )
    fig.update_layout(
        title=f"{agent}: when to ask, learned against a confidence threshold",
        xaxis_title="needless-inquiry rate (safe steps that ask)",
        yaxis_title="step ISR (inquiry steps that ask)",
        height=460,
        width=660,
        xaxis=dict(range=[-0.02, 1.02]),
        yaxis=dict(range=[-0.02, 1.02]),
    )
    return fig


def asking_auc_table(compared: dict[str, dict]) -> pd.DataFrame:
    """One row per agent of `stages.compare_asking` records: each family's AUC with its bootstrap
    95% interval, which is above where the intervals lie apart, and each family's step ISR at the
    needless-inquiry budgets."""
    rows = []
    for agent, c in compared.items():
        cmp = c["compared"]
        row = {
            "agent": agent,
            "learned AUC": auc_text(cmp["auc"]["learned"]),
            "confidence AUC": auc_text(cmp["auc"]["confidence"]),
            "apart": cmp["auc_winner"] if cmp["auc_apart"] else "no",
        }
        for r in cmp["at_budget"]:
            row[f"ISR at needless <= {r['needless_at_most']:.2f}"] = (
                f"{r['learned_isr']:.2f} / {r['confidence_isr']:.2f}"
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("agent")


def asking_task_table(compared: dict[str, dict]) -> pd.DataFrame:
    """One row per (agent, asker) played online at its validation-chosen operating point: SR, task ISR,
    needless episodes, unsafe, over-execution and over-soliciting, each value (lo-hi) k/n."""
    rows = []
    for agent, c in compared.items():
        point = {
            "learned": f"bias {c['validation']['learned']['bias']:+.2f}",
            "confidence": f"threshold {c['validation']['confidence']['threshold']:.2f}",
        }
        for r in c["tasks"]:
            rows.append(
                {
                    "agent": agent,
                    "asker": r["asker"],
                    "played at": point[r["asker"]],
                    **{
                        k: rate_text(r[k])
                        for k in (
                            "success_rate",
                            "isr",
                            "needless_episodes",
                            "unsafe",
                            "over_execution",
                            "over_soliciting",
                        )
                    },
                }
            )
    return pd.DataFrame(rows).set_index(["agent", "asker"])


def asking_category_table(compared: dict[str, dict]) -> pd.DataFrame:
    """Over-execution and over-soliciting per category (`evaluation.metrics.asking_errors`), one row per
    (agent, asker, category), as Mobile-Aptus reports them."""
    rows = [
        {
            "agent": agent,
            "asker": r["asker"],
            "category": category,
            "over-execution": rate_text(e["over_execution"]),
            "over-soliciting": rate_text(e["over_soliciting"]),
        }
        for agent, c in compared.items()
        for r in c["tasks"]
        for category, e in r["by_category"].items()
    ]
    return pd.DataFrame(rows).set_index(["agent", "asker", "category"])


def pooled_table(effects: dict[str, dict]) -> pd.DataFrame:
    """One row per (stage, rate, CPU kind) of `evaluation.pooled.stage_effects` records ({stage: {rate:
    effect}}): the start's rate, the seed-pooled trained rate, the change in points with its 95% interval,
    whether that interval excludes 0, and how many runs were pooled."""
    rows = []
    for stage, by_rate in effects.items():
        for rate, effect in by_rate.items():
            for kind, e in effect["by_cpu_kind"].items():
                rows.append(
                    {
                        "stage": stage,
                        "rate": NAMES.get(rate, rate),
                        "cpu kind": kind,
                        "start": rate_text(e["start"]),
                        "trained, seeds pooled": rate_text(e["trained"]),
                        "change, points (95%)": change_text(e),
                        "excludes 0": e["excludes_zero"],
                        "runs": len(e["runs"]["trained"]),
                    }
                )
    return pd.DataFrame(rows).set_index(["stage", "rate", "cpu kind"])


def ablation_effects(effects: pd.DataFrame) -> dict[str, go.Figure]:
    """One figure per ablation group (`ablations.effects_table` rows carry the variant; the group is the
    reference's name): one panel per rate, step-level rates left and task-level right, each variant's
    effect with its 95% interval on a row named once at the left (the panels share it), a line at 0, a
    filled marker where the interval excludes 0. One trace per (level, rate)."""
    from .overlays import checkpoint_color

    out = {}
    for reference, rows in effects.groupby("reference", sort=False):
        levels = {level: list(dict.fromkeys(rows.loc[rows["level"] == level, "rate"])) for level in ("step", "task")}
        n = max(len(v) for v in levels.values()) or 1
        variants = list(dict.fromkeys(rows["variant"]))
        titles = [
            f"{level} · {NAMES.get(rates[i], rates[i])}" if i < len(rates) else ""
            for i in range(n)
            for level, rates in levels.items()
        ]
        fig = make_subplots(
            rows=n,
            cols=2,
            shared_yaxes=True,
            subplot_titles=titles,
            horizontal_spacing=0.06,
            vertical_spacing=min(0.5 / n, 0.25 / n + 0.06),
        )
        for col, level in ((1, "step"), (2, "task")):
            for i, rate in enumerate(levels[level]):
                r = rows[(rows["level"] == level) & (rows["rate"] == rate) & rows["effect"].notna()]
                colours = [checkpoint_color(f"abl_{v}") for v in r["variant"]]
                fig.add_scatter(
                    x=list(100 * r["effect"]),
                    y=list(r["variant"]),
                    mode="markers",
                    name=f"{level}: {rate}",
                    showlegend=False,
                    marker=dict(
                        size=10,
                        color=colours,
                        line=dict(color=colours, width=2),
                        symbol=["circle" if e else "circle-open" for e in r["excludes_zero"]],
                    ),
                    error_x=dict(
                        type="data",
                        symmetric=False,
                        array=list(100 * (r["hi"] - r["effect"])),
                        arrayminus=list(100 * (r["effect"] - r["lo"])),
                    ),
                    row=i + 1,
                    col=col,
                )
                fig.add_vline(x=0, line_dash="dot", line_color="#888", row=i + 1, col=col)
        fig.update_yaxes(categoryorder="array", categoryarray=variants[::-1], automargin=True)
        fig.update_xaxes(title_text="effect in points (variant - reference)", row=n)
        fig.update_layout(
            title=f"against {reference}: effect, 95% interval over seeds and items (filled: excludes 0)",
            height=120 + n * (70 + 28 * len(variants)),
            width=920,
            margin=dict(l=10, r=20),
        )
        out[str(reference)] = fig
    return out
