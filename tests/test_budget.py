"""The memory formula (`training/budget.py`) against the tiny model's measured peak on CPU, and the
model shapes it reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inquire_lib.training.budget import QWEN25_VL, ModelSpec, estimate_memory, markdown_table, memory_table
from inquire_lib.training.models import TINY_SIZES

ROOT = Path(__file__).resolve().parents[1]

# One full training step (forward, backward, AdamW) of the tiny cpu model on B x S random tokens,
# in a fresh process: the peak resident memory it adds over the built model (Linux VmHWM, reset first).
MEASURE = r"""
import json, sys, torch
torch.set_num_threads(1)
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
from inquire_lib.training.models import TINY_SIZES
B, S = int(sys.argv[1]), int(sys.argv[2])
sp = TINY_SIZES["cpu"]; hd = sp["hidden"] // sp["heads"]; q = hd // 4
cfg = Qwen2_5_VLConfig(
    text_config=dict(vocab_size=sp["vocab"], hidden_size=sp["hidden"], intermediate_size=sp["mlp"],
                     num_hidden_layers=sp["layers"], num_attention_heads=sp["heads"], num_key_value_heads=sp["kv"],
                     max_position_embeddings=4096, tie_word_embeddings=True,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [hd // 2 - 2 * q, q, q]}),
    vision_config=dict(depth=sp["v_depth"], hidden_size=sp["v_hidden"], intermediate_size=sp["v_hidden"] * 2, num_heads=2,
                       out_hidden_size=sp["hidden"], fullatt_block_indexes=[sp["v_depth"] - 1]),
    tie_word_embeddings=True)
model = Qwen2_5_VLForConditionalGeneration(cfg).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, sp["vocab"], (B, S))
def kib(key):
    return int(next(line for line in open("/proc/self/status") if line.startswith(key)).split()[1]) * 1024
# reset the peak (VmHWM) to the current resident size, so a higher peak while importing cannot hide the step's
open("/proc/self/clear_refs", "w").write("5")
base = kib("VmRSS:")
model(input_ids=ids, labels=ids).loss.backward()
opt.step()
peak = kib("VmHWM:")
print(json.dumps({"added": peak - base,
                  "text_params": sum(p.numel() for n, p in model.named_parameters() if "visual" not in n)}))
"""


def tiny_spec() -> ModelSpec:
    sp = TINY_SIZES["cpu"]
    return ModelSpec("tiny-cpu", sp["layers"], sp["hidden"], sp["mlp"], sp["heads"], sp["kv"], sp["vocab"], 0)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to reset the peak")
def test_estimate_matches_the_tiny_models_measured_peak_on_cpu():
    """fp32, no gradient checkpointing, PyTorch's math attention on CPU (it keeps the attention
    probabilities): within 15%. The measurement counts what the step adds (gradients, AdamW's
    moments, activations, logits), the estimate the same terms; 15% covers the allocator's rounding
    and the few small tensors (norm statistics, rotary tables) the formula leaves out."""
    B, S = 8, 512
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(B), str(S)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    spec = tiny_spec()
    est = estimate_memory(
        spec, "full", B, S, gradient_checkpointing=False, act_bytes=4, gpu=False, attention_scores=True
    )
    added = est["total"] - est["weights"]
    # the language model's shape gives its parameter count (the formula leaves out only the norms)
    assert abs(spec.params - measured["text_params"]) / measured["text_params"] < 0.01
    assert 0.85 < measured["added"] / added < 1.15, (measured["added"] / 2**20, added / 2**20)
    assert est["activations"] > 3 * est["trainable"]  # what the test measures is mostly activations


def test_qwen_shapes_give_their_parameter_counts():
    assert QWEN25_VL["3B"].params == pytest.approx(3.75e9, rel=0.03)
    assert QWEN25_VL["7B"].params == pytest.approx(8.29e9, rel=0.03)
    assert QWEN25_VL["3B"].lora_params(64) == pytest.approx(119.7e6, rel=0.01)


def test_gradient_checkpointing_and_4bit_shrink_the_estimate():
    spec = QWEN25_VL["7B"]
    full = estimate_memory(spec, "lora", 4, 1316, gradient_checkpointing=False)
    ckpt = estimate_memory(spec, "lora", 4, 1316)
    q = estimate_memory(spec, "qlora", 4, 1316)
    assert ckpt["activations"] < full["activations"] / 10
    assert q["weights"] < ckpt["weights"] / 2 and q["trainable"] == ckpt["trainable"]
    with pytest.raises(ValueError):
        estimate_memory(spec, "int8", 1, 1)


def test_table_covers_models_methods_stages_and_gpus():
    rows = memory_table()
    assert {(r["model"], r["method"], r["stage"]) for r in rows} == {
        (m, meth, st)
        for m in ("Qwen2.5-VL-3B", "Qwen2.5-VL-7B")
        for meth in ("QLoRA 4-bit", "LoRA bf16")
        for st in ("SFT", "GRPO", "task GRPO")
    }
    for r in rows:
        assert r["fits_80"] and r["s_per_step_24"] > r["s_per_step_40"] > r["s_per_step_80"] > 0
    table = markdown_table(rows)
    assert table.count("\n") == len(rows) + 1
    docs = (ROOT / "docs" / "lab" / "scaling.md").read_text()
    assert table in docs  # the docs show the table this code computes
