"""Stage 0's copy warm-up: every sequence is a string, a gap and the string again with the loss on the
copy only; the warm-up trains through TRL and publishes a complete model; a profile without it keeps
its cached base agent."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from inquire_lib.profiles import get_profile
from inquire_lib.evaluation.copying import ordinary_tokens
from inquire_lib.training.warmup import LENGTHS, CopyPhase, phases, repeat_sequences


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


def test_log_uniform_gaps_are_mostly_short_and_reach_the_longest():
    rows = repeat_sequences(list(range(100, 160)), 2000, max_gap=200, seed=0, log_gaps=True)
    gaps = [len(ids) - 2 * (sum(mask) + 1) for ids, mask in zip(rows["input_ids"], rows["completion_mask"])]
    assert min(gaps) == 0 and 150 < max(gaps) <= 200
    assert 0.4 < sum(g <= 14 for g in gaps) / len(gaps) < 0.6  # half of log-uniform lies below sqrt(202) - 1
    assert sum(g > 100 for g in gaps) / len(gaps) < 0.2


def test_the_phases_seed_the_circuit_on_few_tokens_then_use_them_all():
    cpu = get_profile("cpu")
    assert phases(cpu) == []  # off by default
    on = cpu.replace(copy_warmup_steps=3000)
    assert phases(on) == [
        CopyPhase(on.copy_warmup_easy_steps, on.copy_warmup_easy_vocab, on.copy_warmup_easy_gap, False),
        CopyPhase(3000, 0, on.copy_warmup_gap, True),
    ]
    assert phases(on.replace(copy_warmup_easy_steps=0)) == [CopyPhase(3000, 0, on.copy_warmup_gap, True)]


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
    from inquire_lib.training import shipped

    assert (shipped.SHIPPED_ROOT / base_agent_dir(cpu).name / "manifest.json").exists()
    warmed = base_agent_dir(apply_overrides(cpu, {"copy_warmup_steps": 100}))
    assert warmed.parent == base_agent_dir(cpu).parent and warmed != base_agent_dir(cpu)


@pytest.mark.slow
def test_the_warmup_trains_through_trl_and_publishes_a_complete_model(tmp_path, monkeypatch):
    from inquire_lib.runs.integrity import is_complete
    from inquire_lib.training import models
    from inquire_lib.training.sft import BASE_AGENT_FIELDS
    from inquire_lib.training.warmup import copy_warmup

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    prof = get_profile("smoke").replace(
        copy_warmup_steps=3,
        copy_warmup_gap=10,
        copy_warmup_easy_steps=2,
        copy_warmup_easy_vocab=20,
        copy_warmup_easy_gap=5,
        load_in_4bit=False,
        lora=False,
    )
    start = models.model_path(prof)
    res = copy_warmup(prof, None, tmp_path / "warmup")
    assert is_complete(res.path) and res.path == str(tmp_path / "warmup" / "phase-1" / "final")
    seed = json.loads((tmp_path / "warmup" / "phase-0" / "final" / "inquire_train.json").read_text())
    main = json.loads(Path(res.path, "inquire_train.json").read_text())
    assert (seed["steps"], seed["vocab"], seed["max_gap"], seed["log_gaps"], seed["n_examples"]) == (
        2,
        20,
        5,
        False,
        64,
    )
    assert main["stage"] == "copy_warmup" and main["steps"] == 3 and main["n_examples"] == 96 and main["max_gap"] == 10
    assert main["start"] == str(tmp_path / "warmup" / "phase-0" / "final") and main["vocab"] > 500
    losses = [h["loss"] for h in res.log_history if "loss" in h]
    assert losses and all(loss > 0 for loss in losses)
    before, _ = models.load_checkpoint(prof, start)
    after, _ = models.load_checkpoint(prof, res.path)
    changed = [
        n for (n, a), (_, b) in zip(before.named_parameters(), after.named_parameters()) if not torch.equal(a, b)
    ]
    assert any("language_model" in n for n in changed)
    assert {
        "copy_warmup_steps",
        "copy_warmup_gap",
        "copy_warmup_lr",
        "copy_warmup_easy_steps",
        "copy_warmup_easy_vocab",
        "copy_warmup_easy_gap",
    } <= set(BASE_AGENT_FIELDS)
    # run again: both phases are complete and kept, nothing retrains
    again = copy_warmup(prof, None, tmp_path / "warmup")
    assert again.path == res.path and again.log_history == []


def test_copy_rows_ask_for_the_marked_string_of_their_prompt_and_are_deterministic():
    from inquire_lib.training.models import load_processor, model_path
    from inquire_lib.training.warmup import MARKS, copy_records

    smoke = get_profile("smoke")
    tok = load_processor(model_path(smoke), smoke).tokenizer
    rows = copy_records(tok, 50, seed=0)
    assert len(rows) == 50 and len(set(rows["id"])) == 50
    for row in rows:
        prompt, answer = row["prompt"][0]["content"][0]["text"], row["completion"][0]["content"][0]["text"]
        assert row["images"] == [] and row["completion"][0]["role"] == "assistant"
        assert answer.startswith(MARKS[0]) and answer.endswith(MARKS[1]) and len(answer) > 2
        assert prompt.count(answer) >= 1  # the answer is a copy of the prompt's marked string
    assert copy_records(tok, 50, seed=0)["prompt"] == rows["prompt"]
    assert copy_records(tok, 50, seed=1)["prompt"] != rows["prompt"]


def test_the_copy_mix_makes_its_share_of_stage0_and_gets_a_base_agent_of_its_own():
    from inquire_lib.profiles import apply_overrides
    from inquire_lib.training.sft import BASE_AGENT_FIELDS, base_agent_dir, stage0_records

    smoke = get_profile("smoke")
    plain = stage0_records(smoke)
    mixed = stage0_records(smoke.replace(copy_mix_share=0.25))
    copies = [i for i, c in enumerate(mixed["category"]) if c == "copy"]
    assert list(mixed["id"])[: len(plain)] == list(plain["id"])  # the agent's rows, unchanged and first
    assert len(copies) == round(len(plain) / 3) and copies[0] == len(plain)  # a quarter of the whole
    assert all(mixed[i]["images"] == [] and not mixed[i]["inquiry_required"] for i in copies[:5])
    assert "copy_mix_share" in BASE_AGENT_FIELDS
    cpu = get_profile("cpu")
    assert base_agent_dir(apply_overrides(cpu, {"copy_mix_share": 0.25})) != base_agent_dir(cpu)


@pytest.mark.slow
def test_stage0_trains_through_trl_on_agent_rows_and_copy_rows_in_one_batch(tmp_path, monkeypatch):
    from inquire_lib.training.sft import _run_sft, stage0_records

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    prof = get_profile("smoke").replace(copy_mix_share=0.5, load_in_4bit=False, lora=False, sft_batch=4)
    mixed = stage0_records(prof)
    copies = [i for i, c in enumerate(mixed["category"]) if c == "copy"]
    agent = sorted(set(range(len(mixed))) - set(copies))
    # half of the rows have no image, so TRL's vision collator batches rows with and without one
    train = mixed.select([j for pair in zip(agent[:8], copies[:8]) for j in pair])
    res = _run_sft(
        prof, start=None, out_dir=tmp_path / "s0", inquiry_share=0.0, train=train, steps=2, lr=1e-3, warmup=1
    )
    losses = [h["loss"] for h in res.log_history if "loss" in h]
    assert res.n_examples == 16 and len(losses) == 2
    # from random weights every logit is near 0, so the first loss (mean cross-entropy per completion token,
    # agent and copy rows alike) is the uniform distribution's over the vocabulary: ln V (6.96 for smoke's 1,056)
    from inquire_lib.training.models import model_path

    vocab = json.loads((Path(model_path(prof)) / "config.json").read_text())["text_config"]["vocab_size"]
    assert losses[0] == pytest.approx(math.log(vocab), abs=0.15)
