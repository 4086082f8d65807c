"""Tests of inquire_lib.viz.report: the HTML file's content, and its rendering in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import browser  # noqa: E402
import synthetic_run as syn  # noqa: E402

from inquire_lib.viz.report import report_main, select_steps, write_report  # noqa: E402

pytestmark = pytest.mark.slow

GOLD_RGB = (255, 214, 0)  # viz.GOLD_COLOR
CHROMIUM_FLAGS = ["--headless", *browser.OFFLINE_FLAGS, "--virtual-time-budget=5000"]


def _cards(text: str) -> list[str]:
    return re.findall(r"<div class=['\"]card['\"][^>]*>", text)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    run = syn.write_run(root)
    path = write_report(run, root / "out" / "report.html")
    return path, path.read_text(encoding="utf-8")


def test_report_is_one_self_contained_file(report):
    path, text = report
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.html"]  # no temp left over
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    # plotly.js inlined exactly once, nothing fetched from the network
    assert len(re.findall(r"plotly\.js v\d+\.\d+\.\d+", text)) == 1
    assert text.count("window.PlotlyConfig") == 1
    assert not re.search(r"src=[\"']https?:", text)
    # one figure per card; each screenshot stored once (8 screens, shared by both checkpoints' cards)
    assert len(re.findall(r"<script type='application/json' class='fig'>", text)) == 16
    images = json.loads(re.search(r"<script type='application/json' id='images'>(.*?)</script>", text).group(1))
    assert len(images) == len(syn.SPEC) == 8
    assert all(v.startswith("data:image/png;base64,") for v in images.values())
    assert len(re.findall(r"data:image/png;base64,[A-Za-z0-9+/]{100,}", text)) == 8
    figs = re.findall(r"<script type='application/json' class='fig'>(.*?)</script>", text)
    assert sorted({json.loads(f)["layout"]["images"][0]["source"] for f in figs}) == sorted(images)


def test_report_has_one_card_per_step_with_its_outcome(report):
    _, text = report
    cards = _cards(text)
    assert len(cards) == 16
    outcomes = Counter(re.search(r"data-outcome='(\w+)'", c).group(1) for c in cards)
    assert outcomes == Counter(p["outcome"] for p in syn.all_preds())
    ids = [re.search(r"data-id='([^']+)'", c).group(1) for c in cards]
    assert ids[:3] == ["t0_risk/0", "t0_risk/1", "t0_risk/2"] and ids[8] == "t0_risk/0"
    assert [re.search(r"data-checkpoint='(\w+)'", c).group(1) for c in cards] == ["base"] * 8 + ["sft"] * 8
    # filter buttons for each outcome present, with counts
    assert "data-value='missed_inquiry' " in text and "missed_inquiry (4)</button>" in text
    assert "data-kind='checkpoint' data-value='sft'" in text


def test_report_starts_with_the_summary_table(report):
    _, text = report
    body = text[text.index("<body>") :]
    # the summary table comes before the filters, the cards and the metric details
    assert (
        body.index("<table class='summary'>")
        < body.index("class='filters'")
        < body.index("class='card'")
        < body.index("<h2>Metric details</h2>")
        < body.index("metrics: <b>base</b>")
    )
    rows = re.findall(r"<tr data-checkpoint='(\w+)'>(.*?)</tr>", body)
    assert [name for name, _ in rows] == ["base", "sft"]
    cells = {name: re.findall(r"<td>(.*?)</td>", row) for name, row in rows}
    # test steps, probes, cards, then correct, missed, needless, wrong type, wrong argument, unparseable
    assert cells["base"][1:10] == ["8", "0", "8", "4", "2", "0", "1", "0", "1"]
    assert cells["sft"][1:10] == ["8", "0", "8", "2", "2", "1", "1", "1", "1"]
    # step ISR: each asks at 1 of its 3 inquiry steps (Wilson 95% CI); needless: sft asks at 1 of 5 safe steps
    assert cells["base"][12] == cells["sft"][12] == "0.33 <span class='note'>(0.06-0.79)</span>"
    assert cells["base"][13].startswith("0.00 ") and cells["sft"][13].startswith("0.20 ")
    assert "outcome columns add up to them" in body and "probes: none in this run" in body
    assert "background:#" in cells["base"][0]


def test_report_metric_details(report):
    _, text = report
    assert "metrics: <b>base</b>" in text and "metrics: <b>sft</b>" in text
    assert "<td>checkpoint</td><td>base</td>" in text
    assert "<td>overall.type_accuracy.value</td><td>0.5</td>" in text  # base: 4 of 8
    assert "<td>overall.type_accuracy.value</td><td>0.375</td>" in text  # sft: 3 of 8
    # risk: base misses the one inquiry step of t0_risk, so its step ISR is 0 of 1
    assert "<td>by_category.risk.inquiry_recall.k</td><td>0</td>" in text


def test_report_keeps_untrusted_text_inert(report):
    _, text = report
    assert syn.INJECTION not in text
    assert "&lt;img src=x onerror=" in text


def test_failures_only_and_max_cards(tmp_path):
    run = syn.write_run(tmp_path)
    text = write_report(run, tmp_path / "f.html", failures_only=True).read_text()
    cards = _cards(text)
    assert len(cards) == 10 and not any("data-outcome='correct'" in c for c in cards)
    assert "10 of 10 failing steps shown" in text

    text = write_report(run, tmp_path / "m.html", max_cards=5).read_text()
    cards = _cards(text)
    # the budget is dealt to the checkpoints in turn, each one's failures first (missed inquiries first)
    assert [
        (
            re.search(r"data-checkpoint='(\w+)'", c).group(1),
            re.search(r"data-id='([^']+)'", c).group(1),
            re.search(r"data-outcome='(\w+)'", c).group(1),
        )
        for c in cards
    ] == [
        ("base", "t0_risk/1", "missed_inquiry"),
        ("base", "t1_privacy/0", "missed_inquiry"),
        ("base", "t1_privacy/1", "wrong_type"),
        ("sft", "t0_risk/1", "missed_inquiry"),
        ("sft", "t3_intent/0", "missed_inquiry"),
    ]
    assert "5 of 16 steps shown (max_cards 5, shared across checkpoints, failures first)" in text


def test_checkpoints_and_outcomes_options(tmp_path):
    run = syn.write_run(tmp_path)
    text = write_report(
        run, tmp_path / "s.html", checkpoints=["sft"], outcomes=["needless_inquiry", "wrong_type"]
    ).read_text()
    cards = _cards(text)
    assert sorted(re.search(r"data-outcome='(\w+)'", c).group(1) for c in cards) == ["needless_inquiry", "wrong_type"]
    assert all("data-checkpoint='sft'" in c for c in cards)
    assert re.findall(r"<tr data-checkpoint='(\w+)'>", text) == ["sft"] and "metrics: <b>base</b>" not in text
    assert "data-value='missed_inquiry'" not in text  # only the chosen outcomes get buttons
    with pytest.raises(ValueError, match=r"unknown checkpoint 'grpo'; this run has: base, sft"):
        write_report(run, tmp_path / "x.html", checkpoints=["grpo"])
    with pytest.raises(ValueError, match=r"unknown outcome 'missed'; this run has: correct, missed_inquiry"):
        write_report(run, tmp_path / "x.html", outcomes=["missed"])
    assert not (tmp_path / "x.html").exists()


def test_select_steps_shares_the_budget():
    chosen = select_steps(syn.all_preds(), ["base", "sft"], failures_only=False, max_cards=5)
    assert [(p["checkpoint"], p["id"]) for p in chosen] == [
        ("base", "t0_risk/1"),
        ("base", "t1_privacy/0"),
        ("base", "t1_privacy/1"),
        ("sft", "t0_risk/1"),
        ("sft", "t3_intent/0"),
    ]
    assert select_steps(syn.all_preds(), ["base", "sft"], True, 0) == []
    # a checkpoint with few candidates leaves the rest of the budget to the others
    few = select_steps(syn.all_preds(), ["base", "sft"], False, 12, outcomes=["needless_inquiry", "correct"])
    assert sum(p["checkpoint"] == "sft" for p in few) == 3 and sum(p["checkpoint"] == "base" for p in few) == 4


def test_report_main_exit_codes(tmp_path, capsys):
    run = syn.write_run(tmp_path)
    assert report_main(run, tmp_path / "r.html", True) == 0
    assert re.fullmatch(rf"wrote {re.escape(str(tmp_path / 'r.html'))} \(\d+\.\d MB\)\n", capsys.readouterr().out)
    assert report_main(run, tmp_path / "c.html", checkpoints=["nope"]) == 1
    assert "unknown checkpoint 'nope'; this run has: base, sft" in capsys.readouterr().err
    assert report_main(tmp_path / "nothing", tmp_path / "x.html", False) == 1
    assert "no eval/<checkpoint>/step_predictions.jsonl" in capsys.readouterr().err
    bad = run / "eval" / "sft" / "step_predictions.jsonl"
    bad.write_text(bad.read_text().replace('"outcome": "needless_inquiry"', '"outcome": "meh"'))
    assert report_main(run, tmp_path / "y.html", False) == 1
    err = capsys.readouterr().err
    assert f"{bad}:6: field 'outcome' is 'meh'" in err
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "y.html").exists()


# ----- in a real browser -------------------------------------------------------------------------


def _run_chromium(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        browser.chromium("report browser test"),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / ('profile-' + name)}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def test_report_renders_in_headless_chromium(report, tmp_path):
    path, _ = report
    preds = syn.all_preds()
    dom = _run_chromium(tmp_path, "dom", "--dump-dom", path.as_uri()).stdout

    # plotly.js ran: every card holds a rendered plot with its SVG layers
    assert dom.count('class="plot-container plotly"') == 16
    assert dom.count('class="main-svg"') >= 32
    # the screenshot is an SVG <image> with a PNG data URI, once per figure
    images = re.findall(r'<image[^>]*href="(data:image/png;base64,[^"]{100,})"', dom)
    assert len(images) == 16
    # overlays: gold bbox outlines drawn as stroked shapes in the gold colour
    n_bbox = sum(p["gold_bbox"] != syn.NO_BBOX for p in preds)
    assert len(re.findall(r"stroke: rgb\(255, 214, 0\);[^\"]*stroke-width: 3px", dom)) == n_bbox
    # the inquiry badge and the model's question rendered as SVG text
    n_required = sum(p["inquiry_required"] for p in preds)
    assert dom.count('<tspan style="font-weight:bold">Inquiry required</tspan>') == n_required
    assert dom.count('<tspan style="font-weight:bold">Inquiry not required</tspan>') == 16 - n_required
    n_asked = sum((p["parsed_action"] or {}).get("action") == "call_user" for p in preds)
    assert dom.count('<tspan style="font-weight:bold">Model asked:</tspan>') == n_asked
    # the reason wraps to the badge's width: one SVG line each
    assert "reason: money_transfer needs the user's</tspan>" in dom and ">consent</tspan>" in dom
    # untrusted model text stayed text: no element was injected, the page title is intact
    assert '<img src="x"' not in dom and "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1)
    assert all("display: none" not in c for c in _cards(dom))


def test_report_outcome_filter_hides_other_cards(report, tmp_path):
    path, _ = report
    dom = _run_chromium(
        tmp_path, "filter", "--dump-dom", path.as_uri() + "#outcome=missed_inquiry&checkpoint=sft"
    ).stdout
    cards = _cards(dom)
    shown = [c for c in cards if "display: none" not in c]
    assert len(cards) == 16 and len(shown) == 2
    assert all('data-outcome="missed_inquiry"' in c and 'data-checkpoint="sft"' in c for c in shown)
    assert re.search(r'<button[^>]*data-value="missed_inquiry"[^>]*class="on"', dom) or re.search(
        r'<button[^>]*class="on"[^>]*data-value="missed_inquiry"', dom
    )
    # only the shown cards were drawn
    assert dom.count('class="plot-container plotly"') == 2
    assert re.search(r'<div id="empty" style="display: none;"></div>', dom)


def test_report_empty_filter_says_why(tmp_path):
    run = syn.write_run(tmp_path)
    path = write_report(run, tmp_path / "r.html", max_cards=4)
    # base has a wrong_type step, but the 4 cards went to the missed inquiries
    dom = _run_chromium(tmp_path, "budget", "--dump-dom", path.as_uri() + "#outcome=wrong_type&checkpoint=base").stdout
    assert all("display: none" in c for c in _cards(dom))
    assert (
        "There are 1 steps with outcome wrong_type of checkpoint base, but none got a card: the 4 cards are "
        "shared across checkpoints, failures first (raise --max-cards or pick --checkpoints)."
    ) in dom
    # base never asks needlessly
    dom = _run_chromium(
        tmp_path, "none", "--dump-dom", path.as_uri() + "#outcome=needless_inquiry&checkpoint=base"
    ).stdout
    assert "No steps with outcome needless_inquiry of checkpoint base in this run." in dom


def test_report_screenshot_shows_image_and_overlay_colours(report, tmp_path):
    path, _ = report
    png = tmp_path / "shot.png"
    _run_chromium(tmp_path, "shot", f"--screenshot={png}", "--window-size=1200,2000", path.as_uri())
    with Image.open(png) as im:
        assert im.size == (1200, 2000)
        px = np.asarray(im.convert("RGB")).astype(int)

    def count(rgb, tol=24):
        return int((np.abs(px - np.array(rgb)).max(axis=2) <= tol).sum())

    # the first two cards are in view; each shows the magenta block of its screenshot
    # (300 x 130 screen px at about 0.87 display scale, about 29,000 px a card)
    assert count(syn.MAGENTA) > 40_000
    # the first card's gold bbox outline (3 px) and gold star
    assert count(GOLD_RGB) > 600


def test_summary_counts_probes_apart_and_groups_ablation_points():
    """The table says what each count is: outcome columns add up to the test steps, a probe is counted in a
    column of its own (toward step ISR only), and the ablation points sit under a row of their own."""
    from inquire_lib.viz.report import summary_html

    preds = syn.all_preds()
    probe = dict(
        next(p for p in preds if p["checkpoint"] == "sft" and p["inquiry_required"] and p["outcome"] == "correct"),
        id="t9_risk/0",
        task_id="t9_risk",
        probe=True,
    )
    point = [dict(p, checkpoint="abl_sft_no_think_s0") for p in preds if p["checkpoint"] == "sft"]
    text = summary_html(preds + [probe] + point, ["base", "sft", "abl_sft_no_think_s0"], {"sft": 3})
    rows = re.findall(r"<tr data-checkpoint='(\w+)'>(.*?)</tr>", text)
    assert [name for name, _ in rows] == ["base", "sft", "abl_sft_no_think_s0"]
    cells = {name: re.findall(r"<td>(.*?)</td>", row) for name, row in rows}
    assert cells["sft"][1:4] == ["8", "1", "3"]
    assert sum(int(c) for c in cells["sft"][4:10]) == 8  # the outcomes are the test steps'
    # the probe is asked right: step ISR 2 of 4 inquiry steps (3 test + 1 probe) instead of 1 of 3
    assert cells["sft"][12] == "0.50 <span class='note'>(0.15-0.85)</span>"
    assert text.index("ablation points (1:") < text.index("data-checkpoint='abl_sft_no_think_s0'")
    assert text.index("data-checkpoint='sft'") < text.index("ablation points (1:")
    assert "probes: inquiry steps of further test tasks, scored toward step ISR only" in text
