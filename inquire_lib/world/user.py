"""The simulated user's words when a question gets no new answer: seeded paraphrases.

What the user answers is decided in `env.PhoneEnv` (with `agent.questions`); here is only how a
non-answer or a repeated answer is worded. Each reply is drawn from a few phrasings by a seed of the
episode's state, so the same play gets the same words while an agent cannot learn one fixed sentence
as the sign of a refused question.
"""

from __future__ import annotations

import random

# a question that names nothing the task misses: the user gives nothing away
NOT_ANSWERED = (
    "What do you need to know?",
    "I'm not sure what you're asking.",
    "What exactly is the question?",
    "Sorry, what do you want to know?",
    "Could you say what you need from me?",
    "Ask me what you need to know.",
)
# a question already answered: the earlier answer again
REPEATED = (
    "As I said: {reply}",
    "I already told you: {reply}",
    "Like I said, {reply}",
    "Again: {reply}",
)


def paraphrase(options: tuple[str, ...], key: str, **fields) -> str:
    """One of `options`, chosen by `key` alone, with `fields` filled in."""
    return random.Random(f"user-reply:{key}").choice(options).format(**fields)


def not_answered(key: str) -> str:
    return paraphrase(NOT_ANSWERED, key)


def repeated(reply: str, key: str) -> str:
    return paraphrase(REPEATED, key, reply=reply)
