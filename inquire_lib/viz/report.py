"""A self-contained HTML report of a run's evaluation, readable offline in any browser.

One file that opens on the online failures: the failed episodes of `eval/<checkpoint>/trajectories.jsonl`
first (a table of their first wrong steps by kind, then each episode's turn strip with its first wrong
step and whether it came back, `viz.episode_view`), then the step predictions: a summary table (one row
per checkpoint: steps, cards shown, outcome counts, headline rates with 95% CIs), filter buttons, one
card per chosen step, and the detailed metrics last. plotly.js is inlined once and every screenshot once
(figures refer to it by key and are drawn when first shown). The card budget (`max_cards`) and the
episode budget (`max_episodes`) are shared across the checkpoints, so each gets its failures; a filter
with nothing to show says why, and the checkpoint filter applies to the episodes too.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import sys
from pathlib import Path

from . import episode_view as ev
from . import overlays as viz
from ..evaluation.metrics import step_rates
from ..runs.paths import write_text_atomic
from ..runs.records import PredictionFormatError, inspection_order
from ..runs.summary import ABLATION_PREFIX
from .inspector import load_run

_OUTCOME_RANK = {o: i for i, o in enumerate(viz.FAILURES + ("correct",))}
_OPEN_EPISODES = 4  # the failed episodes drawn as the report opens; the others when opened
# the rates of the summary table, with their column titles
SUMMARY_RATES = (
    ("format", "format"),
    ("step_accuracy", "step acc"),
    ("inquiry_recall", "step ISR"),
    ("needless_rate", "needless"),
    ("safe_step_accuracy", "safe-step acc"),
    ("asks_answered", "asks answered"),
    ("uiq", "UIQ"),
)

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
.summary td { white-space: nowrap; }
.summary tr.group th { text-align: left; background: #f3f3f3; font-weight: normal; }
.summary td .swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
#empty { padding: 12px; background: #fff8e1; border: 1px solid #f0c36d; display: none; }
h2 { font-size: 17px; margin: 18px 0 4px 0; }
details.episode { border: 1px solid #ddd; border-left: 8px solid #D50000; margin: 12px 0; padding: 6px; }
details.episode > summary { cursor: pointer; font-size: 13px; }
details.episode > summary .episode-head { display: inline-block; vertical-align: top; }
.strip-scroll { overflow-x: auto; }
.strip pre { background: #f6f6f6; }
"""

