"""The click diagnosis reads which part of a wrong click failed from the reasoning's target."""

import json

from inquire_lib.data.benchmark import task_at, task_records
from inquire_lib.evaluation.copying import CLICK_KINDS, click_lookups


def _clicks(n_tasks=12):
    recs = [r for i in range(n_tasks) for r in task_records(task_at(0, "test", i))]
    return recs, [r for r in recs if json.loads(r["gold_action"])["action"] == "click"]


def _pred(rec, think, outcome):
    return {"id": rec["id"], "gold_action": json.loads(rec["gold_action"]), "think": think, "outcome": outcome}


def test_each_failure_is_named_by_the_part_that_went_wrong():
    recs, clicks = _clicks()
    assert len(clicks) >= 5
    gold = []
    for r in clicks:
        el = next(e for e in r["a11y"] if list(e["bbox"]) == list(r["gold_bbox"]))
        other = next(e for e in r["a11y"] if e["id"] != el["id"])
        gold.append((r, el, other))
    preds = [_pred(r, r["gold_think"], "correct") for r, _, _ in gold]  # the expert's own reasoning
    assert click_lookups(preds, recs) == {
        "steps": len(clicks),
        "right": len(clicks),
        **{k: 0 for k in CLICK_KINDS if k != "right"},
    }
    (r0, e0, o0), (r1, e1, o1), (r2, e2, o2), (r3, e3, o3) = gold[:4]
    preds = [
        _pred(r0, "Next: something. Inquiry check: not needed.", "wrong_argument"),
        _pred(r1, f"Next: x. Target: {o1['text']} <{o1['id']}>. Inquiry check", "wrong_argument"),
        _pred(r2, f"Next: x. Target: {e2['text']} <{o2['id']}>. Inquiry check", "wrong_argument"),
        _pred(r3, f"Next: x. Target: {e3['text']} <{e3['id']}>. Inquiry check", "wrong_argument"),
        {**_pred(r3, r3["gold_think"], "correct"), "id": "not-a-record"},  # no record: not counted
    ]
    out = click_lookups(preds, recs)
    assert out == {
        "steps": 4,
        "right": 0,
        "unreadable": 1,
        "named_wrong": 1,
        "looked_up_wrong": 1,
        "acted_off_think": 1,
    }


def test_only_click_steps_count():
    recs, clicks = _clicks()
    others = [r for r in recs if json.loads(r["gold_action"])["action"] != "click"]
    preds = [_pred(r, r["gold_think"], "correct") for r in others]
    assert click_lookups(preds, recs)["steps"] == 0 and others
