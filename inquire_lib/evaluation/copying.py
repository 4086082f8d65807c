"""Does the agent copy a value or recall one? A teacher-forced probe of the `type` steps, a
diagnosis of wrong clicks (`click_lookups`), and the mechanism both need (`induction`).

For each step whose gold action types a text, the prompt and the gold completion up to "Type: " (where
the reasoning first writes the value) go through the model in one forward pass with the value appended;
each of the value's tokens counts as right when it is the arg-max after the gold tokens before it. The
first token is where the value must be found in the instruction; the later ones can follow it by
copying. Greedy decoding gets a value right only if all of them are. Read with the step metrics: a low
first-token score with high later ones means the agent copies once started; low later ones on values it
was trained on mean it recalls likely values instead of copying.
"""

from __future__ import annotations

import json
import re

import torch

from ..agent.prompts import to_training_record
from ..profiles import ModelSettings
from .metrics import wilson

MARK = "Type: "


def _value_tokens(tokenizer, head: str, value: str) -> list[int]:
    """The tokens `value` adds after `head`, whatever the tokenizer does with the space before it
    (GPT-2's byte-level BPE glues it to the value's first word; others keep it apart)."""
    before = tokenizer(head, add_special_tokens=False)["input_ids"]
    after = tokenizer(head + value, add_special_tokens=False)["input_ids"]
    same = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    return after[same:]


def value_token_accuracy(model, processor, records: list[dict], profile: ModelSettings) -> dict:
    """{"steps", "first": Wilson CI of first tokens right, "later": of the later tokens} over the
    `type` steps of `records` (step records as `data.benchmark` builds them)."""
    first = later = n_later = steps = 0
    model.eval()
    for rec in records:
        action = json.loads(rec["gold_action"])
        if action.get("action") != "type":
            continue
        tr = to_training_record(rec, profile)
        prompt = processor.apply_chat_template(tr["prompt"], tokenize=False, add_generation_prompt=True)
        completion = tr["completion"][0]["content"][0]["text"]
        cut = completion.find(MARK)
        if cut < 0 or not completion[cut + len(MARK) :].startswith(action["text"]):
            raise ValueError(f"{rec['id']}: the gold reasoning does not write the value after {MARK!r}")
        head = completion[: cut + len(MARK)]
        gold = torch.tensor(_value_tokens(processor.tokenizer, head, action["text"]))
        ids = processor(
            text=[prompt + head + action["text"]], images=[tr["images"]] if tr["images"] else None, return_tensors="pt"
        )
        k = ids["input_ids"].shape[1] - len(gold)
        if len(gold) == 0 or not torch.equal(ids["input_ids"][0, k:], gold):
            raise ValueError(f"{rec['id']}: the value {action['text']!r} has no tokens of its own at the end")
        with torch.no_grad():
            predicted = model(**ids).logits[0, k - 1 : -1].argmax(-1)
        steps += 1
        first += int(predicted[0] == gold[0])
        later += int((predicted[1:] == gold[1:]).sum())
        n_later += len(gold) - 1
    return {"steps": steps, "first": wilson(first, steps), "later": wilson(later, n_later)}


TARGET = re.compile(r"Target: (.+?) <(\w+)>")
CLICK_KINDS = ("right", "unreadable", "named_wrong", "looked_up_wrong", "acted_off_think")


def _gold_element(rec: dict) -> dict | None:
    return next((e for e in rec["a11y"] if list(e["bbox"]) == list(rec["gold_bbox"])), None)