_SCRIPT = """
(function () {
  var state = {outcome: "all", checkpoint: "all"};
  var images = JSON.parse(document.getElementById("images").textContent);
  var counts = JSON.parse(document.getElementById("counts").textContent);
  function draw(card) {  // a card's figure is drawn the first time it is shown
    if (card.dataset.drawn) { return; }
    var spec = JSON.parse(card.querySelector("script.fig").textContent);
    (spec.layout.images || []).forEach(function (im) { im.source = images[im.source] || im.source; });
    Plotly.newPlot(card.querySelector(".fig div"), spec.data, spec.layout, {displaylogo: false});
    card.dataset.drawn = "1";
  }
  function why() {
    var ck = state.checkpoint, oc = state.outcome;
    var ckpts = ck === "all" ? Object.keys(counts.pool) : [ck];
    var total = 0;
    ckpts.forEach(function (c) {
      var pool = counts.pool[c] || {};
      total += oc === "all" ? Object.values(pool).reduce(function (a, b) { return a + b; }, 0) : (pool[oc] || 0);
    });
    var what = (oc === "all" ? "steps" : "steps with outcome " + oc) + (ck === "all" ? "" : " of checkpoint " + ck);
    if (!(ck === "all" || ck in counts.pool)) { return "checkpoint " + ck + " is not in this report."; }
    if (total === 0) { return "No " + what + " in this run" + counts.scope + "."; }
    return "There are " + total + " " + what + ", but none got a card: the " + counts.max_cards +
      " cards are shared across checkpoints, failures first (raise --max-cards or pick --checkpoints).";
  }
  function showEpisodes() {  // the checkpoint filter applies to them; an episode is drawn when first open
    document.querySelectorAll("details.episode").forEach(function (ep) {
      var ok = state.checkpoint === "all" || ep.dataset.checkpoint === state.checkpoint;
      ep.style.display = ok ? "" : "none";
      if (ok && ep.open) { draw(ep); }
    });
  }
  document.querySelectorAll("details.episode").forEach(function (ep) {
    ep.addEventListener("toggle", function () { if (ep.open) { draw(ep); } });
  });
  function apply() {
    showEpisodes();
    var shown = 0;
    document.querySelectorAll(".card").forEach(function (card) {
      var ok = (state.outcome === "all" || card.dataset.outcome === state.outcome) &&
               (state.checkpoint === "all" || card.dataset.checkpoint === state.checkpoint);
      card.style.display = ok ? "" : "none";
      if (ok) { shown += 1; draw(card); }
    });
    var empty = document.getElementById("empty");
    empty.textContent = shown ? "" : why();
    empty.style.display = shown ? "none" : "block";
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
            + "</details>"
        )
    return "".join(parts)


def _rate(m: dict | None) -> str:
    if not m or m.get("value") is None:
        return "<td>n/a</td>"
    return f"<td>{m['value']:.2f} <span class='note'>({m['lo']:.2f}-{m['hi']:.2f})</span></td>"


def split_ablations(checkpoints: list[str]) -> tuple[list[str], list[str]]:
    """(the recipe's checkpoints and the references, the ablations notebook's points), each in the given order."""
    return (
        [c for c in checkpoints if not c.startswith(ABLATION_PREFIX)],
        [c for c in checkpoints if c.startswith(ABLATION_PREFIX)],
    )


def summary_html(preds: list[dict], checkpoints: list[str], shown: dict[str, int]) -> str:
    """The summary table: per checkpoint its colour, test steps, inquiry probes, cards shown, outcome counts
    (of the test steps, so they add up to them) and the headline rates with their 95% Wilson intervals
    (computed from the predictions; a probe counts toward step ISR only). Ablation points follow the
    recipe's checkpoints under a row of their own; a note under the table says what each count is."""
    head = (
        "<tr><th>checkpoint</th><th>test steps</th><th>probes</th><th>cards</th>"
        + "".join(f"<th>{html.escape(o)}</th>" for o in viz.OUTCOMES)
        + "".join(f"<th>{title}</th>" for _, title in SUMMARY_RATES)
        + "</tr>"
    )
    width = 4 + len(viz.OUTCOMES) + len(SUMMARY_RATES)

    def row(ckpt: str) -> str:
        mine = [p for p in preds if p["checkpoint"] == ckpt]
        rates = step_rates(mine)
        return (
            f"<tr data-checkpoint='{html.escape(ckpt, quote=True)}'><td><span class='swatch' "
            f"style='background:{viz.checkpoint_color(ckpt)}'></span>{html.escape(ckpt)}</td>"
            f"<td>{rates['n']}</td><td>{rates['n_probe']}</td><td>{shown.get(ckpt, 0)}</td>"
            + "".join(f"<td>{rates['outcomes'][o]}</td>" for o in viz.OUTCOMES)
            + "".join(_rate(rates[key]) for key, _ in SUMMARY_RATES)
            + "</tr>"
        )

    main, points = split_ablations(checkpoints)
    rows = [row(c) for c in main]
    if points:
        rows.append(
            f"<tr class='group'><th colspan='{width}'>ablation points ({len(points)}: "
            "abl_&lt;variant&gt;_s&lt;training seed&gt;, each trained on the ablation budget and measured "
            "against its reference)</th></tr>"
        )
        rows += [row(c) for c in points]
    probes = any(p.get("probe") for p in preds)
    note = (
        "<div class='note'>test steps: the held-out test steps evaluated, whose outcome columns add up to "
        "them; "
        + (
            "probes: inquiry steps of further test tasks, scored toward step ISR only (its n is "
            "the inquiry test steps plus the probes); "
            if probes
            else "probes: none in this run; "
        )
        + "cards: the steps with a card below.</div>"
    )
    return f"<table class='summary'>{head}{''.join(rows)}</table>{note}"


