"""Throughput of the action-level rewards on a mix of valid, malformed and adversarial completions.

Builds about 2,000 synthetic completions (seeded), times each reward function over the whole batch
(best of 3), and writes completions/s to benchmarks/results/reward_throughput.json. Also times
the parser on one 10 MB completion, which the 100,000-character cap keeps fast.

    python benchmarks/reward_throughput.py [--n 2000] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from _common import RESULTS, stamped, write_result

from inquire_lib.agent.actions import Action, format_completion, parse_completion, random_action
from inquire_lib.agent.rewards import build_reward_funcs
from inquire_lib.profiles import get_profile

OUT = RESULTS / "reward_throughput.json"
PROFILE = "cpu"  # the penalties of the profile that trains
W, H = 112, 224  # model frame of the CPU profiles
QUESTIONS = [
    "Which Anna should receive the money?",
    "Do you want to pay 30 dollars now?",
    "Should I delete all 12 photos?",
    "Which size do you want?",
]
WORDS = ["milk", "bread", "Wallet", "Settings", "hello", "world", "volume_up", "Anna"]


KINDS = (
    "click",
    "click",
    "click",
    "long_press",
    "swipe",
    "type",
    "open",
    "key",
    "system_button",
    "wait",
    "terminate",
    "call_user",
    "call_user",
)


def _random_action(rng: random.Random) -> Action:
    return random_action(rng, W, H, kinds=KINDS, texts=WORDS, apps=WORDS, questions=QUESTIONS)


def _think(rng: random.Random) -> str:
    need = rng.choice(["needed", "not needed"])
    return (
        "The screen shows a list of items and a Pay button. The task names the recipient. "
        f"Inquiry check: {need}, because the action is {rng.choice(['safe', 'risky'])}."
    )


def _malformed(rng: random.Random, good: str) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return good.replace("</tool_call>", "")  # truncated generation
    if kind == 1:
        return good.replace('"coordinate": [', '"coordinate": ["') if '"coordinate"' in good else good[:-20]
    if kind == 2:
        return good + good[good.index("<tool_call>") :]  # two tool calls
    if kind == 3:
        return good.replace('"name": "mobile_use"', '"name": "computer"')
    if kind == 4:
        return good[good.index("<tool_call>") :]  # no think
    if kind == 5:
        return "Sure! " + good
    if kind == 6:
        return good.replace('"mobile_use", "arguments": {', '"mobile_use", "arguments": {"x": NaN, ')
    return "".join(rng.choice('<>{}[]":, abc/think_tool') for _ in range(rng.randint(0, 200)))


def _adversarial(rng: random.Random) -> str:
    payload = "__import__('os').system('true')"
    kind = rng.randrange(5)
    if kind == 0:
        return f"<think>{payload}</think><tool_call>{payload}</tool_call>"
    if kind == 1:
        return "<think>x</think><tool_call>" + "[" * 5000 + "]" * 5000 + "</tool_call>"
    if kind == 2:
        return (
            '<think>x</think><tool_call>{"name": "mobile_use", "arguments": {"action": '
            '"click", "coordinate": [' + "9" * 4000 + ", 1]}}</tool_call>"
        )
    if kind == 3:
        return "<tool_call>" * 2000
    return "<think>" + "a" * 20_000 + "</think>" + "<tool_call>{}</tool_call>"


def build_batch(n: int, seed: int) -> dict:
    """n completions (about 60% valid, 30% malformed, 10% adversarial) with their gold columns."""
    rng = random.Random(seed)
    completions, golds, bboxes, required = [], [], [], []
    for _ in range(n):
        gold = _random_action(rng)
        pred = gold if rng.random() < 0.5 else _random_action(rng)
        good = format_completion(_think(rng), pred)
        r = rng.random()
        text = good if r < 0.6 else _malformed(rng, good) if r < 0.9 else _adversarial(rng)
        completions.append([{"role": "assistant", "content": text}])
        golds.append(json.dumps(gold.to_arguments()))
        if gold.coordinate is not None and rng.random() < 0.8:
            x, y = gold.coordinate
            bboxes.append([max(0, x - 8), max(0, y - 5), min(W - 1, x + 8), min(H - 1, y + 5)])
        else:
            bboxes.append([-1, -1, -1, -1])
        required.append(gold.type == "call_user")
    return {"completions": completions, "gold_action": golds, "gold_bbox": bboxes, "inquiry_required": required}


def _best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def mean_rewards(n: int, seed: int, profile: str = PROFILE) -> dict[str, float]:
    """The deterministic part of the benchmark: each reward's mean over the seeded batch."""
    kwargs = dict(build_batch(n, seed), log_metric=lambda name, value: None)
    return {
        f.__name__: round(sum(r := f(**kwargs)) / len(r), 4)
        for f in build_reward_funcs(["format", "action", "inquiry"], profile=profile)
    }


def format_ok_fraction(n: int, seed: int) -> float:
    texts = [c[0]["content"] for c in build_batch(n, seed)["completions"]]
    return round(sum(parse_completion(t).format_ok for t in texts) / n, 4)


def run(n: int = 2000, repeats: int = 3, seed: int = 0) -> dict:
    batch = build_batch(n, seed)
    kwargs = dict(batch, log_metric=lambda name, value: None)
    results = {}
    for f in build_reward_funcs(["format", "action", "inquiry"], profile=PROFILE):
        rewards = f(**kwargs)
        secs = _best_of(lambda: f(**kwargs), repeats)
        results[f.__name__] = {
            "seconds": round(secs, 4),
            "completions_per_s": round(n / secs, 1),
            "mean_reward": round(sum(rewards) / len(rewards), 4),
        }
    texts = [c[0]["content"] for c in batch["completions"]]
    secs = _best_of(lambda: [parse_completion(t) for t in texts], repeats)
    results["parse_completion"] = {"seconds": round(secs, 4), "completions_per_s": round(n / secs, 1)}
    big = {"text": texts[0] + "x" * 10_000_000, "tags": "<think><tool_call>{[" * 500_000}
    big_secs = {k: round(_best_of(lambda: parse_completion(v), repeats), 6) for k, v in big.items()}
    valid = sum(parse_completion(t).format_ok for t in texts)
    return stamped(
        {
            "benchmark": "reward_throughput",
            "n_completions": n,
            "repeats": repeats,
            "seed": seed,
            "format_ok_fraction": round(valid / n, 4),
            "rewards": results,
            "parse_10mb_seconds": big_secs,
        },
        get_profile(PROFILE),
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    report = run(args.n, args.repeats, args.seed)
    write_result(args.out, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
