"""Tests of inquire_lib.viz.overlays: overlay geometry in both frames, colours, badges, strips, summaries."""

from __future__ import annotations

import base64
import html
import io
import sys
from pathlib import Path

import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import synthetic_run as syn  # noqa: E402

from inquire_lib.viz import overlays as viz  # noqa: E402

S = 112 / 360  # model/screen scale of the CPU profiles' frame, equal on both axes (224/720)

# One record per outcome, taken from the synthetic run (checkpoint "sft" then "base").
BY_OUTCOME = {}
for _p in syn.all_preds()[::-1]:
    BY_OUTCOME[_p["outcome"]] = _p


def _named(items, name):
    return [i for i in items if i.name == name]


def _image_size(source: str) -> tuple[int, int]:
    assert source.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))).size


def test_every_outcome_has_a_distinct_colour():
    assert (
        set(viz.OUTCOME_COLORS)
        == set(viz.OUTCOMES)
        == {"correct", "missed_inquiry", "needless_inquiry", "wrong_type", "wrong_argument", "unparseable"}
    )
    colours = list(viz.OUTCOME_COLORS.values()) + [viz.GOLD_COLOR]
    assert len(set(c.lower() for c in colours)) == 7


@pytest.mark.parametrize("frame,scale,size", [("screen", 1.0, (360, 720)), ("model", S, (112, 224))])
@pytest.mark.parametrize("outcome", viz.OUTCOMES)
def test_step_figure_geometry_colour_and_badge(outcome, frame, scale, size):
    pred = BY_OUTCOME[outcome]
    fig = viz.step_figure(pred, syn.screenshot(pred["step"]), frame=frame)
    colour = viz.OUTCOME_COLORS[outcome]
    w, h = size

    # the image as the frame sees it, axes in that frame's pixels, y pointing down
    (img,) = fig.layout.images
    assert (img.x, img.y, img.sizex, img.sizey, img.xref, img.yref) == (0, 0, w, h, "x", "y")
    assert _image_size(img.source) == size
    assert list(fig.layout.xaxis.range) == [0, w]
    assert list(fig.layout.yaxis.range) == [h, 0]

    # gold bbox rectangle, scaled into the frame
    rects = _named(fig.layout.shapes, "gold_bbox")
    if pred["gold_bbox"] == syn.NO_BBOX:
        assert rects == []
    else:
        (r,) = rects
        assert r.type == "rect" and r.line.color == viz.GOLD_COLOR
        x0, y0, x1, y1 = pred["gold_bbox"]
        assert (r.x0, r.y0, r.x1, r.y1) == pytest.approx((x0 * scale, y0 * scale, x1 * scale, y1 * scale))
        if frame == "model":
            assert (r.x0, r.y0, r.x1, r.y1) == pytest.approx(
                (60 * 112 / 360, 180 * 112 / 360, 200 * 112 / 360, 230 * 112 / 360)
            )

    # gold point (click steps) and predicted point (click predictions)
    gold = pred["gold_action"]
    golds = _named(fig.data, "gold")
    if gold["action"] == "click":
        assert (golds[0].x[0], golds[0].y[0]) == pytest.approx(
            (gold["coordinate"][0] * scale, gold["coordinate"][1] * scale)
        )
    else:
        assert golds == []
    parsed = pred["parsed_action"]
    predicted = _named(fig.data, "predicted")
    if parsed is not None and parsed["action"] == "click":
        (m,) = predicted
        assert (m.x[0], m.y[0]) == pytest.approx((parsed["coordinate"][0] * scale, parsed["coordinate"][1] * scale))
        assert m.marker.color == colour
    else:
        assert predicted == []

    # outcome colour on the frame and the title
    (border,) = _named(fig.layout.shapes, "outcome_frame")
    assert border.line.color == colour and (border.xref, border.yref) == ("paper", "paper")
    assert fig.layout.title.font.color == colour
    assert outcome in fig.layout.title.text and pred["id"] in fig.layout.title.text

    # inquiry badge: required or not, why, and the question when the model asked
    (badge,) = _named(fig.layout.annotations, "badge")
    text = badge.text
    assert badge.bordercolor == colour
    if pred["inquiry_required"]:
        assert text.startswith("<b>Inquiry required</b>")
        assert f"{pred['category']} / {pred['subcategory']}" in text
        assert pred["inquiry_reason"] in text.replace("<br>", " ")  # wrapped to the badge width
    else:
        assert text.startswith("<b>Inquiry not required</b>")
        assert "reason:" not in text
    asked = parsed is not None and parsed["action"] == "call_user"
    assert asked == (outcome == "needless_inquiry")  # the one synthetic prediction that asks
    assert ("Model asked:" in text) == asked
    if asked:
        # the whole question, escaped (untrusted markup, never live), wrapped at spaces into lines
        shown = text.split("<b>Model asked:</b> ", 1)[1].replace("<br>", " ")
        assert shown == "“" + html.escape(parsed["text"], quote=False) + "”"
        assert "<img" not in text and "&lt;img src=x" in text


