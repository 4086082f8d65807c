"""Stage 1's cheap learning curve: the reasoning's first fork, the records that have it, and a curve point."""

from __future__ import annotations

import json
import math

import pytest

from inquire_lib.evaluation.fork_curve import curve_point, fork_records, header, unbiased_point, word_token


def test_the_header_is_the_screen_the_reasoning_opens_with():
    assert header("Contacts / Cleo Patel. Next: call her. Target: Call <e3>.") == "Contacts / Cleo Patel."
    assert header("Wallet / Send. Two contacts are named Cleo. Inquiry check: needed") == "Wallet / Send."
    assert header("Home screen. The task needs the Wallet app.") is None
    assert header("This is Maps, not the app the task needs; going back.") is None


def _record(action: str, think: str, inquiry: bool = False) -> dict:
    return {"gold_action": json.dumps({"action": action}), "gold_think": think, "inquiry_required": inquiry}


def test_only_in_app_clicks_types_and_questions_have_the_fork():
    kept = fork_records(
        [
            _record("click", "Chat / Inbox. Next: open it."),
            _record("type", "Chat / Compose. Next: the text. Type: hi."),
            _record("call_user", "Chat / Inbox. Two chats are named Ada.", True),
            _record("open", "Home screen. The task needs the Chat app."),
            _record("terminate", "Chat / Inbox. The task is complete."),
            _record("click", None),
        ]
    )
    assert [json.loads(r["gold_action"])["action"] for r in kept] == ["click", "type", "call_user"]


class _Words:
    """A tokenizer that cuts at spaces and keeps each space on the word after it, as BPE does."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        pieces = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
        return [self.vocab.setdefault(p, len(self.vocab)) for p in pieces]


def test_the_fork_words_are_tokens_as_cut_after_the_header():
    tok = _Words()
    assert word_token(tok, "<think>Chat / Inbox.", " Next") == tok.vocab[" Next"]
    assert word_token(tok, "<think>Chat / Inbox. The", " task") == tok.vocab[" task"]

    class Glued(_Words):  # a vocabulary with "Inbox. Next" as one token: the fork is not one token there
        def encode(self, text, add_special_tokens=False):
            return super().encode(text.replace("Inbox. Next", "Inbox.\u00a0Next"))

    with pytest.raises(ValueError, match="is not a token of its own"):
        word_token(Glued(), "<think>Chat / Inbox.", " Next")


def test_a_curve_point_reads_auc_and_isr_within_the_needless_budget():
    # 19 of 20 inquiry steps above 19 of 20 safe steps, each pair ranked once: AUC 361/400; at needless <= 0.05
    # (1 of 20) the threshold may pass the one high safe step, so all but the one low inquiry step ask
    asks = [5.0] * 19 + [-5.0]
    acts = [-1.0] * 19 + [6.0]
    point = curve_point(asks + acts, [True] * 20 + [False] * 20, max_needless=0.05, n_boot=200)
    assert point["auc"]["value"] == pytest.approx(361 / 400)
    assert point["auc"]["lo"] <= point["auc"]["value"] <= point["auc"]["hi"]
    assert (point["isr"]["k"], point["isr"]["n"]) == (19, 20) and point["needless"] == pytest.approx(0.05)
    assert point["isr"]["lo"] < 0.95 < point["isr"]["hi"] and point["met"]
    strict = curve_point(asks + acts, [True] * 20 + [False] * 20, max_needless=0.0, n_boot=200)
    assert (strict["isr"]["k"], strict["needless"]) == (0, 0.0)  # the high safe step sits above every ask
    blind = curve_point([0.0] * 40, [True] * 20 + [False] * 20, n_boot=200)
    assert blind["auc"]["value"] == 0.5 and not math.isnan(blind["isr"]["lo"])


def test_the_unbiased_point_is_what_the_model_chooses_with_no_threshold():
    # asks where the margin is above 0: 3 of 4 inquiry steps, 1 of 5 safe steps; an exact 0 acts
    margins = [2.0, 0.5, 0.0, 1.0, -1.0, -3.0, 4.0, -0.1, -2.0]
    labels = [True, True, True, True, False, False, False, False, False]
    u = unbiased_point(margins, labels)
    assert (u["isr"]["k"], u["isr"]["n"], u["isr"]["value"]) == (3, 4, 0.75)
    assert (u["needless"]["k"], u["needless"]["n"]) == (1, 5) and u["needless"]["value"] == pytest.approx(0.2)
    assert u["isr"]["lo"] < 0.75 < u["isr"]["hi"]
    assert curve_point(margins, labels, n_boot=50)["unbiased"] == u


def test_the_curve_table_shows_the_unbiased_point_and_leaves_old_points_blank():
    from inquire_lib.stages.learning_curve import curve_table

    labels = [True] * 4 + [False] * 5
    point = {"step": 60, "examples": 480, **curve_point([2.0, 0.5, 0.0, 1.0, -1.0, -3.0, 4.0, -0.1, -2.0], labels)}
    old = {k: v for k, v in point.items() if k != "unbiased"} | {"step": 30, "examples": 240}
    rows = curve_table({"points": [old, point]}).splitlines()
    assert len(rows) == 4 and rows[0].count("|") == 8
    assert rows[2].endswith("|  |  |") and rows[2].startswith("| 30 | 240 |")
    assert "| 3/4 = 0.750 (" in rows[3] and "| 1/5 = 0.200 (" in rows[3]
