"""Stage 0's copy warm-up: every sequence is a string, a gap and the string again with the loss on the
copy only; the warm-up trains through TRL and publishes a complete model; a profile without it keeps
its cached base agent."""
from __future__ import annotations

import json

import pytest
import torch

from inquire_lib.profiles import get_profile
from inquire_lib.evaluation.copying import ordinary_tokens
from inquire_lib.training.warmup import LENGTHS, repeat_sequences


def test_each_row_repeats_its_string_after_a_gap_and_scores_only_the_copy():
    vocab = list(range(100, 160))
    rows = repeat_sequences(vocab, 200, max_gap=30, seed=0)
    assert len(rows) == 200
    gaps = []
    for ids, mask in zip(rows["input_ids"], rows["completion_mask"]):
        assert len(ids) == len(mask) and set(ids) <= set(vocab)
        scored = sum(mask)
        n = scored + 1  # the copy's first token cannot be known, so it is not scored
        assert LENGTHS[0] <= n <= LENGTHS[1]
        assert mask == [0] * (len(ids) - scored) + [1] * scored
        assert ids[:n] == ids[-n:]
        gaps.append(len(ids) - 2 * n)
    assert min(gaps) >= 0 and max(gaps) <= 30 and len(set(gaps)) > 10  # distances vary
    again = repeat_sequences(vocab, 200, max_gap=30, seed=0)
    assert again["input_ids"] == rows["input_ids"]
    assert repeat_sequences(vocab, 200, max_gap=30, seed=1)["input_ids"] != rows["input_ids"]


def test_ordinary_tokens_leave_out_the_added_ones():
    class Tok:
        def get_added_vocab(self):
            return {"<|im_start|>": 3, "<r0>": 7}

        def __len__(self):
            return 10

    assert ordinary_tokens(Tok()) == [0, 1, 2, 4, 5, 6, 8, 9]


def test_the_defaults_keep_the_shipped_base_agent_and_a_warmup_gets_its_own():
    from inquire_lib.profiles import apply_overrides
    from inquire_lib.training.sft import base_agent_dir

    cpu = get_profile("cpu")
    assert base_agent_dir(cpu).name == "base-agent-cpu-s0-v2-procedural"
    warmed = base_agent_dir(apply_overrides(cpu, {"copy_warmup_steps": 100}))
    assert warmed.name.startswith("base-agent-cpu-s0-v2-procedural-o") and warmed != base_agent_dir(cpu)


@pytest.mark.slow
def test_the_warmup_trains_through_trl_and_publishes_a_complete_model(tmp_path, monkeypatch):
    from inquire_lib.runs.integrity import is_complete
    from inquire_lib.training import models
    from inquire_lib.training.sft import BASE_AGENT_FIELDS
    from inquire_lib.training.warmup import copy_warmup

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    prof = get_profile("smoke").replace(copy_warmup_steps=3, copy_warmup_gap=10, load_in_4bit=False, lora=False)
    start = models.model_path(prof)
    res = copy_warmup(prof, None, tmp_path / "warmup")
    assert is_complete(res.path)
    meta = json.loads((tmp_path / "warmup" / "final" / "inquire_train.json").read_text())
    assert meta["stage"] == "copy_warmup" and meta["steps"] == 3 and meta["n_examples"] == 24 and meta["max_gap"] == 10
    losses = [h["loss"] for h in res.log_history if "loss" in h]
    assert losses and all(l > 0 for l in losses)
    before, _ = models.load_checkpoint(prof, start)
    after, _ = models.load_checkpoint(prof, res.path)
    changed = [n for (n, a), (_, b) in zip(before.named_parameters(), after.named_parameters()) if not torch.equal(a, b)]
    assert any("language_model" in n for n in changed)
    assert {"copy_warmup_steps", "copy_warmup_gap", "copy_warmup_lr"} <= set(BASE_AGENT_FIELDS)