def test_expected_outcome_set_is_covered():
    assert set(BY_OUTCOME) == set(viz.OUTCOMES)


@pytest.mark.parametrize("frame,scale", [("screen", 1.0), ("model", S)])
def test_swipe_is_drawn_as_arrows(frame, scale):
    pred = syn.make_pred("t9", 0, "safe", "safe", False, "swipe", "correct", "sft")
    fig = viz.step_figure(pred, syn.screenshot(0), frame=frame)
    (g,) = _named(fig.layout.annotations, "gold_swipe")
    (p,) = _named(fig.layout.annotations, "predicted_swipe")
    # arrow tail (ax, ay) at coordinate, head (x, y) at coordinate2, both in data coordinates
    assert (g.ax, g.ay, g.x, g.y) == pytest.approx((180 * scale, 600 * scale, 180 * scale, 200 * scale))
    assert (p.ax, p.ay, p.x, p.y) == pytest.approx((170 * scale, 640 * scale, 175 * scale, 260 * scale))
    assert (p.axref, p.ayref, p.showarrow) == ("x", "y", True)
    assert p.arrowcolor == viz.OUTCOME_COLORS["correct"] and g.arrowcolor == viz.GOLD_COLOR
    assert _named(fig.data, "predicted") == [] and _named(fig.layout.shapes, "gold_bbox") == []


def test_actions_line_names_both_actions_in_the_drawn_frame():
    pred = BY_OUTCOME["wrong_argument"]  # gold click (130, 205), predicted click (300, 640)
    screen = _named(viz.step_figure(pred, syn.screenshot(0)).layout.annotations, "actions")[0].text
    model = _named(viz.step_figure(pred, syn.screenshot(0), frame="model").layout.annotations, "actions")[0].text
    assert "gold: click (130, 205)" in screen and "predicted: click (300, 640)" in screen
    assert "gold: click (40, 64)" in model and "predicted: click (93, 199)" in model
    unp = _named(viz.step_figure(BY_OUTCOME["unparseable"], syn.screenshot(0)).layout.annotations, "actions")[0].text
    assert "predicted: none (bad_json)" in unp


def test_step_figure_rejects_unknown_frame():
    with pytest.raises(ValueError, match="frame must be"):
        viz.step_figure(BY_OUTCOME["correct"], syn.screenshot(0), frame="pixels")


def test_trajectory_strip_orders_steps_and_colours_frames():
    preds = [p for p in syn.all_preds() if p["checkpoint"] == "sft" and p["task_id"] == "t0_risk"]
    shuffled = [preds[2], preds[0], preds[1]]
    shots = [syn.screenshot(p["step"]) for p in shuffled]
    fig = viz.trajectory_strip(shuffled, shots, highlight_step=1)
    assert len(fig.layout.images) == 3
    assert [im.x for im in fig.layout.images] == [0, 104, 208]  # 90 px thumbs, 14 px gaps
    assert all(_image_size(im.source) == (90, 180) for im in fig.layout.images)
    frames = [s for s in fig.layout.shapes if s.name.startswith("frame_")]
    assert [s.name for s in frames] == ["frame_0", "frame_1", "frame_2"]
    assert [s.line.color for s in frames] == [
        viz.OUTCOME_COLORS[o] for o in ("correct", "missed_inquiry", "wrong_argument")
    ]
    assert [s.line.width for s in frames] == [3, 7, 3]
    labels = [a.text for a in fig.layout.annotations if a.name.startswith("step_")]
    assert labels == ["<b>step 0</b>", "<b>step 1</b>", "<b>step 2</b>"]
    assert list(fig.data[0].customdata) == ["t0_risk/0", "t0_risk/1", "t0_risk/2"]


