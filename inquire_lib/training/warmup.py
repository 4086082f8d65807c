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
be known, and only by copying. Random gaps make the copy distance vary, so that counting back a fixed
number of positions does not pay (strings of one length are learned exactly that way: training loss
0.00, and 0.01 on longer strings).

Measured on the cpu agents (README): strings without a gap form a copier in a few thousand steps (0.78
of the copy), but it is a window of about a dozen tokens: it copies nothing from 20 or more tokens
back, and no schedule tried yet (gaps, prefixes, growing either, longer strings, more heads) widens it
to the hundreds of tokens an agent copies across. So the warm-up is off by default.
"""
from __future__ import annotations

import random
from pathlib import Path

import datasets
import torch

from ..evaluation.copying import ordinary_tokens
from ..profiles import Profile
from .configs import sft_config
from .fit import TrainResult, fit
from .models import load_model_and_processor

# sequences per optimizer step: small batches form a copier with the fewest tokens (measured on the cpu
# agent: 8 sequences of 8-24 tokens copy 0.51 after 2,000 steps, 32 of 10-60 tokens 0.01-0.11 after 1,150)
BATCH = 8
LENGTHS = (3, 12)  # tokens in the string that is copied


def repeat_sequences(vocab: list[int], n: int, max_gap: int, seed: int) -> datasets.Dataset:
    """`n` rows of {"input_ids": string + gap + string, "completion_mask": 1 on the second string's
    tokens after its first}: strings of `LENGTHS` tokens and gaps of 0..`max_gap`, drawn from `vocab`."""
    rng = random.Random(seed)
    ids, masks = [], []
    for _ in range(n):
        string = rng.choices(vocab, k=rng.randint(*LENGTHS))
        gap = rng.choices(vocab, k=rng.randint(0, max_gap))
        ids.append(string + gap + string)
        masks.append([0] * (len(string) + len(gap) + 1) + [1] * (len(string) - 1))
    return datasets.Dataset.from_dict({"input_ids": ids, "completion_mask": masks})


def copy_warmup(profile: Profile, start: str | None, out_dir: Path, callbacks=None) -> TrainResult:
    """`copy_warmup_steps` steps of repeated random strings (`repeat_sequences`, gaps up to
    `copy_warmup_gap`) at `copy_warmup_lr`, full weights, from `start` (None: the tiny model's random
    weights); resumes from its last checkpoint in `out_dir`."""
    from trl import SFTTrainer

    torch.set_num_threads(profile.torch_threads)
    model, processor = load_model_and_processor(profile, checkpoint=start, trainable=True)
    steps = profile.copy_warmup_steps
    train = repeat_sequences(ordinary_tokens(processor.tokenizer), steps * BATCH, profile.copy_warmup_gap, profile.seed)
    config = sft_config(profile.replace(sft_batch=BATCH, sft_grad_accum=1), out_dir, steps=steps,
                        lr=profile.copy_warmup_lr, warmup=max(1, steps // 20))
    # the tokenizer, not the processor: text-only rows take TRL's language-modelling collator
    trainer = SFTTrainer(model=model, args=config, train_dataset=train, processing_class=processor.tokenizer,
                         callbacks=callbacks)
    final, seconds = fit(trainer, out_dir, resume=True, meta=lambda _folder, seconds: {
        "stage": "copy_warmup", "profile": profile.name, "start": start, "steps": steps, "seconds": seconds,
        "max_gap": profile.copy_warmup_gap, "n_examples": len(train), "torch_threads": profile.torch_threads})
    return TrainResult(str(final), False, trainer.state.log_history, len(train), seconds)
