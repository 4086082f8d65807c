"""The copy probe scores exactly the value's tokens: an oracle that always predicts the next input
token gets every one right, a model that repeats the current token gets the value wrong."""

from __future__ import annotations

import json
from types import SimpleNamespace

import datasets
import pytest
import torch

from inquire_lib.data.benchmark import FEATURES, generate_tasks, task_records
from inquire_lib.evaluation.copying import value_token_accuracy
from inquire_lib.profiles import get_profile
from inquire_lib.training import models
from inquire_lib.world.env import PhoneEnv

pytestmark = pytest.mark.slow  # builds the smoke tiny model's tokenizer

SMOKE = get_profile("smoke")


class Echo:
    """Logits that put the arg-max on input token i + `shift` at position i."""

    def __init__(self, vocab: int, shift: int):
        self.vocab, self.shift = vocab, shift

    def eval(self):
        return self

    def __call__(self, input_ids, **_):
        target = torch.roll(input_ids[0], -self.shift) if self.shift else input_ids[0]
        return SimpleNamespace(logits=torch.nn.functional.one_hot(target, self.vocab).float()[None])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_CACHE", str(tmp_path_factory.mktemp("cache")))
        torch.set_num_threads(1)
        _, processor = models.load_model_and_processor(SMOKE)
    env = PhoneEnv()
    rows = [r for t in generate_tasks(0, "test", 30) for r in task_records(t, env)]
    return processor, list(datasets.Dataset.from_list(rows, features=FEATURES))


def test_an_oracle_copies_every_value_token_and_an_echo_none_of_the_first(setup):
    processor, records = setup
    typed = [json.loads(r["gold_action"])["text"] for r in records if json.loads(r["gold_action"])["action"] == "type"]
    assert len(typed) >= 3
    vocab = len(processor.tokenizer)
    oracle = value_token_accuracy(Echo(vocab, 1), processor, records, SMOKE)
    assert oracle["steps"] == len(typed)
    assert oracle["first"]["k"] == oracle["first"]["n"] == len(typed)
    assert oracle["later"]["k"] == oracle["later"]["n"] >= 1
    # every later token is one of the value's: at most as many as the value has characters
    assert oracle["later"]["n"] <= sum(len(t) - 1 for t in typed)
    echo = value_token_accuracy(Echo(vocab, 0), processor, records, SMOKE)
    assert echo["first"]["k"] == 0 and echo["later"]["n"] == oracle["later"]["n"]