def test_trajectory_strip_rejects_bad_input():
    preds = syn.all_preds()
    with pytest.raises(ValueError, match="2 predictions but 1 screenshots"):
        viz.trajectory_strip(preds[:2], [syn.screenshot(0)])
    with pytest.raises(ValueError, match="one task"):
        viz.trajectory_strip(preds[2:4], [syn.screenshot(0)] * 2)


def test_outcome_summary_counts_and_failure_bar():
    sft = [p for p in syn.all_preds() if p["checkpoint"] == "sft"]
    table = viz.outcome_summary(sft)
    assert list(table.columns) == list(viz.OUTCOMES)
    assert list(table.index) == ["intent", "privacy", "risk", "safe"]
    assert table.loc["risk"].tolist() == [1, 1, 0, 0, 1, 0]
    assert table.loc["privacy"].tolist() == [1, 0, 0, 0, 0, 1]
    assert table.loc["safe"].tolist() == [0, 0, 1, 1, 0, 0]
    assert table.loc["intent"].tolist() == [0, 1, 0, 0, 0, 0]
    assert int(table.values.sum()) == len(sft)
    assert viz.outcome_summary([]).shape == (0, 6)

    fig = viz.failure_bar(sft)
    assert [t.name for t in fig.data] == list(viz.FAILURES)
    missed = fig.data[0]
    assert list(missed.x) == ["intent", "privacy", "risk", "safe"] and list(missed.y) == [1, 0, 1, 0]
    assert missed.marker.color == viz.OUTCOME_COLORS["missed_inquiry"]
    assert fig.layout.barmode == "stack"


def test_step_details_html_escapes_untrusted_text():
    pred = next(p for p in syn.all_preds() if p["id"] == "t1_privacy/0" and p["checkpoint"] == "sft")
    text = viz.step_details_html(pred)
    assert "<img" not in text and "&lt;img src=x" in text
    assert "&lt;tool_call&gt;" in text
    assert "<td>action</td>" in text
    assert "<td>format</td><td>+1.000</td>" in text  # rewards of the sft checkpoint


@pytest.mark.slow  # drives a browser: `make test` installs Chromium, `make test-fast` leaves it out
def test_save_figure_writes_html_and_png_with_chrome(tmp_path):
    assert viz.find_chrome() is not None, "no Chrome/Chromium found: install it with `apt-get install -y chromium`"
    fig = viz.failure_bar(syn.all_preds())
    paths = viz.save_figure(fig, tmp_path / "figs" / "failures")
    assert paths == {"html": tmp_path / "figs" / "failures.html", "png": tmp_path / "figs" / "failures.png"}
    assert "Plotly.newPlot" in paths["html"].read_text()
    with Image.open(paths["png"]) as im:
        assert im.format == "PNG" and im.size == (720, 420)
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["failures.html", "failures.png"]


@pytest.mark.slow  # drives a browser: `make test` installs Chromium, `make test-fast` leaves it out
def test_figure_bundle_carries_the_interactive_figure_and_its_png(tmp_path):
    fig = viz.failure_bar(syn.all_preds())
    paths = viz.save_figure(fig, tmp_path / "f")
    second = viz.save_figure(fig, tmp_path / "g")  # the second figure reuses the running Chromium
    assert paths["png"].read_bytes() == second["png"].read_bytes()
    bundle = viz.figure_bundle(fig, paths["png"])
    assert set(bundle) == {"application/vnd.plotly.v1+json", "image/png", "text/plain"}
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["type"] == "bar"
    with Image.open(io.BytesIO(base64.b64decode(bundle["image/png"]))) as im:
        assert im.format == "PNG" and im.size == (720, 420)
    no_png = viz.figure_bundle(fig, None)
    assert "image/png" not in no_png and no_png["text/plain"].startswith("<figure: ")


