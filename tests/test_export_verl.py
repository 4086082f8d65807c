"""`inquire export --format verl`: the GRPO prompts as verl's RL dataset parquet, read back with
pyarrow, and the compute_score adapter over the GRPO rewards (smoke profile)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from inquire_lib import cli
from inquire_lib.training.export_verl import DATA_SOURCE, MAX_SCORE_PARTS, compute_score
from inquire_lib.profiles import get_profile

PROFILE = get_profile("smoke")
ASK = (
    "<think>It is risky. Inquiry check: needed, because the user must confirm.</think><tool_call>"
    '{"name": "mobile_use", "arguments": {"action": "call_user", "text": "Should I go on?"}}</tool_call>'
)
ACT = (
    "<think>Go on. Inquiry check: not needed, because it is safe.</think><tool_call>"
    '{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Back"}}</tool_call>'
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("verl")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_CACHE", str(root / "cache"))
        assert (
            cli.main(
                ["export", "--format", "verl", "--profile", "smoke", "--out", str(root / "out"), "--splits", "train"]
            )
            == 0
        )
        from inquire_lib.training.grpo import grpo_records

        records = grpo_records(PROFILE)
    return pq.read_table(root / "out" / "train.parquet"), records, root / "out"


def test_parquet_has_verls_layout_one_row_per_grpo_prompt(exported):
    table, records, out = exported
    assert table.num_rows == len(records) == PROFILE.grpo_steps * PROFILE.grpo_prompts_per_step
    assert table.column_names == [
        "data_source",
        "prompt",
        "images",
        "ability",
        "reward_model",
        "extra_info",
        "problem",
        "answer",
    ]
    rows = table.to_pylist()
    for row, rec in zip(rows, records):
        assert row["data_source"] == DATA_SOURCE and row["ability"] == "gui_inquiry"
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][-1]["content"].count("<image>") == len(row["images"]) == len(rec["images"])
        assert all(img["bytes"][:8] == b"\x89PNG\r\n\x1a\n" for img in row["images"])
        assert row["reward_model"]["style"] == "rule"
        truth = json.loads(row["reward_model"]["ground_truth"])
        assert truth == {
            "action": json.loads(rec["gold_action"]),
            "bbox": list(rec["gold_bbox"]),
            "inquiry_required": rec["inquiry_required"],
        }
        assert row["extra_info"]["id"] == rec["id"] and row["answer"] == row["reward_model"]["ground_truth"]
        assert row["extra_info"]["missed_penalty"] == PROFILE.missed_penalty
    assert "custom_reward_function.name=compute_score" in (out / "README.txt").read_text()


def test_compute_score_gold_is_the_maximum_and_a_missed_inquiry_the_penalty(exported):
    table, records, _ = exported
    best = sum(MAX_SCORE_PARTS.values())
    required = 0
    for row, rec in zip(table.to_pylist(), records):
        truth, extra = row["reward_model"]["ground_truth"], row["extra_info"]
        gold = rec["completion"][0]["content"][0]["text"]
        assert compute_score(DATA_SOURCE, gold, truth, extra) == {"score": best, **MAX_SCORE_PARTS}
        if extra["inquiry_required"]:
            required += 1
            missed = compute_score(DATA_SOURCE, ACT, truth, extra)
            assert missed["inquiry"] == -PROFILE.missed_penalty and missed["format"] == 1.0
            assert missed["score"] == 1.0 + missed["action"] - PROFILE.missed_penalty
        else:
            needless = compute_score(DATA_SOURCE, ASK, truth, extra)
            assert needless["inquiry"] == -PROFILE.needless_penalty and needless["action"] == 0.0
        broken = compute_score(DATA_SOURCE, "I would click somewhere", truth, extra)
        assert broken["format"] == -1.0 and broken["action"] == 0.0
    assert 0 < required < len(records)
    with pytest.raises(ValueError, match="inquirebench"):
        compute_score("gsm8k", "x", table.to_pylist()[0]["reward_model"]["ground_truth"])
