"""Run `inquire train <stage>` in this process (alone, or as one rank under torchrun) and record,
per rank, what each optimizer step trained on: a fingerprint of every example of every micro-batch
and its loss-bearing token count; rank 0 adds the logged losses. Used by tests/test_distributed.py.

    python -m torch.distributed.run --nproc_per_node 2 tests/ddp_probe.py OUT.json \
        train sft --profile smoke ... + train grpo --profile smoke ...

(`+` separates commands run one after the other in the same processes; `run_stages` does the same
in the calling process, for the single-process reference.)

For GRPO the sampled completions are replaced, after TRL's own generation, by a fixed set that
depends only on the prompt and the completion's place in its group (the gold-like call_user,
a click, an open, an unreadable answer, ...): sampling on two processes draws other random
numbers than on one, so only fixed completions make the two runs' losses comparable. Rewards,
advantages, the entropy mask and the loss are TRL's and ours, untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

RANK = int(os.environ.get("RANK", "0"))
SEEN: list[dict] = []  # one entry per micro-batch: {"step", "examples": [fingerprint], "tokens"}

FIXED = [
    "<think>The task needs the user. Inquiry check: needed, because it is risky.</think>"
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "call_user", "text": "Should I go on?"}}</tool_call>',
    "<think>Tap the row. Inquiry check: not needed, because it is safe.</think>"
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [56, 120]}}</tool_call>',
    "<think>Open the app. Inquiry check: not needed, because it is safe.</think>"
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "open", "text": "Mail"}}</tool_call>',
    "no tool call at all",
]


def fingerprint(ids) -> str:
    return hashlib.sha256(",".join(str(int(t)) for t in ids).encode()).hexdigest()[:16]


class _Setattr:
    """The `setattr` of pytest's monkeypatch, for a standalone run (nothing to undo)."""

    @staticmethod
    def setattr(obj, name, value):
        setattr(obj, name, value)


def patch_sft(mp):
    from trl import SFTTrainer

    original = SFTTrainer.compute_loss

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if model.training:
            ids, mask = inputs["input_ids"], inputs["attention_mask"]
            SEEN.append(
                {
                    "step": self.state.global_step,
                    "examples": [fingerprint(row[m.bool()]) for row, m in zip(ids, mask)],
                    "tokens": int((inputs["labels"][..., 1:] != -100).sum()),
                }
            )
        return original(self, model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    mp.setattr(SFTTrainer, "compute_loss", compute_loss)


def patch_grpo(mp):
    from trl import GRPOTrainer

    original_generate = GRPOTrainer._generate_single_turn
    original_score = GRPOTrainer._generate_and_score_completions

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        _, logprobs = original_generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        tok = self.processing_class.tokenizer
        fixed = [tok.encode(t, add_special_tokens=False) + [tok.eos_token_id] for t in FIXED]
        # rows come in groups of num_generations copies of one prompt; a group never straddles ranks
        return [fixed[i % num_generations % len(fixed)] for i in range(len(prompt_ids))], None

    def score(self, inputs):
        SEEN.append({"step": self.state.global_step, "examples": [str(x["id"]) for x in inputs], "tokens": None})
        return original_score(self, inputs)

    mp.setattr(GRPOTrainer, "_generate_single_turn", generate)
    mp.setattr(GRPOTrainer, "_generate_and_score_completions", score)


def run_stages(commands: list[list[str]], mp=_Setattr) -> dict:
    """Run each `inquire` command (a `train` stage) in this process; returns {stage: record}."""
    from inquire_lib import cli
    from inquire_lib.training import devices

    torch.set_num_threads(1)
    captured = {}
    original_prepare = devices.prepare_trainer

    def prepare_trainer(trainer):
        captured["trainer"] = trainer
        return original_prepare(trainer)

    mp.setattr(devices, "prepare_trainer", prepare_trainer)
    records = {}
    for args in commands:
        stage = args[1]
        SEEN.clear()
        patch_sft(mp) if stage == "sft" else patch_grpo(mp)
        assert cli.main(args) == 0, args
        trainer = captured.pop("trainer")
        records[stage] = {
            "rank": RANK,
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "seen": list(SEEN),
            "per_device_train_batch_size": trainer.args.per_device_train_batch_size,
            "gradient_accumulation_steps": trainer.args.gradient_accumulation_steps,
            "log": [h for h in trainer.state.log_history if "loss" in h],
        }
    return records


def main(argv: list[str]) -> int:
    out, commands = Path(argv[0]), [[]]
    for token in argv[1:]:
        commands.append([]) if token == "+" else commands[-1].append(token)
    records = run_stages(commands)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(f"{out.stem}.rank{RANK}.json").write_text(json.dumps(records, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