def test_save_figure_without_chrome_skips_png_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(viz, "find_chrome", lambda: None)
    monkeypatch.setattr(viz, "_png_notice_printed", False)
    fig = viz.failure_bar(syn.all_preds())
    first = viz.save_figure(fig, tmp_path / "a")
    second = viz.save_figure(fig, tmp_path / "b")
    assert first == {"html": tmp_path / "a.html", "png": None}
    assert second["png"] is None and second["html"].is_file()
    out = capsys.readouterr().out
    assert out.count("PNG export skipped") == 1 and "apt-get install -y chromium" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]


def test_outcome_table_counts_per_checkpoint():
    preds = syn.all_preds()
    table = viz.outcome_table(preds, ["sft", "base", "grpo"])
    assert list(table.index) == ["sft", "base", "grpo"]
    assert list(table.columns) == list(viz.OUTCOMES) + ["n"]
    assert table.loc["base"].tolist() == [4, 2, 0, 1, 0, 1, 8]
    assert table.loc["sft"].tolist() == [2, 2, 1, 1, 1, 1, 8]
    assert table.loc["grpo"].tolist() == [0] * 7
    assert list(viz.outcome_table(preds).index) == ["base", "sft"]  # order of first appearance


def test_badge_lines_fit_the_plot_width():
    pred = dict(
        syn.all_preds()[1],
        inquiry_reason="signing in to Social needs the password of cleo@mail.com (privacy/login_credentials)",
        parsed_action={"action": "call_user", "text": "word " * 40},
    )
    lines = viz.badge_text(pred).split("<br>")
    plain = [line.replace("<b>", "").replace("</b>", "") for line in lines]
    assert max(len(line) for line in plain) <= 46
    assert plain[2].startswith("reason: signing in") and "cleo@mail.com" in " ".join(plain)
    assert plain[5].startswith("Model asked: “word") and plain[8].endswith("…")
    assert len(plain) == 2 + 3 + 4  # head, category, 3 reason lines, 4 question lines


def test_step_details_name_a_blank_raw_output():
    pred = dict(syn.all_preds()[0], raw_output="\n" * 64)
    text = viz.step_details_html(pred)
    raw_part = text.split("raw model output:")[1].split("gold vs predicted")[0]
    assert "only whitespace: 64 characters (\\n)" in raw_part and "<pre" not in raw_part
    assert "<i class='raw-blank'>empty</i>" in viz.step_details_html(dict(pred, raw_output=""))
    assert "only whitespace: 3 characters (\\t space)" in viz.step_details_html(dict(pred, raw_output=" \t "))


def test_step_details_say_whether_the_user_would_answer():
    pred = dict(syn.all_preds()[0], inquiry_required=True)
    assert "<b>user:</b>" not in viz.step_details_html(pred)  # a record from before the field, or no ask
    assert "<b>user:</b> answered</div>" in viz.step_details_html(dict(pred, ask_answered=True))
    vague = viz.step_details_html(dict(pred, ask_answered=False))
    assert "not answered: the question names nothing the step misses" in vague
    needless = viz.step_details_html(dict(pred, ask_answered=False, inquiry_required=False))
    assert "not answered: nothing to ask here" in needless


# ----- one colour per checkpoint, and figures that stay readable with many checkpoints
def _rates(value: float) -> dict:
    from inquire_lib.evaluation.metrics import wilson

    return wilson(round(value * 20), 20)


def _metrics(names: list[str], keys) -> list[dict]:
    return [
        {"checkpoint": n, "overall": {k: _rates((i + 1) / (len(names) + 1)) for k in keys}} for i, n in enumerate(names)
    ]


def test_recipe_checkpoints_and_references_have_distinct_colours_references_grey():
    names = list(viz.CHECKPOINT_COLORS)
    assert len({viz.checkpoint_color(n) for n in names}) == len(names)
    for ref in ("expert", "always_act", "always_ask", "random", "untrained"):
        r, g, b = (int(viz.checkpoint_color(ref)[i : i + 2], 16) for i in (1, 3, 5))
        assert r == g == b, ref  # a grey
    # a further seed of a stage: its stage's colour, lighter; the same in every call
    assert viz.checkpoint_color("grpo_weak_s1") not in viz.CHECKPOINT_COLORS.values()
    assert (
        viz.checkpoint_color("grpo_weak_s1")
        == viz.checkpoint_color("grpo_weak_s1")
        != viz.checkpoint_color("grpo_weak_s2")
    )
    assert viz.checkpoint_color("abl_sft_no_think_s0") in viz._EXTRA_COLORS


