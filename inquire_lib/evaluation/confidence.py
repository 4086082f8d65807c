"""The confidence-threshold asker: a reference policy around any checkpoint that asks when the model is
unsure of the action it would take and acts otherwise (the "ask when unsure" family of OS-Kairos and
Mobile-Aptus), put on the axes of learned asking's bias sweep (`evaluation.operating_curve`).

The score: the mean log-probability of the tool call's tokens in the greedy completion, that is of every
token written after the reasoning's `</think>` (every token when the profile writes no reasoning or the
completion never closes it), the end-of-sequence token left out. The probabilities are the decoding's
(the logits after the profile's repetition penalty), read before the ask is taken away, so the mass the
model puts on `call_user` lowers its confidence in acting. A mean, not a sum: a `type` with a long text
is not less sure than a `click` for having more tokens. A completion with no scored token (cut off after
one token) scores -inf: it asks at every finite threshold.

The acting completion is the checkpoint's greedy one with its own ask taken away (`call_user` gets -inf
at the tool call's fork, `evaluation.fork`): every ask of this policy is the threshold's, so the curve
runs from the never-ask corner (0, 0) to the always-ask corner (1, 1) like learned asking's. At
threshold t a step asks, with a fixed question (`ASK_TEXT`), iff its score < t. So one greedy pass that
records each step's score gives the whole curve: `curve_points` with margin -score and bias t asks
exactly where -score + t > 0. An acting completion that asks all the same (the fork was written in
another form) asks at every threshold (margin +inf).

The pass runs on HF whatever `eval_engine` says: its score reads the decoding's logits and its acting
completion biases them, and the OpenVINO engine (`evaluation.engine`) has no logits processor.
"""

from __future__ import annotations

from ..profiles import EvalSettings, ModelSettings
import math

import numpy as np

from ..agent.actions import Action, format_completion
from .operating_curve import asks, bootstrap_auc, curve_points, in_record_order

SCORE = "mean log-probability of the tool call's tokens (after </think>) of the greedy completion, its ask taken away"
# the bias that takes the tool call's `call_user` away from the acting completion
NO_ASK = -math.inf
THINK_END = "</think>"


# ------------------------------------------------------------------------ the curve, from scores
def confidence_curve(scores, labels, acted_asks=None, n_boot: int = 1000, seed: int = 0) -> dict:
    """The confidence asker's operating curve: (threshold, isr, needless) at every threshold between
    distinct scores and both ends, and the AUC with its bootstrap interval (`labels` True where asking
    was required; `acted_asks` True where the acting completion asks anyway)."""
    s = np.asarray(scores, dtype=float)
    margins = _margins(s, acted_asks)
    return {
        "score": SCORE,
        "n": len(s),
        "n_inquiry": int(np.sum(labels)),
        "acted_asks": int(np.sum(acted_asks)) if acted_asks is not None else 0,
        "scores": [float(v) if math.isfinite(v) else None for v in s],
        "labels": [bool(y) for y in labels],
        "points": _points(margins, labels),
        "auc": bootstrap_auc(margins, labels, n_boot=n_boot, seed=seed),
    }


def _margins(scores, acted_asks=None) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    acted = np.zeros(len(s), bool) if acted_asks is None else np.asarray(acted_asks, dtype=bool)
    return np.where(acted, math.inf, -s)


def confidence_points(scores, labels, acted_asks=None) -> list[dict]:
    """(threshold, isr, needless) at every threshold between distinct scores and both ends (the curve of
    `confidence_curve` without its AUC: what choosing a threshold on validation needs)."""
    return _points(_margins(scores, acted_asks), labels)


def _points(margins, labels) -> list[dict]:
    return [{"threshold": p["bias"], "isr": p["isr"], "needless": p["needless"]} for p in curve_points(margins, labels)]


def ask_completion(profile: ModelSettings) -> str:
    """The asker's question, in the frame the reference policies write (`evaluation.steps.ASK_TEXT`)."""
    from .steps import ASK_TEXT, ASK_THINK

    return format_completion(ASK_THINK if profile.use_think else None, Action("call_user", text=ASK_TEXT))


def asker_outputs(raw: list[str], scores: list[float], threshold: float, profile: ModelSettings) -> list[str]:
    """The asker's completions at `threshold`: the question where the score is below it, the acting
    completion elsewhere."""
    ask = ask_completion(profile)
    return [ask if s < threshold else text for text, s in zip(raw, scores)]