def click_lookups(preds: list[dict], records: list[dict]) -> dict:
    """Where a click goes wrong, read from the reasoning's "Target: <text> <slot>" (step predictions of
    `evaluation.steps` beside the records they score, matched by id). Each click step is one of:
    right; unreadable (no target named); named_wrong (the text is not the gold element's: finding the
    value failed); looked_up_wrong (the right text with a slot the element list gives another element,
    or none: finding its line in the list failed); acted_off_think (text and slot right, the action
    elsewhere). Returns {"steps", kind: count for each of `CLICK_KINDS`}."""
    by_id = {r["id"]: r for r in records}
    out = {"steps": 0, **{k: 0 for k in CLICK_KINDS}}
    for p in preds:
        rec = by_id.get(p["id"])
        if p["gold_action"].get("action") != "click" or rec is None or (gold := _gold_element(rec)) is None:
            continue
        out["steps"] += 1
        m = TARGET.search(p["think"] or "")
        if p["outcome"] == "correct":
            kind = "right"
        elif m is None:
            kind = "unreadable"
        elif m.group(1) != gold["text"]:
            kind = "named_wrong"
        elif m.group(2) != gold["id"]:
            kind = "looked_up_wrong"
        else:
            kind = "acted_off_think"
        out[kind] += 1
    return out


def ordinary_tokens(tokenizer) -> list[int]:
    """The ids of every token the tokenizer learned (not the special and added ones: the chat's
    markers, the image placeholders, the element slots): the vocabulary `induction` draws from."""
    added = set(tokenizer.get_added_vocab().values())
    return [i for i in range(len(tokenizer)) if i not in added]


def _repeats(vocab, n: int, length: int, gap: int, seed: int) -> torch.Tensor:
    """`n` rows of `length` random tokens from `vocab`, `gap` others, and the same `length` again."""
    g = torch.Generator().manual_seed(seed)
    ids_of = torch.tensor(list(vocab))
    draw = lambda k: ids_of[torch.randint(len(ids_of), (n, k), generator=g)]
    half = draw(length)
    return torch.cat([half, draw(gap), half], 1)


def induction(model, vocab, n: int = 32, length: int = 20, gap: int = 0, seed: int = 0) -> dict:
    """Can the model copy at all? `n` sequences of `length` random tokens from `vocab` (token ids, e.g.
    `ordinary_tokens`), each written twice with `gap` other random tokens between, in one text-only
    forward pass. A model with induction heads (attend to the token after the earlier copy of the
    current one, copy it) predicts the second half: its loss there falls far below the first half's,
    where nothing can be known. Returns {"first_loss", "second_loss"} (mean cross-entropy, nats) and
    "copied": the share of the second half's tokens after its first that are the arg-max. A random
    guess scores about 1/len(vocab); a pretrained language model, most of them, at any `gap`: an agent
    copies a value typed hundreds of tokens after the instruction that names it."""
    ids = _repeats(vocab, n, length, gap, seed)
    start = length + gap  # the second copy's first token
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    nll = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    copied = logits[:, start:-1].argmax(-1) == ids[:, start + 1 :]
    return {
        "first_loss": nll[:, : length - 1].mean().item(),
        "second_loss": nll[:, start:].mean().item(),
        "copied": copied.float().mean().item(),
    }


COPY_ROLES = ("source", "previous", "same")


def copy_attention(model, vocab, n: int = 8, length: int = 12, gap: int = 0, seed: int = 0) -> list[list[dict]]:
    """Which heads look where while the model copies: the sequences of `induction`, one forward pass
    with attention weights (the model must run eager attention: `model.set_attn_implementation("eager")`).
    For the second copy's queries after its first token, each head's mean attention on three keys:
    "source", the token after the earlier copy of the current one (what an induction head reads and
    copies); "previous", the token just before the query (a previous-token head, the other half of the
    circuit); "same", the earlier copy of the current token. Returns [layer][head] -> {role: share}.
    A real induction head puts most of its mass on "source" at every `gap`; a head that looks back a
    fixed number of positions does so only when `length + gap` is its distance, which is how a copier
    that works on short strings and nowhere else gives itself away."""
    ids = _repeats(vocab, n, length, gap, seed)
    period = length + gap
    queries = torch.arange(period + 1, period + length)
    keys = {"source": queries - period + 1, "previous": queries - 1, "same": queries - period}
    model.eval()
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions
    if not attentions or attentions[0] is None:
        raise ValueError("the model returned no attention weights: set its attention implementation to eager")
    return [
        [{role: att[:, head, queries, keys[role]].mean().item() for role in COPY_ROLES} for head in range(att.shape[1])]
        for att in attentions
    ]
