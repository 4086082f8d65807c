"""Each trainer learns something it can be shown to learn: SFT drives its loss on one batch from ln V
(random weights) toward zero; GRPO raises the mean reward of a one-prompt toy whose best completion is
known. Both run through the project's own paths (`training.sft._run_sft`, `training.grpo.grpo`) on the
smoke profile's tiny model, with full weights (no LoRA, no 4-bit): only the optimizer moves them, so
either test fails when the optimizer step does nothing."""

from __future__ import annotations

import pytest
import torch

from inquire_lib.profiles import get_profile

pytestmark = pytest.mark.slow
SMOKE = get_profile("smoke").replace(lora=False, load_in_4bit=False)


def test_sft_overfits_one_batch(tmp_path):
    from inquire_lib.data.benchmark import benchmark
    from inquire_lib.training.sft import _run_sft, training_records

    torch.set_num_threads(1)
    batch = training_records(benchmark(SMOKE)["train"].select(range(SMOKE.sft_batch)), SMOKE, 1.0)
    res = _run_sft(
        SMOKE, start=None, out_dir=tmp_path / "sft", inquiry_share=1.0, train=batch, steps=100, lr=1e-2, warmup=1
    )
    logged = [(h["step"], h["loss"]) for h in res.log_history if "loss" in h]
    losses = [loss for _, loss in logged]
    assert res.n_examples == SMOKE.sft_batch == 4 and logged[-1][0] == 100
    assert losses[0] > 6.5  # ln V = 6.96 for smoke's 1,056 tokens: nothing learned yet
    # the same four completions 100 times: memorised (0.04 where this was written)
    assert losses[-1] < 0.2, losses[::10]


def even_tokens(completions, completion_ids, **_):
    """The toy's reward: the share of a completion's tokens whose id is even. Known best: a completion
    of even-id tokens only (1.0); a random policy scores about 0.5."""
    return [sum(1 for t in ids if t % 2 == 0) / max(1, len(ids)) for ids in completion_ids]


even_tokens.params = {}


def test_grpo_raises_the_reward_of_a_one_prompt_toy(monkeypatch):
    from inquire_lib.training import grpo

    torch.set_num_threads(1)
    monkeypatch.setattr(grpo, "build_reward_funcs", lambda names, profile: [even_tokens])
    # one prompt a step, 8 samples of 16 tokens each; every completion token carries the loss
    toy = SMOKE.replace(
        grpo_prompts_per_step=1,
        num_generations=8,
        max_completion_length=16,
        top_entropy_quantile=1.0,
        grpo_lr=1e-2,
        reward_weights={"even_tokens": 1.0},
    )
    prompt = grpo.grpo_records(toy, n=1)
    res = grpo.grpo(toy, start=None, name="toy", max_steps=30, train=prompt, reward_names=("even_tokens",))
    rewards = [h["reward"] for h in res.log_history if "reward" in h]
    assert len(prompt) == 1 and len(rewards) == 30
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert abs(first - 0.5) < 0.1  # random weights: half the tokens even
    # 0.49 -> 0.93 where this was written; the optimizer step removed, it stays at 0.5
    assert last > 0.8 and last - first > 0.25, [round(r, 2) for r in rewards]
