"""Plotly charts of training and evaluation (pure: data in, figure out)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..agent.actions import ACTION_TYPES

METRICS = ("format", "type_accuracy", "step_accuracy", "click_in_bbox", "inquiry_recall", "needless_rate",
           "safe_step_accuracy")


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
    sub_keys = sorted({k for h in log_history for k in h if k.startswith("rewards/") and not k.endswith(("/mean", "/std"))})
    fig = make_subplots(rows=1, cols=3, subplot_titles=("reward components", "frac_reward_zero_std", "completion length"))
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
    fig.add_vline(x=record["selected_step"], line_dash="dash",
                  annotation_text="chosen" if record["constraints_met"] else "last (none qualified)")
    fig.update_layout(title=title, xaxis_title="GRPO step", yaxis_title="validation rate", height=380)
    return fig


def metrics_table(all_metrics: list[dict], keys=METRICS) -> pd.DataFrame:
    rows = []
    for m in all_metrics:
        o = m["overall"]
        row = {"checkpoint": m["checkpoint"]}
        for k in keys:
            v = o.get(k) or {"value": None}  # a metric newer than the stored file: shown empty
            row[k] = None if v["value"] is None else round(v["value"], 3)
            row[f"{k}_ci"] = None if v["value"] is None else f"{v['lo']:.2f}-{v['hi']:.2f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("checkpoint")


def metrics_bars(all_metrics: list[dict], keys=METRICS, title: str = "step-level metrics (95% Wilson CI)") -> go.Figure:
    fig = go.Figure()
    for m in all_metrics:
        vals = [m["overall"][k] for k in keys]
        fig.add_bar(name=m["checkpoint"], x=list(keys), y=[v["value"] or 0 for v in vals],
                    error_y=dict(type="data", symmetric=False,
                                 array=[(v["hi"] - v["value"]) if v["value"] is not None else 0 for v in vals],
                                 arrayminus=[(v["value"] - v["lo"]) if v["value"] is not None else 0 for v in vals]))
    fig.update_layout(barmode="group", title=title, yaxis_range=[0, 1.05], height=420)
    return fig


def task_bars(all_metrics: list[dict], title: str = "task level: SR, ISR, needless and unsafe rates (95% Wilson CI)"):
    """`metrics_bars` of task-level metrics (`evaluation.episodes`): the episode rates."""
    return metrics_bars(all_metrics, keys=("success_rate", "isr", "needless_rate", "unsafe_rate", "recovery_rate"),
                        title=title)


def category_bars(all_metrics: list[dict], key: str, title: str, level: str = "by_category") -> go.Figure:
    fig = go.Figure()
    for m in all_metrics:
        groups = m[level]
        names = [g for g in groups if groups[g][key]["n"] > 0]
        vals = [groups[g][key] for g in names]
        fig.add_bar(name=m["checkpoint"], x=names, y=[v["value"] for v in vals],
                    error_y=dict(type="data", symmetric=False, array=[v["hi"] - v["value"] for v in vals],
                                 arrayminus=[v["value"] - v["lo"] for v in vals]))
    fig.update_layout(barmode="group", title=title, yaxis_range=[0, 1.05], height=400)
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
            mean[f"{key} change"] = (f"{100 * t['mean_change']:+.1f} ({100 * t['min_change']:+.1f} / "
                                     f"{100 * t['max_change']:+.1f}, {100 * t['sd_change']:.1f})")
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
        rows.append({"completion": s["completion"][:160], **{k: round(v, 2) for k, v in s["rewards"].items()},
                     "advantage": round(s["advantage"], 2)})
    return pd.DataFrame(rows)


def operating_curves(curves: dict[str, dict], title: str = "inquiry operating curves (bias on the ask decision)") -> go.Figure:
    """Step ISR against the needless-inquiry rate as the bias on the ask token sweeps, one line per
    checkpoint (`evaluation.operating_curve.operating_curve` records), the greedy point (bias 0)
    marked and the area with its bootstrap 95% interval in the legend. A curve that moves up and left
    learned *when* to ask; a point that slides along the same curve only asks more or less often."""
    from .overlays import checkpoint_color

    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#bbbbbb", dash="dot"), name="input-blind (AUC 0.5)")
    for name, c in curves.items():
        pts = sorted(((p["needless"], p["isr"]) for p in c["points"] if p["isr"] is not None and p["needless"] is not None))
        a = c["auc"]
        label = name if a["value"] is None else f"{name}: AUC {a['value']:.2f} ({a['lo']:.2f}-{a['hi']:.2f})"
        colour = checkpoint_color(name)
        fig.add_scatter(x=[0.0] + [p[0] for p in pts] + [1.0], y=[0.0] + [p[1] for p in pts] + [1.0], mode="lines",
                        line=dict(color=colour, shape="hv"), name=label)
        z = c["at_zero"]
        if z["isr"] is not None and z["needless"] is not None:
            fig.add_scatter(x=[z["needless"]], y=[z["isr"]], mode="markers", marker=dict(color=colour, size=10),
                            name=f"{name}: greedy", showlegend=False)
    fig.update_layout(title=title, xaxis_title="needless-inquiry rate (safe steps that ask)",
                      yaxis_title="step ISR (inquiry steps that ask)", height=460, width=620,
                      xaxis=dict(range=[-0.02, 1.02]), yaxis=dict(range=[-0.02, 1.02]))
    return fig


def ablation_effects(effects: pd.DataFrame) -> dict[str, go.Figure]:
    """One figure per ablation group (`ablations.effects_table` rows carry the variant; the group is
    the reference's name): for each variant and rate, its effect with the 95% interval, step-level
    rates left and task-level right, a line at 0; a filled marker where the interval excludes 0."""
    out = {}
    for reference, rows in effects.groupby("reference", sort=False):
        fig = make_subplots(rows=1, cols=2, subplot_titles=("step level", "task level"), horizontal_spacing=0.25)
        for col, level in ((1, "step"), (2, "task")):
            part = rows[(rows["level"] == level) & rows["effect"].notna()]
            for rate, r in part.groupby("rate", sort=False):
                y = [f"{v}" for v in r["variant"]]
                fig.add_scatter(
                    x=list(r["effect"]), y=y, mode="markers", name=f"{level}: {rate}", legendgroup=rate,
                    marker=dict(size=10, symbol=["circle" if e else "circle-open" for e in r["excludes_zero"]]),
                    error_x=dict(type="data", symmetric=False, array=list(r["hi"] - r["effect"]),
                                 arrayminus=list(r["effect"] - r["lo"])), row=1, col=col)
            fig.add_vline(x=0, line_dash="dot", row=1, col=col)
        fig.update_xaxes(title_text="effect (variant - reference)")
        fig.update_layout(title=f"ablations against {reference}: effect with 95% interval over seeds and items",
                          height=260 + 40 * rows["variant"].nunique())
        out[str(reference)] = fig
    return out
