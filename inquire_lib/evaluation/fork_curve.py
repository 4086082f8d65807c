"""Stage 1's learning curve of asking, read cheaply: the ask margin at the reasoning's first fork from one
forward pass per step, the gold text up to the fork, no decoding.

Every in-app step's gold reasoning opens with the screen's header, "{app} / {title}.", and there the
completions part: an acting step (click, type) goes on with "Next: ...", a finished task with "The task is
complete.", an inquiry step with why it must ask ("Both Dante Dubois and Dante Nakamura match Dante."). An
agent that never learned to ask still leaves " Next" on the screens that need a question, for a premature
"The task is complete" (measured on small's base agent), so acting is both continuations:

    P(act) = P(" Next" | header) + P(" The" | header) * P(" task" | header " The")
    margin = log (1 - P(act)) - log P(act)

and one forward pass over the prompt, "<think>", the header and " The" gives both factors (the last two
positions' logits). Steps at the home screen (open) and terminations have no such fork and are left out;
the greedy pass (`operating_curve`) confirms a point on every step. The curve's maths (AUC, operating
points) are `operating_curve`'s.
"""

from __future__ import annotations

from ..profiles import ModelSettings
import json
import math

import torch
from tqdm.auto import tqdm

from ..agent.prompts import frame_for, images_of, prompt_messages
from .metrics import wilson
from .operating_curve import bootstrap_auc, choose_point, curve_points

# what an acting step's reasoning says first after the header (world/flow.py: Flow.tap, Flow.type, Flow.done)
ACT_WORD, DONE_WORDS = " Next", (" The", " task")
# the measure's name, kept with every curve: points measured another way are never mixed in
METRIC = "header fork: ask against ' Next' and ' The task'"
# the gold actions of the steps that have the fork: where an action is due, or a question
FORK_ACTIONS = ("click", "type", "call_user")


def header(think: str) -> str | None:
    """The in-app header that opens a gold reasoning ("Contacts / Cleo Patel."), or None (home screen)."""
    app, sep, rest = think.partition(" / ")
    if not sep or "." not in rest:
        return None
    return f"{app} / {rest.split('.', 1)[0]}."


def fork_records(records: list[dict]) -> list[dict]:
    """The steps with the fork: an in-app header and a gold click, type or question."""
    return [
        r
        for r in records
        if json.loads(r["gold_action"])["action"] in FORK_ACTIONS and header(r["gold_think"] or "") is not None
    ]


def word_token(tokenizer, prefix: str, word: str) -> int:
    """The id of `word` as the tokenizer cuts it after `prefix` (checked to leave the prefix's own ids whole)."""
    a = tokenizer.encode(prefix, add_special_tokens=False)
    b = tokenizer.encode(prefix + word, add_special_tokens=False)
    if b[: len(a)] != a or len(b) != len(a) + 1:
        raise ValueError(f"{word!r} is not a token of its own after {prefix!r}")
    return b[len(a)]


@torch.no_grad()
def fork_margins(
    model, processor, records: list[dict], profile: ModelSettings, batch_size: int = 8, progress: bool = True
) -> list[float]:
    """Each fork record's ask margin (above) from one forward pass over its prompt, "<think>", its header and
    " The"."""
    tok = processor.tokenizer
    tok.padding_side = "left"
    frame = frame_for(profile)
    device = next(model.parameters()).device
    prefixes = [f"<think>{header(r['gold_think'])}" for r in records]
    texts = [
        processor.apply_chat_template(prompt_messages(r, profile, frame), tokenize=False, add_generation_prompt=True)
        + p
        for r, p in zip(records, prefixes)
    ]
    if records:
        first = prefixes[0]
        nxt, the = word_token(tok, first, ACT_WORD), word_token(tok, first, DONE_WORDS[0])
        task = word_token(tok, first + DONE_WORDS[0], DONE_WORDS[1])
    margins: list[float] = []
    for i in tqdm(range(0, len(records), batch_size), desc="fork margins", disable=not progress):
        chunk = range(i, min(i + batch_size, len(records)))
        images = [img for k in chunk for img in images_of(records[k], profile)]
        texts_the = [texts[k] + DONE_WORDS[0] for k in chunk]
        enc = processor(text=texts_the, images=images, padding=True, return_tensors="pt").to(device)
        # the head over the last two positions only: over every position it costs a third of the pass
        logp = torch.log_softmax(model(**enc, logits_to_keep=2).logits.float(), dim=-1)
        p_act = logp[:, 0, nxt].exp() + (logp[:, 0, the] + logp[:, 1, task]).exp()
        for p in p_act.clamp(max=1.0).tolist():
            margins.append(math.log1p(-p) - math.log(p) if 0.0 < p < 1.0 else (math.inf if p == 0 else -math.inf))
    return margins


def curve_point(margins: list[float], labels: list[bool], max_needless: float = 0.05, n_boot: int = 1000) -> dict:
    """One point of the learning curve: the AUC with its bootstrap interval, and the step ISR at the highest
    operating point whose needless-ask rate is at most `max_needless`, with its Wilson interval."""
    point = choose_point(curve_points(margins, labels), max_needless)
    pos = sum(labels)
    hits = round(point["isr"] * pos) if point["isr"] is not None else 0
    return {
        "auc": bootstrap_auc(margins, labels, n_boot=n_boot),
        "isr": wilson(hits, pos),
        "needless": point["needless"],
        "bias": point["bias"],
        "max_needless": max_needless,
        "met": point["met"],
        "unbiased": unbiased_point(margins, labels),
    }


def unbiased_point(margins: list[float], labels: list[bool]) -> dict:
    """What the model itself chooses at the fork, no bias added (it asks where the margin is above 0): the
    step ISR over the steps that need the question and the needless-ask rate over the others, each with
    its Wilson interval. No threshold is read off the split it is measured on."""
    asks = [m > 0 for m in margins]
    need = [a for a, y in zip(asks, labels) if y]
    rest = [a for a, y in zip(asks, labels) if not y]
    return {"isr": wilson(sum(need), len(need)), "needless": wilson(sum(rest), len(rest))}
