"""Stage 0's copy warm-up: learning to copy before learning to act.

An agent types the amount its instruction names and clicks the element its reasoning names: it copies
tokens from its context. A pretrained language model does this with induction heads (one head marks
each token with the one before it; another attends from the current token to the token after its
earlier occurrence and copies it). The tiny model starts from random weights, and thousands of stage-0
steps do not form them: on repeated random tokens its agents copy 0-1% (`evaluation.copying.induction`),
and they type the likeliest value of a field instead of the one asked for.

The warm-up trains them directly, with TRL's `SFTTrainer` on text only: each sequence is a string of
random ordinary tokens, a gap of other random tokens, then the string again. The loss is the
cross-entropy of the second copy's tokens after its first (`completion_mask`), the only ones that can
be known, and only by copying. It runs in two parts (`phases`). The seed uses only 64 distinct tokens
and gaps of up to 24: there a previous-token head and an induction head form together within about
1,000 steps, where with every token (2,034) or 256 of them nothing formed in 1,250 or 3,250 steps.
The main part then uses every token with log-uniform gaps of up to 200, so that the copy distance
varies widely and counting back a fixed number of positions does not pay (trained only on short
strings without gaps, the tiny model learns heads that look 7 or 11 positions back: a copier of about
a dozen tokens and nothing beyond; `evaluation.copying.copy_attention` shows it).

Measured through this code on the cpu tiny model from random weights (docs/lab/base_agent.md): after the 4,000-step
seed, 0.96 of a 64-token string copied (0.01 with every token); after 1,000 steps of the main part,
with every token, 0.85 of strings of 8 and 0.80 across a gap of 100 (0.44 across 200, 0.00 across 400).
Off by default: 300 steps of stage 0 at its rate from that model leave 0.12 of strings of 10 copied
and none across 200, and its `type` steps are no better than without the warm-up. `copy_records` keeps
copy rows in stage 0's data (`copy_mix_share`); that keeps the copier (0.55 of strings of 10 after
1,200 steps, 0.19 without) but the agent's typed values are no better for it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import NamedTuple

import datasets
import torch

from ..evaluation.copying import ordinary_tokens
from ..profiles import Profile
from .configs import sft_config
from .fit import TrainResult, fit
from .models import load_model_and_processor

# sequences per optimizer step: 32 strings of 3-8 tokens from 64 tokens formed the circuit in about
# 1,000 steps from random weights (docs/lab/base_agent.md); 8 a step formed only heads that look a fixed distance back
BATCH = 32
LENGTHS = (3, 8)  # tokens in the string that is copied


class CopyPhase(NamedTuple):
    """One part of the warm-up: `steps` optimizer steps on strings of the first `vocab` ordinary tokens
    (0: all of them) with gaps of 0..`max_gap` tokens, log-uniform when `log_gaps` (mostly short,
    some as long as `max_gap`, at a fraction of the tokens uniform gaps cost)."""

    steps: int
    vocab: int
    max_gap: int
    log_gaps: bool


def phases(profile: Profile) -> list[CopyPhase]:
    """The warm-up's parts, in order: the seed (few distinct tokens and short gaps, where the circuit
    forms quickly: with 2,034 tokens it did not form in 1,250 steps, with 256 not in 3,250) then the
    main part (every ordinary token, gaps as long as a prompt). Empty when `copy_warmup_steps` is 0."""
    if profile.copy_warmup_steps <= 0:
        return []
    seed = CopyPhase(
        profile.copy_warmup_easy_steps, profile.copy_warmup_easy_vocab, profile.copy_warmup_easy_gap, False
    )
    main = CopyPhase(profile.copy_warmup_steps, 0, profile.copy_warmup_gap, True)
    return [p for p in (seed, main) if p.steps > 0]


def _log_uniform(rng: random.Random, most: int) -> int:
    """0..`most`, log-uniform: half of the draws below sqrt(most + 2) - 1, a few as long as `most`."""
    return int((most + 2) ** rng.random()) - 1


def repeat_sequences(vocab: list[int], n: int, max_gap: int, seed: int, log_gaps: bool = False) -> datasets.Dataset:
    """`n` rows of {"input_ids": string + gap + string, "completion_mask": 1 on the second string's
    tokens after its first}: strings of `LENGTHS` tokens and gaps of 0..`max_gap` (uniform, or
    log-uniform with `log_gaps`), drawn from `vocab`."""
    rng = random.Random(seed)
    ids, masks = [], []
    for _ in range(n):
        string = rng.choices(vocab, k=rng.randint(*LENGTHS))
        size = _log_uniform(rng, max_gap) if log_gaps else rng.randint(0, max_gap)
        gap = rng.choices(vocab, k=size)
        ids.append(string + gap + string)
        masks.append([0] * (len(string) + len(gap) + 1) + [1] * (len(string) - 1))
    return datasets.Dataset.from_dict({"input_ids": ids, "completion_mask": masks})


# the copy mix's strings stand between these marks in the prompt and the answer, so every answer token
# (the first one too) is known by copying: the token after the mark's earlier occurrence, and so on
MARKS = ("«", "»")


def copy_records(tokenizer, n: int, seed: int, max_before: int = 60, max_after: int = 200) -> datasets.Dataset:
    """`n` chat rows for stage 0's copy mix (`copy_mix_share`): a prompt of random ordinary tokens
    with a marked string of `LENGTHS` of them inside (log-uniform runs of up to `max_before` tokens
    before it and `max_after` after), and the marked string again as the completion, so stage 0's loss
    keeps paying for copying while the agent's data would otherwise overwrite the warm-up's copier.
    No images: TRL's vision collator takes rows without one in a batch with images. The text is decoded
    from token ids, so the model reads it as it would any text it is given."""
    rng = random.Random(seed)
    vocab = ordinary_tokens(tokenizer)
    run = lambda most: tokenizer.decode(rng.choices(vocab, k=_log_uniform(rng, most)))
    rows = []
    for i in range(n):
        marked = MARKS[0] + tokenizer.decode(rng.choices(vocab, k=rng.randint(*LENGTHS))) + MARKS[1]
        rows.append(
            {
                "id": f"copy-{seed}-{i}",
                "prompt": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": f"{run(max_before)} {marked} {run(max_after)}"}],
                    }
                ],
                "completion": [{"role": "assistant", "content": [{"type": "text", "text": marked}]}],
                "images": [],
            }
        )
    return datasets.Dataset.from_list(rows)


def copy_warmup(profile: Profile, start: str | None, out_dir: Path, callbacks=None) -> TrainResult:
    """The `phases` in order, each through TRL's `SFTTrainer` at `copy_warmup_lr` with full weights
    into `out_dir/phase-<k>`, each starting from the one before (the first from `start`; None: the
    tiny model's random weights). A finished phase is kept and a cut one resumes from its last
    checkpoint. Returns the last phase's result."""
    from ..runs.integrity import is_complete

    result = None
    for k, phase in enumerate(phases(profile)):
        phase_dir = out_dir / f"phase-{k}"
        if is_complete(phase_dir / "final"):
            result = TrainResult(str(phase_dir / "final"), False, [], 0, 0.0)
        else:
            result = _train_phase(profile, phase, start, phase_dir, callbacks)
        start = result.path
    if result is None:
        raise ValueError(f"profile {profile.name!r} asks for no copy warm-up (copy_warmup_steps = 0)")
    return result


def _train_phase(profile: Profile, phase: CopyPhase, start: str | None, out_dir: Path, callbacks) -> TrainResult:
    from trl import SFTTrainer

    torch.set_num_threads(profile.torch_threads)
    model, processor = load_model_and_processor(profile, checkpoint=start, trainable=True)
    vocab = ordinary_tokens(processor.tokenizer)
    vocab = vocab[: phase.vocab] if phase.vocab else vocab
    train = repeat_sequences(vocab, phase.steps * BATCH, phase.max_gap, profile.seed, phase.log_gaps)
    config = sft_config(
        profile.replace(sft_batch=BATCH, sft_grad_accum=1),
        out_dir,
        steps=phase.steps,
        lr=profile.copy_warmup_lr,
        warmup=max(1, phase.steps // 20),
    )
    # the circuit forms abruptly after a plateau; a decaying rate drags the plateau out (2,000 cosine steps
    # of the seed: 0.50 of a 64-token string copied; 4,000 at a constant rate: 0.98)
    config.lr_scheduler_type = "constant_with_warmup"
    # gaps make row lengths vary tenfold; batching rows of like length spares computing on padding
    config.train_sampling_strategy = "group_by_length"
    # the tokenizer, not the processor: text-only rows take TRL's language-modelling collator
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=train, processing_class=processor.tokenizer, callbacks=callbacks
    )
    final, seconds = fit(
        trainer,
        out_dir,
        resume=True,
        meta=lambda _folder, seconds: {
            "stage": "copy_warmup",
            "profile": profile.name,
            "start": start,
            "steps": phase.steps,
            "seconds": seconds,
            "vocab": len(vocab),
            "max_gap": phase.max_gap,
            "log_gaps": phase.log_gaps,
            "n_examples": len(train),
            "torch_threads": profile.torch_threads,
        },
    )
    return TrainResult(str(final), False, trainer.state.log_history, len(train), seconds)
