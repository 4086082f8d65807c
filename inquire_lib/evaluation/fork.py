"""The ask-or-act fork in generation: the one token where an asking completion and an acting one part
(`find_fork`), and the logits processor that reads the ask margin there and shifts it (`ForkBias`,
`ask_bias_processor`).

Below both `evaluation.steps` (which plays an agent at an ask bias) and `evaluation.operating_curve`
(which reads the margins over a test split by generating through `steps`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# the reasoning's decision, whose first differing token is the fork when the agent reasons first
ASK_CHECK = "Inquiry check: needed"
ACT_CHECK = "Inquiry check: not needed"


@dataclass(frozen=True)
class Fork:
    """Where the ask-or-act decision is taken: the text that precedes it and the ask token."""

    marker: str
    ask_token: int
    act_token: int


def find_fork(tokenizer, use_think: bool) -> Fork:
    """The first token where an asking completion and an acting one part, after their common text."""
    if use_think:
        marker, ask, act = "Inquiry check:", ASK_CHECK, ACT_CHECK
    else:
        marker = '"action": "'
        ask, act = marker + 'call_user"', marker + 'click"'
    a, b = tokenizer.encode(ask, add_special_tokens=False), tokenizer.encode(act, add_special_tokens=False)
    i = next(k for k in range(min(len(a), len(b))) if a[k] != b[k])
    return Fork(marker, a[i], b[i])


def ask_bias_processor(tokenizer, bias: float):
    """A `logits_processor` factory for `evaluation.steps.generate` that plays an agent at another
    point of its operating curve: `bias` added to the logit of the tool call's ask decision
    (`call_user` against every other action name), the weights unchanged. The tool call's fork, not the
    reasoning's: the reasoning's "Inquiry check" word decides the action only in part (the docs' verifying
    passes), and only the action asks."""
    fork = find_fork(tokenizer, use_think=False)
    return lambda: ForkBias(tokenizer, fork, bias)


class ForkBias:
    """A `LogitsProcessor`: at the fork of each sequence, record the ask margin and add `bias` to the
    ask token's logit. Margins stay NaN for sequences that never reach the fork."""

    def __init__(self, tokenizer, fork: Fork, bias: float = 0.0):
        self.tokenizer, self.fork, self.bias = tokenizer, fork, float(bias)
        self.prompt_len: int | None = None
        self.margins: list[float] = []

    def __call__(self, input_ids, scores):
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[1]
            self.margins = [math.nan] * input_ids.shape[0]
        new = input_ids[:, self.prompt_len :]
        for row in range(new.shape[0]):
            if not math.isnan(self.margins[row]) or new.shape[1] == 0:
                continue
            text = self.tokenizer.decode(new[row], skip_special_tokens=True)
            if not text.rstrip(" ").endswith(self.fork.marker):
                continue
            logits = scores[row].float()
            ask = logits[self.fork.ask_token].item()
            others = logits.clone()
            others[self.fork.ask_token] = -math.inf
            self.margins[row] = ask - others.max().item()
            scores[row, self.fork.ask_token] += self.bias
        return scores
