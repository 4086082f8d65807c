"""Tests of inquire_lib.viz.inspector: reading runs, schema errors, filters, and the headless widget app."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic_run as syn  # noqa: E402

from inquire_lib.viz import overlays as viz  # noqa: E402
from inquire_lib.viz.inspector import (  # noqa: E402
    Inspector,
    PredictionFormatError,
    checkpoint_order,
    compare_pair,
    episodes,
    filter_steps,
    load_run,
    outcome_options,
    read_predictions,
)
from inquire_lib.runs.records import ORDER, REFERENCES  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return syn.write_run(tmp_path_factory.mktemp("run"))


def _ids(preds):
    return [p["id"] for p in preds]


def test_synthetic_records_carry_exactly_the_schema_fields():
    for p in syn.all_preds():
        assert set(p) - {"rewards"} == set(syn.SCHEMA_FIELDS)
        assert ("rewards" in p) == (p["checkpoint"] == "sft")


def test_load_run_reads_every_checkpoint(run_dir):
    run = load_run(run_dir)
    assert run.checkpoints == ["base", "sft"]
    assert len(run.preds) == 2 * len(syn.SPEC)
    assert [p["checkpoint"] for p in run.preds] == ["base"] * 8 + ["sft"] * 8
    assert run.preds == syn.all_preds()  # the schema round-trips unchanged
    assert run.trajectories == {}  # absent trajectories.jsonl is not an error
    assert set(run.metrics) == {"base", "sft"}
    # derived from the records: base has 4 of 8 types right, sft 3 (its wrong_argument counts)
    assert run.metrics["base"]["overall"]["type_accuracy"]["value"] == 0.5
    assert run.metrics["sft"]["overall"]["type_accuracy"]["value"] == 0.375
    assert run.metrics["sft"]["overall"]["outcomes"] == {
        "correct": 2,
        "missed_inquiry": 2,
        "needless_inquiry": 1,
        "wrong_type": 1,
        "wrong_argument": 1,
        "unparseable": 1,
    }
    shot = run.screenshot(run.preds[0])
    assert shot.size == (360, 720) and shot.getpixel((100, 500)) == syn.MAGENTA
    assert run.by_id("sft", "t2_safe/0")["outcome"] == "needless_inquiry"
    assert run.by_id("sft", "nope/0") is None


def test_load_run_reads_trajectories_when_present(tmp_path):
    run = load_run(syn.write_run(tmp_path, trajectories=True, metrics=False))
    assert run.trajectories == {c: [{"task_id": "t0_risk", "success": True, "steps": 3}] for c in ("base", "sft")}
    assert run.metrics == {}


def test_missing_run_and_missing_screenshot_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="step_predictions.jsonl under"):
        load_run(tmp_path)
    empty = tmp_path / "empty" / "eval" / "sft"
    empty.mkdir(parents=True)
    (empty / "step_predictions.jsonl").write_text("\n")
    with pytest.raises(PredictionFormatError, match="hold no records"):
        load_run(tmp_path / "empty")
    run = load_run(syn.write_run(tmp_path))
    (run.eval_dir / "screens" / "t0_risk_0.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"t0_risk_0\.png of prediction 't0_risk/0'"):
        run.screenshot(run.preds[0])


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda r: r.pop("gold_bbox"), "field 'gold_bbox' is missing"),
        (lambda r: r.update(step="1"), "field 'step' has type str, expected int"),
        (lambda r: r.update(step=True), "field 'step' has type bool, expected int"),
        (lambda r: r.update(think=3), "field 'think' has type int, expected str or null"),
        (lambda r: r.update(outcome="great"), "field 'outcome' is 'great'"),
        (lambda r: r.update(gold_bbox=[1, 2, 3]), "field 'gold_bbox' must be 4 numbers"),
        (lambda r: r["frame"].pop("model_w"), "field 'frame.model_w' must be a positive int"),
        (lambda r: r.update(parsed_action={"coordinate": [1, 2]}), "field 'parsed_action.action'"),
        (lambda r: r.update(history=["ok", 2]), "field 'history' must be a list of strings"),
        (lambda r: r.update(rewards={"format": "high"}), "field 'rewards' must map names to numbers"),
    ],
)
def test_schema_errors_name_file_line_and_field(tmp_path, mutate, message):
    recs = syn.all_preds()[:3]
    mutate(recs[1])
    path = tmp_path / "step_predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(PredictionFormatError) as err:
        read_predictions(path)
    assert str(err.value).startswith(f"{path}:2: ")
    assert message in str(err.value)


def test_bad_json_and_duplicate_ids_are_reported(tmp_path):
    path = tmp_path / "step_predictions.jsonl"
    recs = syn.all_preds()[:2]
    path.write_text(json.dumps(recs[0]) + "\n\n{not json\n")
    with pytest.raises(PredictionFormatError, match=r"step_predictions\.jsonl:3: invalid JSON"):
        read_predictions(path)
    path.write_text(json.dumps(recs[0]) + "\n" + json.dumps(recs[0]) + "\n")
    with pytest.raises(PredictionFormatError, match=r":2: field 'id' 't0_risk/0' repeats line 1"):
        read_predictions(path)


def test_filter_steps_values_in_ids_out():
    preds = syn.all_preds()
    assert _ids(filter_steps(preds, checkpoint="sft", outcome="missed_inquiry")) == ["t0_risk/1", "t3_intent/0"]
    assert _ids(filter_steps(preds, checkpoint="base", outcome="missed_inquiry")) == ["t0_risk/1", "t1_privacy/0"]
    assert _ids(filter_steps(preds, checkpoint="base", category="safe")) == ["t2_safe/0", "t2_safe/1"]
    assert _ids(filter_steps(preds, subcategory="login_credentials", outcome="unparseable")) == ["t1_privacy/1"]
    assert [p["checkpoint"] for p in filter_steps(preds, outcome="unparseable")] == ["base", "sft"]
    assert filter_steps(preds, category="risk", outcome="needless_inquiry") == []
    assert len(filter_steps(preds)) == 16


def test_episodes_keep_first_appearance_order():
    preds = syn.all_preds()
    assert episodes(preds) == ["t0_risk", "t1_privacy", "t2_safe", "t3_intent"]
    assert episodes(filter_steps(preds, checkpoint="sft", outcome="missed_inquiry")) == ["t0_risk", "t3_intent"]
    assert episodes(list(reversed(preds))) == ["t3_intent", "t2_safe", "t1_privacy", "t0_risk"]
    assert episodes([]) == []


def test_outcome_options_put_missed_inquiry_first():
    assert outcome_options(syn.all_preds()) == [
        "missed_inquiry",
        "correct",
        "needless_inquiry",
        "wrong_type",
        "wrong_argument",
        "unparseable",
    ]
    only = [p for p in syn.all_preds() if p["outcome"] in ("wrong_type", "correct")]
    assert outcome_options(only) == ["correct", "wrong_type"]


def test_inspector_defaults_to_first_missed_inquiry(run_dir):
    insp = Inspector(run_dir)
    s = insp.state
    assert (s["checkpoint"], s["checkpoint_b"], s["outcome"], s["category"]) == ("base", None, "missed_inquiry", None)
    assert s["episodes"] == ["t0_risk", "t1_privacy"]
    assert (s["episode"], s["step"], s["id"], s["id_b"]) == ("t0_risk", 1, "t0_risk/1", None)
    assert insp.step_slider.max == 2 and insp.play.max == 2  # the whole episode, for context
    assert isinstance(insp.figure_a, go.Figure) and insp.figure_b is None
    assert "t0_risk/1" in insp.figure_a.layout.title.text
    assert len(insp.strip.layout.images) == 3
    assert [s.line.width for s in insp.strip.layout.shapes] == [3, 7, 3]
    assert isinstance(insp.fig_box.children[0], go.FigureWidget)
    assert "t0_risk/1" in insp.text_box.children[0].value
    assert insp.widget.children[0] is not None


def test_inspector_select_drives_the_shown_step(run_dir):
    insp = Inspector(run_dir)
    s = insp.select(checkpoint="sft", outcome="missed_inquiry", episode="t3_intent")
    assert (s["id"], s["episodes"]) == ("t3_intent/0", ["t0_risk", "t3_intent"])
    assert insp.current["outcome"] == "missed_inquiry" and insp.current["checkpoint"] == "sft"

    s = insp.select(outcome=None, category="privacy")
    assert (s["episodes"], s["id"]) == (["t1_privacy"], "t1_privacy/0")
    assert [o for o in insp.subcategory_dd.options] == ["(all)", "login_credentials"]
    s = insp.select(step=1)
    assert s["id"] == "t1_privacy/1" and insp.current["outcome"] == "unparseable"

    # the same step, side by side with checkpoint B
    s = insp.select(checkpoint_b="base")
    assert (s["id"], s["id_b"]) == ("t1_privacy/1", "t1_privacy/1")
    assert insp.current_b["checkpoint"] == "base" and insp.current_b["outcome"] == "wrong_type"
    assert "base" in insp.figure_b.layout.title.text and "sft" in insp.figure_a.layout.title.text
    assert len(insp.fig_box.children) == 2 and len(insp.text_box.children) == 2

    # switching checkpoint A keeps a step that still matches the filters
    s = insp.select(checkpoint="base")
    assert (s["checkpoint"], s["id"], s["id_b"]) == ("base", "t1_privacy/1", "t1_privacy/1")

    s = insp.select(frame="model")
    assert s["id"] == "t1_privacy/1"
    assert list(insp.figure_a.layout.xaxis.range) == [0, 112]
    assert list(insp.figure_b.layout.yaxis.range) == [224, 0]


def test_inspector_widget_events_update_state(run_dir):
    insp = Inspector(run_dir)
    insp.outcome_dd.value = "wrong_type"  # as a click in the browser would
    assert (insp.state["id"], insp.state["episodes"]) == ("t1_privacy/1", ["t1_privacy"])
    insp.checkpoint_dd.value = "sft"
    assert (insp.state["id"], insp.state["episodes"]) == ("t2_safe/1", ["t2_safe"])
    insp.step_slider.value = 0
    assert insp.state["id"] == "t2_safe/0" and insp.current["outcome"] == "needless_inquiry"
    insp.category_dd.value = "risk"
    assert insp.state["id"] is None and insp.current is None  # no risk step has wrong_type
    assert "no step matches" in insp.step_label.value and insp.fig_box.children == ()
    insp.outcome_dd.value = "(all)"
    assert insp.state["episodes"] == ["t0_risk"] and insp.state["id"] == "t0_risk/0"


def test_inspector_rejects_values_not_on_offer(run_dir):
    insp = Inspector(run_dir)
    with pytest.raises(ValueError, match="checkpoint 'grpo' is not one of"):
        insp.select(checkpoint="grpo")
    with pytest.raises(ValueError, match="step 7 is not one of"):
        insp.select(step=7)
    with pytest.raises(ValueError, match="episode 't2_safe' is not one of"):
        insp.select(episode="t2_safe")  # no missed inquiry in that episode
    assert insp.state["id"] == "t0_risk/1"


def test_inspector_reports_a_missing_b_step(tmp_path):
    run = syn.write_run(tmp_path)
    lines = (run / "eval" / "base" / "step_predictions.jsonl").read_text().splitlines()
    (run / "eval" / "base" / "step_predictions.jsonl").write_text(
        "".join(line + "\n" for line in lines if '"t3_intent/0"' not in line)
    )
    insp = Inspector(run)
    s = insp.select(checkpoint="sft", checkpoint_b="base", episode="t3_intent")
    assert (s["id"], s["id_b"]) == ("t3_intent/0", None)
    assert "checkpoint base has no step t3_intent/0" in insp.fig_box.children[1].value
    assert viz.OUTCOME_COLORS["missed_inquiry"] in insp.step_label.value


# ----- real checkpoint names: training order, references, the rest ------------------------------


def _named_run(root: Path, outcomes: dict[str, str | None]) -> Path:
    """A run whose checkpoints are the keys of `outcomes`, written in name order; each holds the
    synthetic `base` records, every outcome replaced by the given one (None keeps them)."""
    run = syn.write_run(root, metrics=False)
    base = [p for p in syn.all_preds() if p["checkpoint"] == "base"]
    for ckpt in ("base", "sft"):
        (run / "eval" / ckpt / "step_predictions.jsonl").unlink()
        (run / "eval" / ckpt).rmdir()
    (run / "metrics").mkdir(exist_ok=True)
    for name in sorted(outcomes):
        folder = run / "eval" / name
        folder.mkdir()
        recs = [dict(p, checkpoint=name, outcome=outcomes[name] or p["outcome"]) for p in base]
        folder.joinpath("step_predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        (run / "metrics" / f"step_{name}.json").write_text(json.dumps({"checkpoint": name}))
    return run


def test_checkpoint_order_is_training_then_references_then_names():
    assert ORDER[:4] == ("untrained", "base_agent", "sft_weak", "sft_full")
    assert REFERENCES == ("expert", "always_act", "always_ask", "random")
    names = [
        "zeta",
        "random",
        "grpo_weak",
        "expert",
        "sft_weak",
        "alpha",
        "untrained",
        "sft_weak",
        "always_ask",
        "sft_full",
        "grpo_task",
        "base_agent",
        "grpo_full",
    ]
    assert checkpoint_order(names) == [
        "untrained",
        "base_agent",
        "sft_weak",
        "sft_full",
        "grpo_weak",
        "grpo_full",
        "grpo_task",
        "expert",
        "always_ask",
        "random",
        "alpha",
        "zeta",
    ]
    assert checkpoint_order(["sft", "base"]) == ["base", "sft"]
    assert checkpoint_order([]) == []


def test_load_run_orders_checkpoints_and_records_by_training_stage(tmp_path):
    names = ["random", "sft_full", "grpo_weak", "alpha", "sft_weak", "expert"]
    run = load_run(_named_run(tmp_path, dict.fromkeys(names)))
    order = ["sft_weak", "sft_full", "grpo_weak", "expert", "random", "alpha"]
    assert run.checkpoints == order
    assert [p["checkpoint"] for p in run.preds] == [c for c in order for _ in syn.SPEC]
    assert [p["id"] for p in run.preds[:8]] == [f"{t}/{s}" for t, s, *_ in syn.SPEC]  # file order kept
    assert list(run.metrics) == order


@pytest.mark.parametrize(
    "names,pair",
    [
        (["untrained", "sft_weak", "sft_full", "grpo_weak", "grpo_full", "expert"], ("sft_weak", "grpo_weak")),
        (["expert", "sft_full", "untrained", "base_agent", "sft_weak", "random"], ("sft_weak", "sft_full")),
        (["grpo_full", "sft_full", "random"], ("sft_full", "grpo_full")),
        (["random", "sft_full", "expert"], ("sft_full", "expert")),
        (["random", "expert"], ("expert", "random")),
        (["sft", "base"], ("base", "sft")),
        (["only"], ("only", None)),
        ([], (None, None)),
    ],
)
def test_compare_pair(names, pair):
    assert compare_pair(names) == pair


def test_inspector_starts_on_given_pair_or_first_checkpoint_with_a_missed_inquiry(tmp_path):
    run = load_run(_named_run(tmp_path, {"untrained": "unparseable", "sft_weak": None, "sft_full": "correct"}))
    insp = Inspector(run)  # untrained has no missed inquiry; sft_weak (base outcomes) has two
    s = insp.state
    assert (s["checkpoint"], s["checkpoint_b"], s["outcome"]) == ("sft_weak", None, "missed_inquiry")
    assert s["id"] == "t0_risk/1"

    insp = Inspector(run, checkpoint="sft_weak", checkpoint_b="sft_full")
    s = insp.state
    assert (s["checkpoint"], s["checkpoint_b"], s["outcome"]) == ("sft_weak", "sft_full", "missed_inquiry")
    assert (s["id"], s["id_b"]) == ("t0_risk/1", "t0_risk/1")
    assert insp.current_b["outcome"] == "correct" and len(insp.fig_box.children) == 2

    insp = Inspector(run, checkpoint="sft_full")  # no missed inquiry there: no outcome filter
    assert (insp.state["outcome"], insp.state["id"]) == (None, "t0_risk/0")
    with pytest.raises(ValueError, match="checkpoint_b 'grpo_weak' is not one of"):
        Inspector(run, checkpoint_b="grpo_weak")


def test_inspector_updates_its_figure_widgets_in_place(run_dir):
    # A new FigureWidget ships plotly.js (~5 MB) to the browser: one per slot, reused.
    insp = Inspector(run_dir, checkpoint_b="sft")
    strip, fig_a, fig_b = insp.strip_box.children[0], *insp.fig_box.children
    text_a = insp.text_box.children[0]
    assert all(isinstance(f, go.FigureWidget) for f in (strip, fig_a, fig_b))
    insp.select(checkpoint="sft", outcome="needless_inquiry")
    insp.step_slider.value = 1  # t2_safe/1: a gold swipe (an arrow), a Back button: no markers
    insp.frame_tb.value = "model"
    assert insp.state["id"] == "t2_safe/1"
    assert insp.strip_box.children[0] is strip and insp.text_box.children[0] is text_a
    assert insp.fig_box.children[0] is fig_a and insp.fig_box.children[1] is fig_b

    def spec(fig):  # the figure without its traces' random uids
        d = go.FigureWidget(fig).to_dict()
        return d["layout"], [{k: v for k, v in t.items() if k != "uid"} for t in d["data"]]

    for widget, fig in ((fig_a, insp.figure_a), (fig_b, insp.figure_b), (strip, insp.strip)):
        assert spec(widget) == spec(fig)
    assert "t2_safe/1 · sft" in fig_a.layout.title.text and list(fig_a.layout.xaxis.range) == [0, 112]
    assert len(fig_a.data) == 0 and [a.name for a in fig_a.layout.annotations] == ["gold_swipe", "badge", "actions"]
    assert "t2_safe/1" in text_a.value


def test_inspection_order_is_trained_then_others_then_starts_then_references():
    from inquire_lib.runs.records import inspection_order

    names = ["random", "untrained", "grpo_full", "abl_no_a11y_s0", "base_agent", "sft_full", "expert", "sft_weak"]
    assert inspection_order(names) == [
        "sft_weak",
        "sft_full",
        "grpo_full",
        "abl_no_a11y_s0",
        "base_agent",
        "untrained",
        "expert",
        "random",
    ]
    assert inspection_order([]) == [] and inspection_order(["untrained"]) == ["untrained"]


def test_inspector_and_report_open_on_a_trained_checkpoints_failures(tmp_path):
    """The untrained model and the base agent fail most (the untrained one may not even parse), so they come
    after the trained checkpoints: in the inspector's menu and its first state, and in the report's cards."""
    import re

    from inquire_lib.viz.report import write_report

    run_dir = _named_run(
        tmp_path, {"untrained": "unparseable", "base_agent": None, "sft_full": None, "always_act": None}
    )
    insp = Inspector(load_run(run_dir))
    assert list(insp.checkpoint_dd.options) == ["sft_full", "base_agent", "untrained", "always_act"]
    assert (insp.state["checkpoint"], insp.state["outcome"]) == ("sft_full", "missed_inquiry")
    text = write_report(run_dir, tmp_path / "r.html", failures_only=True, max_cards=8).read_text()
    order = re.findall(r"<div class='card'[^>]*data-checkpoint='(\w+)'", text)
    assert order[0] == "sft_full" and order == sorted(
        order, key=["sft_full", "base_agent", "untrained", "always_act"].index
    )
    buttons = re.findall(r"data-kind='checkpoint' data-value='(\w+)'", text)
    assert buttons == ["all", "sft_full", "base_agent", "untrained", "always_act"]
    assert re.findall(r"<tr data-checkpoint='(\w+)'>", text) == ["untrained", "base_agent", "sft_full", "always_act"]