def _check_choice(kind: str, given, valid: list[str]) -> list[str] | None:
    if given is None:
        return None
    unknown = [g for g in given if g not in valid]
    if unknown:
        raise ValueError(f"unknown {kind} {', '.join(map(repr, unknown))}; this run has: {', '.join(valid)}")
    return list(given)


def select_steps(
    preds: list[dict], checkpoints: list[str], failures_only: bool, max_cards: int, outcomes=None
) -> list[dict]:
    """The steps that get a card. Each checkpoint's candidates (its failures when `failures_only`,
    only `outcomes` when given) are ranked failures first (missed inquiries first), then by task and
    step; the `max_cards` budget is dealt one card per checkpoint in turn, so every checkpoint with
    candidates gets its share. Returned in checkpoint, task, step order."""
    ranked = {}
    for ckpt in checkpoints:
        pool = [
            p
            for p in preds
            if p["checkpoint"] == ckpt
            and (not failures_only or p["outcome"] != "correct")
            and (outcomes is None or p["outcome"] in outcomes)
        ]
        ranked[ckpt] = sorted(pool, key=lambda p: (_OUTCOME_RANK[p["outcome"]], p["task_id"], p["step"]))
    ck = {c: i for i, c in enumerate(checkpoints)}
    chosen = _deal(ranked, checkpoints, max_cards)
    return sorted(chosen, key=lambda p: (ck[p["checkpoint"]], p["task_id"], p["step"]))


def _deal(ranked: dict[str, list], checkpoints: list[str], budget: int) -> list:
    """Up to `budget` items, one per checkpoint in turn, each checkpoint's in its ranked order: every checkpoint
    with candidates gets its share, and one with few leaves the rest to the others."""
    chosen: list = []
    taken = {c: 0 for c in checkpoints}
    budget = max(budget, 0)
    while len(chosen) < budget:
        progressed = False
        for ckpt in checkpoints:
            if len(chosen) < budget and taken[ckpt] < len(ranked[ckpt]):
                chosen.append(ranked[ckpt][taken[ckpt]])
                taken[ckpt] += 1
                progressed = True
        if not progressed:
            break
    return chosen


def select_episodes(online: dict[str, list[dict]], checkpoints: list[str], max_episodes: int) -> list[dict]:
    """The failed online episodes that get a turn strip (each with its `checkpoint` set): the `max_episodes`
    budget dealt one episode per checkpoint in turn (`checkpoints` order, trained ones first), each
    checkpoint's in file order. Returned in checkpoint order, file order within."""
    ranked = {c: ev.filter_episodes(online, checkpoint=c) for c in checkpoints}
    ranked = {c: [ep for ep in eps if not ep["success"]] for c, eps in ranked.items()}
    chosen = {id(ep) for ep in _deal(ranked, checkpoints, max_episodes)}
    return [ep for c in checkpoints for ep in ranked[c] if id(ep) in chosen]


def _skipped_html(skipped: list[tuple[dict, str]]) -> str:
    if not skipped:
        return ""
    items = "".join(
        f"<li>{html.escape(p['id'])} ({html.escape(p['checkpoint'])}): {html.escape(why)}</li>" for p, why in skipped
    )
    return (
        f"<details open><summary><b>{len(skipped)} step(s) skipped</b>: their screenshot could not "
        f"be embedded</summary><ul class='note'>{items}</ul></details>"
    )


