"""A self-contained HTML report of a run's step predictions, readable offline in any browser.

One file: plotly.js inlined once, screenshots embedded as data URIs in the figures, per-checkpoint
outcome tables and metrics, filter buttons (plain JS) and one card per step.
"""
from __future__ import annotations

import html
import json
import sys
from pathlib import Path

from . import overlays as viz
from ..runs.paths import write_text_atomic
from ..runs.records import PredictionFormatError
from .inspector import load_run

_OUTCOME_RANK = {o: i for i, o in enumerate(viz.FAILURES + ("correct",))}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
.note { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.filters { margin: 10px 0; }
.filters button { margin: 2px; padding: 4px 10px; border: 2px solid #999; background: #fff;
  border-radius: 4px; cursor: pointer; }
.filters button.on { background: #eee; font-weight: bold; }
.card { display: flex; gap: 16px; border: 1px solid #ddd; border-left: 8px solid #999;
  margin: 12px 0; padding: 8px; }
.card .text { font-size: 13px; max-width: 640px; overflow-wrap: anywhere; }
/* field names and headers stay whole; only values may break (long untrusted tokens) */
.card .text td:first-child, .card .text th { white-space: nowrap; }
.card pre { background: #f6f6f6; padding: 4px; font-size: 12px; }
"""

_SCRIPT = """
(function () {
  var state = {outcome: "all", checkpoint: "all"};
  function apply() {
    document.querySelectorAll(".card").forEach(function (card) {
      var ok = (state.outcome === "all" || card.dataset.outcome === state.outcome) &&
               (state.checkpoint === "all" || card.dataset.checkpoint === state.checkpoint);
      card.style.display = ok ? "" : "none";
    });
    document.querySelectorAll(".filters button").forEach(function (b) {
      b.classList.toggle("on", state[b.dataset.kind] === b.dataset.value);
    });
  }
  // A filter can come in the address, e.g. report.html#outcome=missed_inquiry&checkpoint=sft
  new URLSearchParams(location.hash.slice(1)).forEach(function (value, key) {
    if (key in state) { state[key] = value; }
  });
  document.querySelectorAll(".filters button").forEach(function (b) {
    b.addEventListener("click", function () {
      state[b.dataset.kind] = b.dataset.value;
      history.replaceState(null, "", "#" + new URLSearchParams(state).toString());
      apply();
    });
  });
  apply();
})();
"""


def _flatten(obj, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, scalar) pairs of a nested JSON object, in its order."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out.extend(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list) and all(not isinstance(v, (dict, list)) for v in obj):
        return [(prefix, obj)]
    if isinstance(obj, list):
        out = []
        for i, v in enumerate(obj):
            out.extend(_flatten(v, f"{prefix}[{i}]"))
        return out
    return [(prefix, obj)]


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(value if isinstance(value, str) else json.dumps(value))


def _metrics_html(metrics: dict[str, dict]) -> str:
    """Per-checkpoint tables: top-level scalars shown, nested entries in a collapsed block."""
    parts = []
    for ckpt, data in metrics.items():
        flat = _flatten(data)
        top = [(k, v) for k, v in flat if "." not in k and "[" not in k]
        nested = [(k, v) for k, v in flat if (k, v) not in top]
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>" for k, v in top)
        more = "".join(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>" for k, v in nested)
        parts.append(
            f"<details><summary>metrics: <b>{html.escape(ckpt)}</b> "
            f"({len(flat)} values)</summary><table>{rows}</table>"
            + (f"<details><summary>detail</summary><table>{more}</table></details>" if more else "")
            + "</details>")
    return "".join(parts)


def _summary_html(preds: list[dict], checkpoints: list[str]) -> str:
    parts = []
    for ckpt in checkpoints:
        table = viz.outcome_summary([p for p in preds if p["checkpoint"] == ckpt])
        table.loc["all"] = table.sum()
        parts.append(f"<details><summary>outcomes: <b>{html.escape(ckpt)}</b> "
                     f"({int(table.loc['all'].sum())} steps)</summary>"
                     f"{table.to_html(border=0)}</details>")
    return "".join(parts)


def select_steps(preds: list[dict], checkpoints: list[str], failures_only: bool,
                 max_steps: int) -> list[dict]:
    """Steps shown in the report: failures before correct ones when capping at `max_steps`,
    then ordered by checkpoint, task and step."""
    pool = [p for p in preds if not failures_only or p["outcome"] != "correct"]
    ck = {c: i for i, c in enumerate(checkpoints)}
    by_rank = sorted(pool, key=lambda p: (_OUTCOME_RANK[p["outcome"]], ck[p["checkpoint"]],
                                          p["task_id"], p["step"]))
    chosen = by_rank[:max(max_steps, 0)]
    return sorted(chosen, key=lambda p: (ck[p["checkpoint"]], p["task_id"], p["step"]))


def _skipped_html(skipped: list[tuple[dict, str]]) -> str:
    if not skipped:
        return ""
    items = "".join(f"<li>{html.escape(p['id'])} ({html.escape(p['checkpoint'])}): {html.escape(why)}</li>"
                    for p, why in skipped)
    return (f"<details open><summary><b>{len(skipped)} step(s) skipped</b>: their screenshot could not "
            f"be embedded</summary><ul class='note'>{items}</ul></details>")


def write_report(run_dir: str | Path, out_path: str | Path, failures_only: bool = False,
                 max_steps: int = 200, skipped: list | None = None) -> Path:
    """Write one self-contained HTML report of the run's step predictions; return its path.

    Shows at most `max_steps` step cards (failures first when capping), only failures when
    `failures_only`. Written atomically. Only screenshots that resolve inside the run folder (after
    symlinks) and are PNG files are embedded; a step whose screenshot is elsewhere, missing or not a
    PNG is left out, listed in the report and appended to `skipped` as (prediction, reason).
    """
    run = load_run(run_dir)
    out_path = Path(out_path)
    skipped = skipped if skipped is not None else []
    steps = []
    for pred in select_steps(run.preds, run.checkpoints, failures_only, max_steps):
        try:
            run.screenshot(pred)
        except (PredictionFormatError, FileNotFoundError) as exc:
            skipped.append((pred, str(exc)))
            continue
        steps.append(pred)
    pool_n = sum(1 for p in run.preds if not failures_only or p["outcome"] != "correct")

    counts = {o: sum(1 for p in steps if p["outcome"] == o) for o in viz.OUTCOMES}
    buttons = [f"<button data-kind='outcome' data-value='all'>all ({len(steps)})</button>"]
    for o in viz.OUTCOMES:
        if counts[o]:
            buttons.append(f"<button data-kind='outcome' data-value='{o}' "
                           f"style='border-color:{viz.OUTCOME_COLORS[o]}'>{o} ({counts[o]})</button>")
    if len(run.checkpoints) > 1:
        buttons.append("<br><button data-kind='checkpoint' data-value='all'>all checkpoints</button>")
        buttons += [f"<button data-kind='checkpoint' data-value='{html.escape(c, quote=True)}'>"
                    f"{html.escape(c)}</button>" for c in run.checkpoints]

    cards = []
    for i, pred in enumerate(steps):
        fig = viz.step_figure(pred, run.screenshot(pred), frame="screen")
        # plotly.js goes in once, with the first figure; the others reuse it.
        fig_html = fig.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"step-fig-{i}",
                               config={"displaylogo": False})
        cards.append(
            f"<div class='card' id='card-{i}' data-outcome='{pred['outcome']}' "
            f"data-checkpoint='{html.escape(pred['checkpoint'], quote=True)}' "
            f"data-id='{html.escape(pred['id'], quote=True)}' "
            f"style='border-left-color:{viz.OUTCOME_COLORS[pred['outcome']]}'>"
            f"<div class='fig'>{fig_html}</div>"
            f"<div class='text'>{viz.step_details_html(pred)}</div></div>")

    title = f"Step predictions: {html.escape(str(run.run_dir))}"
    shown = (f"{len(steps)} of {pool_n} {'failing ' if failures_only else ''}steps shown"
             + (" (failures first, capped by max_steps)" if len(steps) + len(skipped) < pool_n else "")
             + (f", {len(skipped)} skipped" if skipped else ""))
    doc = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{title}</h1><div class='note'>checkpoints: "
        f"{html.escape(', '.join(run.checkpoints))} · {shown}</div>"
        f"{_skipped_html(skipped)}{_summary_html(run.preds, run.checkpoints)}{_metrics_html(run.metrics)}"
        f"<div class='filters'>{''.join(buttons)}</div>"
        + ("".join(cards) if cards else "<p><i>no steps to show</i></p>")
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )
    write_text_atomic(out_path, doc)
    return out_path


def report_main(run_dir: str | Path, out: str | Path, failures_only: bool = False) -> int:
    """CLI entry: write the report, print its path and, on stderr, each step left out and why;
    on a missing or malformed run print the error to stderr and return 1."""
    skipped: list = []
    try:
        path = write_report(run_dir, out, failures_only=failures_only, skipped=skipped)
    except (FileNotFoundError, PredictionFormatError) as exc:
        print(f"inquire report: {exc}", file=sys.stderr)
        return 1
    for pred, why in skipped:
        print(f"inquire report: skipped {why}", file=sys.stderr)
    print(f"wrote {path}" + (f" ({len(skipped)} step(s) skipped, listed in the report)" if skipped else ""))
    return 0
