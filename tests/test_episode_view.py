"""Tests of the inspector of episodes (`viz.episode_view`, `viz.inspector.EpisodeInspector`) and of the report's
online section: on a synthetic run whose trajectories.jsonl is written here, turn by turn, so that every number
checked below (first wrong step, its kind, recovery, the overlay's point and box) is known in advance. The last
tests render the report in headless Chromium (slow)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import browser  # noqa: E402
import synthetic_run as syn  # noqa: E402

from inquire_lib.viz import episode_view as ev  # noqa: E402
from inquire_lib.viz.inspector import EpisodeInspector, episode_pair, episode_table, load_run  # noqa: E402
from inquire_lib.viz.report import report_main, select_episodes, write_report  # noqa: E402

CLICK = {"action": "click", "coordinate": [130, 205]}  # syn.gold_for("click"): its box is syn.BUTTON_BBOX
ASK = {"action": "call_user", "text": "Should I send 50 EUR to Ann Lee?"}
BACK = {"action": "system_button", "button": "Back"}
OWN_BBOX = [50, 170, 210, 240]  # a box the turn itself carries, which wins over the expert step's
MISS_POINT = [300, 650]
REPLY = "Yes, send it to <b>Ann Lee</b>."
FIRST_WRONG_RGB = (213, 0, 0)  # episode_view.FIRST_WRONG_COLOR


def _turn(k, gold, parsed, outcome, on_path=True, path_index=None, **extra) -> dict:
    think = f"turn {k}: I look at the screen"
    raw = (
        "<tool_call>{bad"
        if parsed is None
        else f"<think>{think}</think><tool_call>{json.dumps({'name': 'mobile_use', 'arguments': parsed})}</tool_call>"
    )
    return {
        "step": k,
        "on_path": on_path,
        "path_index": k if path_index is None else path_index,
        "history": [],
        "raw_output": raw,
        "think": None if parsed is None else think,
        "parsed_action": parsed,
        "parse_error": "bad_json" if parsed is None else None,
        "format_ok": parsed is not None,
        "gold_action": gold,
        "outcome": outcome,
        "unsafe": False,
        "needless": False,
        "user_reply": None,
        **extra,
    }


def _episodes(checkpoint: str) -> list[dict]:
    """Per checkpoint, in file order. sft: t0_risk goes wrong at turn 2 (a click outside the box), strays off
    the path at 3 and is back on it, correct, at 4, and still fails; t2_safe succeeds; t3_intent misses the ask
    at turn 0. base: t0_risk cannot be parsed at turn 0; t2_safe succeeds."""
    if checkpoint == "sft":
        t0 = [
            _turn(0, CLICK, {"action": "click", "coordinate": [100, 200]}, "correct"),
            _turn(1, ASK, {"action": "call_user", "text": "Send 50 EUR to Ann?"}, "correct", user_reply=REPLY),
            _turn(2, CLICK, {"action": "click", "coordinate": MISS_POINT}, "wrong_argument", gold_bbox=OWN_BBOX),
            _turn(3, BACK, {"action": "click", "coordinate": [20, 40]}, "wrong_type", on_path=False, path_index=2),
            _turn(4, CLICK, {"action": "click", "coordinate": [120, 210]}, "correct", path_index=2),
        ]
        t0[2]["raw_output"] += syn.INJECTION  # untrusted text that must stay text
        safe = [_turn(k, CLICK, {"action": "click", "coordinate": [130, 200]}, "correct") for k in range(2)]
        intent = [_turn(0, ASK, {"action": "click", "coordinate": [250, 400]}, "missed_inquiry")]
        return [
            _episode("t0_risk", "risk", "money_transfer", False, t0),
            _episode("t2_safe", "safe", "safe", True, safe),
            _episode("t3_intent", "intent", "ambiguous_recipient", False, intent),
        ]
    t0 = [_turn(0, CLICK, None, "unparseable")]
    safe = [_turn(k, CLICK, {"action": "click", "coordinate": [130, 200]}, "correct") for k in range(2)]
    return [_episode("t0_risk", "risk", "money_transfer", False, t0), _episode("t2_safe", "safe", "safe", True, safe)]


def _episode(task_id, category, subcategory, success, steps) -> dict:
    return {
        "task_id": task_id,
        "category": category,
        "subcategory": subcategory,
        "instruction": f"Do the {subcategory.replace('_', ' ')} task",
        "success": success,
        "n_steps": len(steps),
        "frame": dict(syn.FRAME),
        "steps": steps,
    }


def write_episodes(run: Path, extra: dict | None = None) -> Path:
    """Each checkpoint's trajectories.jsonl and turn screenshots (named as `evaluation.episodes._screen_file`)."""
    for ckpt in syn.CHECKPOINTS:
        rows = []
        for ep in _episodes(ckpt):
            for st in ep["steps"]:
                st["screenshot"] = f"screens/traj_{ckpt}_{ep['task_id']}_{st['step']}.png"
                st["screen_title"] = f"App / screen {st['step']}"
                syn.screenshot(st["step"]).save(run / "eval" / st["screenshot"])
            rows.append({"checkpoint": ckpt, **ep})
        rows += (extra or {}).get(ckpt, [])  # written as given
        (run / "eval" / ckpt / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(write_episodes(syn.write_run(tmp_path_factory.mktemp("episodes"))))


def _sft(run, task_id):
    return run.episode("sft", task_id)


def _named(items, name):
    return next(item for item in items if item.name == name)


# ----- which episodes -----------------------------------------------------------------------------
def test_first_wrong_step_and_recovery(run):
    s = ev.episode_summary(_sft(run, "t0_risk"))
    assert (s["first_wrong"], s["first_wrong_kind"], s["kind"]) == (2, "wrong click", "wrong click")
    assert (s["recovered"], s["recovered_at"], s["turns"], s["asks"], s["success"]) == (True, 4, 5, 1, False)
    s = ev.episode_summary(_sft(run, "t3_intent"))
    assert (s["first_wrong"], s["kind"], s["recovered"], s["recovered_at"]) == (
        0,
        "missed ask (on the path)",
        False,
        None,
    )
    s = ev.episode_summary(run.episode("base", "t0_risk"))
    assert (s["first_wrong"], s["kind"], s["recovered"]) == (0, "unparseable", False)
    s = ev.episode_summary(_sft(run, "t2_safe"))
    assert (s["first_wrong"], s["kind"], s["recovered_at"]) == (None, "succeeded", None)
    # the turn back on the path must be correct too: turn 3 is off the path, turn 4 the first correct on it
    assert ev.recovery_turn(_sft(run, "t0_risk"), 2) == 4 and ev.recovery_turn(_sft(run, "t0_risk"), None) is None


def test_filters_put_failed_episodes_first(run):
    online = run.online()
    ids = lambda eps: [(ep["checkpoint"], ep["task_id"]) for ep in eps]  # noqa: E731
    # file order is t0_risk, t2_safe, t3_intent; the failed ones come first
    assert ids(ev.filter_episodes(online, checkpoint="sft")) == [
        ("sft", "t0_risk"),
        ("sft", "t3_intent"),
        ("sft", "t2_safe"),
    ]
    assert ids(ev.filter_episodes(online, kind="succeeded")) == [("base", "t2_safe"), ("sft", "t2_safe")]
    assert ids(ev.filter_episodes(online, kind="wrong click")) == [("sft", "t0_risk")]
    assert ids(ev.filter_episodes(online, subcategory="money_transfer", kind="unparseable")) == [("base", "t0_risk")]
    assert ev.filter_episodes(online, checkpoint="sft", kind="needless ask") == []
    with pytest.raises(ValueError, match="kind 'wrong' is not one of"):
        ev.filter_episodes(online, kind="wrong")


def test_kind_table_counts_the_failed_episodes(run):
    table = episode_table(run)
    assert list(table.index) == ["base", "sft"]
    # kinds with no failed episode are left out
    assert list(table.columns) == [
        "episodes",
        "failed",
        "wrong click",
        "missed ask (on the path)",
        "unparseable",
        "recovered after it",
    ]
    assert table.loc["base"].tolist() == [2, 1, 0, 0, 1, 0]
    assert table.loc["sft"].tolist() == [3, 2, 1, 1, 0, 1]
    assert episode_pair(run) == ("base", "sft")  # both fail; no expert in this run


def test_malformed_episodes_are_left_out_and_named(tmp_path):
    bad = {"sft": [{"task_id": "t9", "success": True, "steps": 3}]}
    run = load_run(write_episodes(syn.write_run(tmp_path), extra=bad))
    assert [ep["task_id"] for ep in run.online()["sft"]] == ["t0_risk", "t2_safe", "t3_intent"]
    assert run.malformed_episodes() == [
        ("sft", "episode 4 of trajectories.jsonl: field 'subcategory' must be a str, got None")
    ]
    assert ev.episode_problem({**_episode("t", "safe", "safe", True, []), "steps": []}) == "the episode has no turns"
    turn = _turn(0, CLICK, None, "meh", screenshot="s.png")
    assert ev.episode_problem(_episode("t", "safe", "safe", True, [turn])).startswith("turn 0: outcome 'meh'")


# ----- one turn and the strip ---------------------------------------------------------------------
def test_turn_records_take_the_gold_box_from_the_turn_or_the_expert_step(run):
    recs = run.turn_records(_sft(run, "t0_risk"))
    assert [r["gold_bbox"] for r in recs] == [
        syn.BUTTON_BBOX,  # on the path at expert step 0, due the same click as that step's record
        syn.NO_BBOX,  # an ask: no element
        OWN_BBOX,  # the turn's own box
        syn.NO_BBOX,  # off the path
        syn.BUTTON_BBOX,  # back on the path at expert step 2
    ]
    assert [r["inquiry_required"] for r in recs] == [False, True, False, False, False]
    assert recs[1]["inquiry_reason"] == "the expert asks “Should I send 50 EUR to Ann Lee?”"
    assert recs[2]["id"] == "t0_risk turn 2" and recs[2]["screenshot"] == "screens/traj_sft_t0_risk_2.png"
    # a turn on the path whose gold action differs from the expert step's record gets no box from it
    other = {**_sft(run, "t0_risk")["steps"][0], "gold_action": {"action": "click", "coordinate": [1, 1]}}
    assert ev.turn_gold_bbox("t0_risk", other, ev.expert_boxes(run.preds)) is None


def test_strip_figure_draws_each_turn_with_its_overlay(run):
    fig = run.strip(_sft(run, "t0_risk"))
    col_w = int(fig.layout.width) // 5
    assert fig.layout.width == 5 * col_w and col_w == 370  # a one-turn step figure's width, 360x720 screen
    assert [im.xref for im in fig.layout.images] == ["x", "x2", "x3", "x4", "x5"]
    shapes = fig.layout.shapes
    box = _named(shapes, "0/gold_bbox")
    assert (box.xref, [box.x0, box.y0, box.x1, box.y1]) == ("x", syn.BUTTON_BBOX)
    box = _named(shapes, "2/gold_bbox")
    assert (box.xref, box.yref, [box.x0, box.y0, box.x1, box.y1]) == ("x3", "y3", OWN_BBOX)
    assert "3/gold_bbox" not in {s.name for s in shapes}
    predicted = _named(fig.data, "2/predicted")
    assert (predicted.xaxis, list(predicted.x), list(predicted.y)) == ("x3", MISS_POINT[:1], MISS_POINT[1:])
    gold = _named(fig.data, "2/gold")
    assert (list(gold.x), list(gold.y)) == ([130], [205])
    # the badge only where an ask was due or made, with the user's reply (escaped)
    notes = fig.layout.annotations
    assert [a.name for a in notes if a.name.endswith("/badge")] == ["1/badge"]
    badge = _named(notes, "1/badge").text
    assert "<b>Model asked:</b>" in badge and "<b>User:</b> Yes, send it to &lt;b&gt;Ann Lee&lt;/b&gt;." in badge
    assert _named(notes, "1/badge").xref == "x2 domain"
    wrong = _named(notes, "first_wrong")
    assert (wrong.xref, wrong.text) == ("x3 domain", "<b>first wrong step: wrong click</b>")
    assert _named(notes, "back_on_path").xref == "x5 domain"
    assert _named(shapes, "first_wrong_frame").xref == "x3 domain"
    assert _named(notes, "2/actions").text.startswith("gold: click (130, 205)")
    # an episode that never comes back says so, and has no back-on-path banner
    fig = run.strip(_sft(run, "t3_intent"))
    assert _named(fig.layout.annotations, "first_wrong").text.endswith("· did not recover")
    assert "back_on_path" not in {a.name for a in fig.layout.annotations}
    assert "Inquiry required" in _named(fig.layout.annotations, "0/badge").text  # due, not asked
    with pytest.raises(ValueError, match="one of each per turn"):
        ev.strip_figure(_sft(run, "t3_intent"), [], [])


def test_turns_html_marks_the_first_wrong_step_and_keeps_text_inert(run):
    ep = _sft(run, "t0_risk")
    text = ev.turns_html(ep, 370)
    turns = re.findall(r"<div class='turn' data-turn='(\d)' data-outcome='(\w+)'", text)
    assert turns == [("0", "correct"), ("1", "correct"), ("2", "wrong_argument"), ("3", "wrong_type"), ("4", "correct")]
    assert text.count("class='first-wrong'") == 1 and text.count("class='back-on-path'") == 1
    third = text.split("data-turn='2'")[1].split("data-turn='3'")[0]
    assert "first wrong step: wrong click</b>, recovered at turn 4" in third
    assert "user replied:</b> Yes, send it to &lt;b&gt;Ann Lee&lt;/b&gt;." in text
    assert syn.INJECTION not in text and "&lt;img src=x onerror=" in text
    assert "off the path" in text.split("data-turn='3'")[1] and "on the path (expert step 2)" in third
    head = ev.episode_header_html(ep)
    assert "first wrong step: turn 2, wrong click</b> · recovered at turn 4" in head and "1 ask(s)" in head


# ----- the widget ---------------------------------------------------------------------------------
def test_episode_inspector_filters_and_compares_two_checkpoints(run):
    app = EpisodeInspector(run)
    s = app.state
    assert (s["checkpoint"], s["checkpoint_b"], s["episode"], s["episodes"]) == (
        "base",
        None,
        "t0_risk",
        ["t0_risk", "t2_safe"],
    )
    assert s["shown"]["kind"] == "unparseable" and app.figure_b is None
    assert list(app.kind_dd.options) == ["(all)", "unparseable", "succeeded"]

    s = app.select(checkpoint="sft", checkpoint_b="base")
    assert list(app.kind_dd.options) == ["(all)", "wrong click", "missed ask (on the path)", "succeeded"]
    assert s["episodes"] == ["t0_risk", "t3_intent", "t2_safe"] and s["episode"] == "t0_risk"
    assert (s["shown"]["first_wrong"], s["shown"]["recovered_at"]) == (2, 4)
    assert (s["shown_b"]["checkpoint"], s["shown_b"]["first_wrong"]) == ("base", 0)  # same task under B
    assert app.figure_a.layout.width == 5 * 370 and app.figure_b.layout.width == 370
    assert app.episode_dd.options[0] == ("t0_risk · money_transfer · wrong click at turn 2", "t0_risk")

    s = app.select(kind="succeeded")
    assert s["episodes"] == ["t2_safe"] and s["shown"]["success"] and s["shown_b"]["success"]
    # the strip shrinks from 5 turns to 2: the axes the longer one left are hidden, not left drawn empty
    axes = app._slots["A"].layout.to_plotly_json()
    assert axes["xaxis2"]["visible"] and not axes["xaxis3"]["visible"] and not axes["yaxis5"]["visible"]
    s = app.select(kind="missed ask (on the path)")
    assert s["episodes"] == ["t3_intent"] and s["shown_b"] is None  # base never played t3_intent
    assert "base has no episode on task t3_intent" in app._slots["B_head"].value
    s = app.select(kind="succeeded", subcategory="money_transfer")
    assert s["episodes"] == [] and s["shown"] is None
    assert "no episode matches these filters" in app._slots["A_head"].value
    with pytest.raises(ValueError, match="kind 'other' is not one of"):
        app.select(kind="other")


def test_episode_inspector_needs_online_episodes(tmp_path):
    with pytest.raises(ValueError, match="has no online episodes"):
        EpisodeInspector(syn.write_run(tmp_path))


# ----- the report ---------------------------------------------------------------------------------
def _episode_tags(text: str) -> list[str]:
    return re.findall(r"<details class='episode'[^>]*>", text)


def test_report_opens_on_the_failed_episodes(run, tmp_path):
    text = write_report(run.run_dir, tmp_path / "r.html").read_text(encoding="utf-8")
    body = text[text.index("<body>") :]
    tags = _episode_tags(body)
    # failures first: the online section (its table, then the strips) before the step summary and the cards
    assert (
        body.index("<h2 id='online'>")
        < body.index("<table class='kinds'>")
        < body.index(tags[0])
        < body.index("<h2 id='steps'>")
        < body.index("<table class='summary'>")
        < body.index("class='card'")
    )
    found = [
        (re.search(r"data-checkpoint='(\w+)'", t)[1], re.search(r"data-task='(\w+)'", t)[1], t.endswith(" open>"))
        for t in tags
    ]
    assert found == [("base", "t0_risk", True), ("sft", "t0_risk", True), ("sft", "t3_intent", True)]
    assert [re.search(r"data-first-wrong='(\d*)'", t)[1] for t in tags] == ["0", "2", "0"]
    assert [re.search(r"data-recovered='(\w+)'", t)[1] for t in tags] == ["false", "true", "false"]
    assert "3 of 5 online episodes failed; 3 shown, turn by turn." in body
    # the cards are still all there, and each distinct turn screenshot is stored once beside the 8 step screens
    assert len(re.findall(r"<div class='card'", body)) == 16
    images = json.loads(re.search(r"<script type='application/json' id='images'>(.*?)</script>", text).group(1))
    assert len(images) == 8 + 5  # the turn screens are syn.screenshot(0..4): 5 distinct images
    assert syn.INJECTION not in text


def test_report_deals_the_episode_budget_and_lists_what_it_left_out(tmp_path, capsys):
    root = write_episodes(syn.write_run(tmp_path))
    assert [(e["checkpoint"], e["task_id"]) for e in select_episodes(load_run(root).online(), ["base", "sft"], 2)] == [
        ("base", "t0_risk"),
        ("sft", "t0_risk"),
    ]
    text = write_report(root, tmp_path / "b.html", max_episodes=2).read_text()
    assert len(_episode_tags(text)) == 2 and "3 shown" not in text and "(max_episodes 2, shared" in text
    (root / "eval" / "screens" / "traj_sft_t0_risk_3.png").unlink()
    assert report_main(root, tmp_path / "m.html") == 0
    cap = capsys.readouterr()
    assert "1 episode(s) left out" in cap.out
    assert "inquire report: left out sft: episode t0_risk: screenshot" in cap.err and "does not exist" in cap.err
    assert [re.search(r"data-task='(\w+)'", t)[1] for t in _episode_tags((tmp_path / "m.html").read_text())] == [
        "t0_risk",
        "t3_intent",
    ]


def test_report_without_online_episodes_says_so(tmp_path):
    text = write_report(syn.write_run(tmp_path), tmp_path / "r.html").read_text()
    assert "No online episodes in this run" in text and _episode_tags(text) == []


# ----- in a real browser --------------------------------------------------------------------------
def _chromium(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        browser.chromium("episode report browser test"),
        "--headless",
        *browser.OFFLINE_FLAGS,
        "--virtual-time-budget=8000",
        f"--user-data-dir={tmp_path / ('profile-' + name)}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


@pytest.mark.slow
def test_report_failure_strips_render_first_in_headless_chromium(run, tmp_path):
    path = write_report(run.run_dir, tmp_path / "r.html")
    dom = _chromium(tmp_path, "dom", "--dump-dom", path.as_uri()).stdout
    body = dom[dom.index("<body") :]
    # plotly drew the three open strips, and the first figure of the page is the first failed episode's
    assert body.index('id="episode-fig-0" class="js-plotly-plot"') < body.index('class="card"')
    first_plot = body.index('class="js-plotly-plot"')
    assert body.index('id="episode-fig-0"') < first_plot < body.index('id="episode-fig-1"')
    strips = re.findall(r'<details class="episode"[^>]*>.*?</details>', body, re.S)
    assert len(strips) == 3 and all('class="plot-container plotly"' in s for s in strips)
    # in the sft t0_risk strip: 5 screenshots, the first wrong step's banner, the reply in the badge and below
    sft = strips[1]
    assert len(re.findall(r'<image[^>]*href="data:image/png;base64,[^"]{100,}"', sft)) == 5
    assert ">first wrong step: wrong click</tspan>" in sft and ">back on the path</tspan>" in sft
    assert '<tspan style="font-weight:bold">User:</tspan>' in sft
    assert "user replied:</b> Yes, send it to &lt;b&gt;Ann Lee&lt;/b&gt;." in sft
    assert '<img src="x"' not in dom
    # the checkpoint filter hides the other checkpoint's episodes
    dom = _chromium(tmp_path, "filter", "--dump-dom", path.as_uri() + "#checkpoint=sft").stdout
    hidden = re.findall(r'<details class="episode"[^>]*data-checkpoint="(\w+)"[^>]*style="display: none;"', dom)
    assert hidden == ["base"]


@pytest.mark.slow
def test_report_screenshot_shows_the_strip_at_the_top(run, tmp_path):
    path = write_report(run.run_dir, tmp_path / "r.html", checkpoints=["sft"])
    png = tmp_path / "shot.png"
    _chromium(tmp_path, "shot", f"--screenshot={png}", "--window-size=1400,1200", path.as_uri())
    with Image.open(png) as im:
        px = np.asarray(im.convert("RGB")).astype(int)

    def count(rgb, tol=24):
        return int((np.abs(px - np.array(rgb)).max(axis=2) <= tol).sum())

    # the first strip (sft t0_risk) is in view at the top: the magenta block of its turns' screenshots
    # (300 x 130 screen px at about 0.86 display scale, about 29,000 px a turn; three turns and more fit),
    # the first wrong step's red banner and dashed frame, and the gold boxes and stars
    assert count(syn.MAGENTA) > 3 * 25_000
    assert count(FIRST_WRONG_RGB) > 2_000
    assert count((255, 214, 0)) > 600


def test_inquire_report_takes_an_episode_budget_and_refuses_a_bad_one(tmp_path, capsys):
    from inquire_lib import cli

    assert cli.main(["report", str(tmp_path), "-o", str(tmp_path / "r.html"), "--max-episodes", "0"]) == 2
    assert "argument --max-episodes: expected a positive number, got 0" in capsys.readouterr().err
    args = cli._parser().parse_args(["report", str(tmp_path), "--max-episodes", "3"])
    assert args.max_episodes == 3 and cli._parser().parse_args(["report", str(tmp_path)]).max_episodes == 24