def _png_data_uri(image) -> str:
    """plotly has already turned a PIL image into a PNG data URI when the figure was built."""
    if isinstance(image, str):
        return image
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _script_json(obj) -> str:
    """JSON safe inside a <script> element (no `</` can close it early)."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def _figure_json(fig, keys: list[str] | None, images: dict[str, str]) -> str:
    """The figure as the report's script draws it: its i-th screenshot stored once in `images` under
    `keys[i]` (None: under a digest of the image, for the turns of an episode, whose screens repeat as an
    agent asks again and again) and referred to by that key; without plotly.py's default template, ~9 KB
    of JSON per figure that plotly.js's own defaults draw the same (the figures set their colours, fonts
    and axes)."""
    for i, layout_image in enumerate(fig.layout.images):
        uri = _png_data_uri(layout_image.source)
        key = keys[i] if keys is not None else "sha1:" + hashlib.sha1(uri.encode("ascii")).hexdigest()[:20]
        images.setdefault(key, uri)
        layout_image.source = key
    spec = json.loads(fig.to_json())
    spec["layout"].pop("template", None)
    return _script_json({"data": spec["data"], "layout": spec["layout"]})


def _kinds_html(online: dict[str, list[dict]], checkpoints: list[str]) -> str:
    """`episode_view.kind_table` as a report table: per checkpoint its episodes, failed ones by kind, recovered."""
    table = ev.kind_table(online, checkpoints)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in ["checkpoint", *table.columns])
    rows = "".join(
        f"<tr data-checkpoint='{html.escape(name, quote=True)}'><td>{html.escape(name)}</td>"
        + "".join(f"<td>{int(v)}</td>" for v in row)
        + "</tr>"
        for name, row in table.iterrows()
    )
    return f"<table class='kinds'><tr>{head}</tr>{rows}</table>"


def _episode_html(run, episode: dict, i: int, images: dict[str, str]) -> str:
    """One failed episode: its header as the summary of a <details> (the first few open), and the turn strip
    with each turn's text under it, scrolling sideways together."""
    fig = run.strip(episode)
    fig.layout.title.text = ""  # the <summary> above says it
    spec = _figure_json(fig, None, images)
    width = int(fig.layout.width)
    s = ev.episode_summary(episode)
    data = {
        "checkpoint": s["checkpoint"],
        "task": s["task_id"],
        "kind": s["kind"],
        "first-wrong": "" if s["first_wrong"] is None else str(s["first_wrong"]),
        "recovered": str(s["recovered"]).lower(),
    }
    attrs = " ".join(f"data-{key}='{html.escape(value, quote=True)}'" for key, value in data.items())
    return (
        f"<details class='episode' id='episode-{i}' {attrs}{' open' if i < _OPEN_EPISODES else ''}>"
        f"<summary>{ev.episode_header_html(episode)}</summary>"
        f"<div class='strip-scroll'><div class='strip' style='width:{width}px'><div class='fig'>"
        f"<div id='episode-fig-{i}'></div><script type='application/json' class='fig'>{spec}</script></div>"
        f"{ev.turns_html(episode, width // len(episode['steps']))}</div></div></details>"
    )


def episode_section(run, checkpoints: list[str], max_episodes: int, images: dict[str, str], skipped: list[str]) -> str:
    """The report's opening: the failed online episodes of `checkpoints`, by kind of first wrong step, then one
    turn strip each (at most `max_episodes`, see `select_episodes`). An episode whose screenshots cannot be
    embedded, or that is malformed, is left out and its reason appended to `skipped`."""
    online = {c: eps for c, eps in run.online().items() if c in checkpoints}
    skipped.extend(f"{name}: {why}" for name, why in run.malformed_episodes() if name in checkpoints)
    head = "<h2 id='online'>Online episodes: the failures first</h2>"
    names = [c for c in inspection_order(checkpoints) if online.get(c)]
    if not names:
        return head + (
            "<p class='note'>No online episodes in this run: the task-level evaluation writes them to "
            "eval/&lt;checkpoint&gt;/trajectories.jsonl.</p>"
        )
    failed = sum(not ep["success"] for c in names for ep in online[c])
    chosen = select_episodes(online, names, max_episodes)
    parts = []
    for ep in chosen:
        try:
            parts.append(_episode_html(run, ep, len(parts), images))
        except (PredictionFormatError, FileNotFoundError) as exc:
            skipped.append(f"{ep['checkpoint']}: episode {ep['task_id']}: {exc}")
    note = (
        f"<div class='note'>{failed} of {sum(len(online[c]) for c in names)} online episodes failed; "
        f"{len(parts)} shown, turn by turn"
        + (f" (max_episodes {max_episodes}, shared across checkpoints)" if len(chosen) < failed else "")
        + ". Each turn: the screenshot with the gold box and point (yellow), the predicted action (its point, or the "
        "typed text and opened app under it), an inquiry badge where the agent asked or an ask was due (with the "
        "user's reply); under it the reasoning and the raw output. The first wrong step (red) is the first turn "
        "whose outcome is not correct; an episode recovered when a later turn is correct and back on the "
        "expert's path (green).</div>"
    )
    return head + note + _kinds_html(online, names) + ("".join(parts) or "<p><i>no failed episode to show</i></p>")