def test_metrics_bars_colour_each_checkpoint_and_facet_past_eight():
    from inquire_lib.viz import plots

    few = ["untrained", "base_agent", "sft_weak", "sft_full", "always_act", "always_ask", "random"]
    fig = plots.metrics_bars(_metrics(few, plots.METRICS))
    assert [t.name for t in fig.data] == few
    assert [t.marker.color for t in fig.data] == [viz.checkpoint_color(n) for n in few]
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0  # under the plot, not cut at the side
    many = (
        few
        + ["sft_dagger_r1", "sft_more", "grpo_weak", "grpo_weak_s1", "grpo_full", "grpo_task"]
        + [f"abl_{v}_s0" for v in ("sft_baseline", "sft_no_a11y", "sft_no_think", "sft_lora", "grpo_shaped")]
    )
    keys = ("success_rate", "isr", "needless_rate", "unsafe_rate", "recovery_rate")
    fig = plots.task_bars(_metrics(many, keys))
    assert len(fig.data) == len(keys)  # one panel per rate
    # named once each on the shared axis: the recipe's checkpoints, then the references, then the ablation points
    ordered = (
        [n for n in many if n not in ("always_act", "always_ask", "random") and not n.startswith("abl_")]
        + ["always_act", "always_ask", "random"]
        + [n for n in many if n.startswith("abl_")]
    )
    assert all(list(t.y) == ordered and t.orientation == "h" and not t.showlegend for t in fig.data)
    assert list(fig.data[0].marker.color) == [viz.checkpoint_color(n) for n in ordered]
    assert fig.layout.yaxis2.matches == "y" and fig.layout.height >= 20 * len(many)
    assert len(fig.layout.shapes) == 2 * len(keys)  # a line above the references and above the ablation points
    assert [a.text for a in fig.layout.annotations] == ["task SR", "task ISR", "needless", "unsafe", "recovery"]


def test_ablation_effects_name_each_variant_once_on_a_shared_axis():
    import pandas as pd

    from inquire_lib.viz import plots

    rows = [
        {
            "variant": v,
            "reference": "sft_baseline",
            "level": level,
            "rate": rate,
            "effect": e,
            "lo": e - 0.05,
            "hi": e + 0.05,
            "excludes_zero": abs(e) > 0.05,
        }
        for v, e in (("sft_no_a11y", -0.3), ("sft_no_think", 0.4))
        for level, rates in (("step", ("inquiry_recall", "safe_step_accuracy")), ("task", ("success_rate", "isr")))
        for rate in rates
    ]
    fig = plots.ablation_effects(pd.DataFrame(rows))["sft_baseline"]
    assert len(fig.data) == 4 and not any(t.showlegend for t in fig.data)
    # the right column shares the left's rows: variant names are drawn once, left of the step panels
    assert fig.layout.yaxis2.matches == "y" or fig.layout.yaxis2.showticklabels is False
    assert [round(x) for x in fig.data[0].x] == [-30, 40]  # in points
    assert list(fig.data[0].marker.symbol) == ["circle", "circle"]
    assert [a.text for a in fig.layout.annotations][:2] == ["step · step ISR", "task · task SR"]


def test_the_step_table_carries_question_quality_with_its_interval():
    import pandas as pd

    from inquire_lib.viz.plots import metrics_table

    rate = {"value": 0.5, "lo": 0.25, "hi": 0.75, "k": 2, "n": 4}
    stored = {"checkpoint": "sft_full", "overall": {"inquiry_recall": rate, "asks_answered": rate}}
    older = {"checkpoint": "base_agent", "overall": {"inquiry_recall": rate}}  # written before the metric existed
    table = metrics_table([stored, older])
    assert table.loc["sft_full", "asks_answered"] == 0.5 and table.loc["sft_full", "asks_answered_ci"] == "0.25-0.75"
    assert pd.isna(table.loc["base_agent", "asks_answered"]) and "uiq" in table.columns