# ------------------------------------------------------------------------ on a checkpoint
class AnswerLogProbs:
    """A `LogitsProcessor` that records each generated token of every sequence with its log-probability
    under the scores it is handed, until the sequence writes a stop token. A token is read at the call
    after the one that chose it (the greedy choice is made after every processor has run)."""

    def __init__(self, stop_ids):
        self.stop_ids = {int(t) for t in stop_ids if t is not None}
        self.prompt_len: int | None = None
        self.tokens: list[list[int]] = []
        self.logprobs: list[list[float]] = []
        self._done: list[bool] = []
        self._last = None

    def __call__(self, input_ids, scores):
        import torch

        if self.prompt_len is None:
            self.prompt_len, n = input_ids.shape[1], input_ids.shape[0]
            self.tokens, self.logprobs, self._done = [[] for _ in range(n)], [[] for _ in range(n)], [False] * n
        else:
            for row, tok in enumerate(input_ids[:, -1].tolist()):
                if self._done[row]:
                    continue
                if tok in self.stop_ids:
                    self._done[row] = True
                    continue
                self.tokens[row].append(tok)
                self.logprobs[row].append(float(self._last[row, tok]))
        self._last = torch.log_softmax(scores.float(), dim=-1)
        return scores


def answer_score(tokenizer, tokens: list[int], logprobs: list[float]) -> float:
    """The mean log-probability of the tokens after the reasoning (see the module's docstring)."""
    start = 0
    # special tokens kept: a tokenizer that has `</think>` as one would otherwise hide it
    if THINK_END in tokenizer.decode(tokens):
        # the first prefix that holds the closing tag ends the reasoning
        start = next(k for k in range(1, len(tokens) + 1) if THINK_END in tokenizer.decode(tokens[:k]))
    answer = logprobs[start:] or logprobs
    return float(np.mean(answer)) if answer else -math.inf


class _Readers:
    """The pass's readers as one `LogitsProcessor`, each handed the scores before the ask is taken away (a
    `LogitsProcessorList` cannot sit inside the one `generate` builds: its `**kwargs` would be demanded)."""

    def __init__(self, *readers):
        self.readers = readers

    def __call__(self, input_ids, scores):
        for reader in self.readers:
            scores = reader(input_ids, scores)
        return scores


def confidence_scores(
    model, processor, records: list[dict], profile: EvalSettings, batch_size: int | None = None, progress: bool = False
) -> tuple[list[float], list[str]]:
    """One greedy pass with the ask taken away: each step's score and its acting completion, in the
    records' order (`asking_scores` without the margins)."""
    scores, _, raw = asking_scores(model, processor, records, profile, batch_size, progress)
    return scores, raw


def asking_scores(
    model, processor, records: list[dict], profile: EvalSettings, batch_size: int | None = None, progress: bool = False
) -> tuple[list[float], list[float], list[str]]:
    """The confidence pass read for both families at once: each step's score, its learned ask margin (the
    one `evaluation.operating_curve.ask_margins` reads at bias 0; -inf where the fork is never reached) and
    its acting completion, in the records' order.

    The margin is the unbiased pass's: only the tool call's `call_user` is taken away, and it comes at or
    after the learned fork (the reasoning's "Inquiry check:" or the tool call's own), so every token before
    the fork is the one greedy decoding writes at bias 0, and the margin is read before the ask is taken
    away. One pass instead of two for both curves."""
    from .fork import ForkBias, find_fork
    from .steps import generate  # torch: the curve maths above stay importable without it

    tok = processor.tokenizer
    fork = find_fork(tok, profile.use_think)
    made: list[tuple[AnswerLogProbs, ForkBias]] = []

    def factory() -> _Readers:
        made.append((AnswerLogProbs([tok.eos_token_id, tok.pad_token_id]), ForkBias(tok, fork)))
        return _Readers(*made[-1])

    order: list[int] = []
    raw = generate(
        model,
        processor,
        records,
        profile,
        batch_size=batch_size,
        progress=progress,
        logits_processor=factory,
        ask_bias=NO_ASK,
        order=order,
    )
    rows = in_record_order([(t, lp) for p, _ in made for t, lp in zip(p.tokens, p.logprobs)], order)
    margins = in_record_order([m for _, f in made for m in f.margins], order)
    return [answer_score(tok, t, lp) for t, lp in rows], [-math.inf if math.isnan(m) else m for m in margins], raw


def confidence_operating_curve(
    model,
    processor,
    records: list[dict],
    profile: EvalSettings,
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """The confidence asker's curve of one checkpoint on `records` (see `confidence_curve`)."""
    scores, raw = confidence_scores(model, processor, records, profile, progress=progress)
    labels = [bool(r["inquiry_required"]) for r in records]
    return confidence_curve(scores, labels, asks(raw, profile), n_boot=n_boot, seed=seed)


def confidence_policy(model, processor, profile: EvalSettings, threshold: float, batch_size: int | None = None):
    """The asker played online (an `evaluation.episodes.Policy`): at each turn the greedy pass over the
    running episodes, then the question where the score is below `threshold`."""

    def act(records: list[dict], envs) -> list[str]:
        scores, raw = confidence_scores(model, processor, records, profile, batch_size=batch_size)
        return asker_outputs(raw, scores, threshold, profile)

    return act