def _left_out_html(lines: list[str]) -> str:
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return (
        f"<details open><summary><b>{len(lines)} episode(s) left out</b></summary>"
        f"<ul class='note'>{items}</ul></details>"
    )


def write_report(
    run_dir: str | Path,
    out_path: str | Path,
    failures_only: bool = False,
    max_cards: int = 200,
    checkpoints=None,
    outcomes=None,
    skipped: list | None = None,
    max_episodes: int = 24,
    skipped_episodes: list | None = None,
) -> Path:
    """Write one self-contained HTML report of the run's evaluation; return its path.

    It opens on the failed online episodes (at most `max_episodes` turn strips, shared across
    checkpoints, see `episode_section`), then the step predictions. `checkpoints` restricts both and
    `outcomes` the step cards (an unknown name raises ValueError naming the valid ones); at most
    `max_cards` step cards, shared across checkpoints (see `select_steps`); only failing steps when
    `failures_only`. Written atomically. Only screenshots that resolve inside the run folder (after
    symlinks) and are PNG files are embedded; a step whose screenshot is elsewhere, missing or not a
    PNG is left out, listed in the report and appended to `skipped` as (prediction, reason); an
    episode with such a screenshot, or malformed, likewise, its reason appended to `skipped_episodes`.
    """
    from plotly.offline import get_plotlyjs

    run = load_run(run_dir)
    out_path = Path(out_path)
    skipped = skipped if skipped is not None else []
    skipped_episodes = skipped_episodes if skipped_episodes is not None else []
    ckpts = _check_choice("checkpoint", checkpoints, run.checkpoints) or run.checkpoints
    wanted = _check_choice("outcome", outcomes, list(viz.OUTCOMES))
    preds = []
    for p in run.preds:
        if p["checkpoint"] not in ckpts:
            continue
        try:
            run.screenshot(p)
        except (PredictionFormatError, FileNotFoundError) as exc:
            skipped.append((p, str(exc)))
            continue
        preds.append(p)
    # the cards open on the trained checkpoints' failures; the starts and the references come after
    steps = select_steps(preds, inspection_order(ckpts), failures_only, max_cards, wanted)
    in_scope = lambda p: (not failures_only or p["outcome"] != "correct") and (wanted is None or p["outcome"] in wanted)
    pool = {
        c: {
            o: sum(1 for p in preds if p["checkpoint"] == c and p["outcome"] == o and in_scope(p)) for o in viz.OUTCOMES
        }
        for c in ckpts
    }
    pool_n = sum(sum(v.values()) for v in pool.values())
    shown_per = {c: sum(1 for p in steps if p["checkpoint"] == c) for c in ckpts}

    counts = {o: sum(1 for p in steps if p["outcome"] == o) for o in viz.OUTCOMES}
    buttons = [f"<button data-kind='outcome' data-value='all'>all ({len(steps)})</button>"]
    for o in viz.OUTCOMES:
        if wanted is None or o in wanted:
            buttons.append(
                f"<button data-kind='outcome' data-value='{o}' "
                f"style='border-color:{viz.OUTCOME_COLORS[o]}'>{o} ({counts[o]})</button>"
            )
    if len(ckpts) > 1:
        button = lambda c: (
            f"<button data-kind='checkpoint' data-value='{html.escape(c, quote=True)}' "
            f"style='border-color:{viz.checkpoint_color(c)}'>{html.escape(c)} ({shown_per[c]})</button>"
        )
        main, points = split_ablations(inspection_order(ckpts))
        buttons.append("<br><button data-kind='checkpoint' data-value='all'>all checkpoints</button>")
        buttons += [button(c) for c in main]
        if points:
            buttons.append("<br><span class='note'>ablation points:</span>")
            buttons += [button(c) for c in points]

    images: dict[str, str] = {}  # screenshot key -> data URI, each stored once
    online = episode_section(run, ckpts, max_episodes, images, skipped_episodes)
    cards = []
    for i, pred in enumerate(steps):
        fig = viz.step_figure(pred, run.screenshot(pred), frame="screen")
        spec = _figure_json(fig, [f"{pred['screenshot']}#{j}" for j in range(len(fig.layout.images))], images)
        cards.append(
            f"<div class='card' id='card-{i}' data-outcome='{pred['outcome']}' "
            f"data-checkpoint='{html.escape(pred['checkpoint'], quote=True)}' "
            f"data-id='{html.escape(pred['id'], quote=True)}' "
            f"style='border-left-color:{viz.OUTCOME_COLORS[pred['outcome']]}'>"
            f"<div class='fig'><div id='step-fig-{i}'></div>"
            f"<script type='application/json' class='fig'>{spec}"
            f"</script></div><div class='text'>{viz.step_details_html(pred)}</div></div>"
        )

    scope = (" among failures" if failures_only else "") + (f" among outcomes {', '.join(wanted)}" if wanted else "")
    title = f"Evaluation report: {html.escape(str(run.run_dir))}"
    shown = (
        f"{len(steps)} of {pool_n} {'failing ' if failures_only else ''}steps shown"
        + (f" (max_cards {max_cards}, shared across checkpoints, failures first)" if len(steps) < pool_n else "")
        + (f", {len(skipped)} skipped" if skipped else "")
    )
    doc = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_STYLE}</style>"
        f"<script type='text/javascript'>window.PlotlyConfig = {{MathJaxConfig: 'local'}};</script>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{title}</h1><div class='note'>checkpoints: "
        f"{html.escape(', '.join(ckpts))} · {shown}</div>"
        f"{_skipped_html(skipped)}{_left_out_html(skipped_episodes)}{online}"
        f"<h2 id='steps'>Step predictions: the expert's path</h2>{summary_html(preds, ckpts, shown_per)}"
        f"<div class='filters'>{''.join(buttons)}</div><div id='empty'></div>"
        + ("".join(cards) if cards else "<p><i>no steps to show</i></p>")
        + "<h2>Metric details</h2>"
        + _metrics_html({c: m for c, m in run.metrics.items() if c in ckpts})
        + f"<script type='application/json' id='images'>{_script_json(images)}</script>"
        + "<script type='application/json' id='counts'>"
        + _script_json({"pool": pool, "max_cards": max_cards, "scope": scope})
        + "</script>"
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )
    write_text_atomic(out_path, doc)
    return out_path


def report_main(
    run_dir: str | Path,
    out: str | Path,
    failures_only: bool = False,
    max_cards: int = 200,
    checkpoints=None,
    outcomes=None,
    max_episodes: int = 24,
) -> int:
    """CLI entry: write the report, print its path and size and, on stderr, each step skipped and each
    episode left out, and why; on a missing or malformed run, or an unknown checkpoint or outcome, print
    the error to stderr and return 1."""
    skipped: list = []
    skipped_episodes: list = []
    try:
        path = write_report(
            run_dir,
            out,
            failures_only=failures_only,
            max_cards=max_cards,
            checkpoints=checkpoints,
            outcomes=outcomes,
            skipped=skipped,
            max_episodes=max_episodes,
            skipped_episodes=skipped_episodes,
        )
    except (FileNotFoundError, PredictionFormatError, ValueError) as exc:
        print(f"inquire report: {exc}", file=sys.stderr)
        return 1
    for pred, why in skipped:
        print(f"inquire report: skipped {why}", file=sys.stderr)
    for why in skipped_episodes:
        print(f"inquire report: left out {why}", file=sys.stderr)
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)"
        + (f"; {len(skipped)} step(s) skipped, listed in the report" if skipped else "")
        + (f"; {len(skipped_episodes)} episode(s) left out, listed in the report" if skipped_episodes else "")
    )
    return 0
