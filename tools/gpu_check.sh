#!/usr/bin/env bash
# The CUDA path of the workbench in a few minutes on one GPU, without a hub download: the smoke
# profile's tiny Qwen2.5-VL in 4-bit (bitsandbytes' CUDA kernels) with LoRA, bf16, through every
# training stage (base agent, SFT, GRPO, multi-turn GRPO), then step and task evaluation of the GRPO
# checkpoint, then the tests that exercise the device (they also run on CPU, where they check less).
# Usage: tools/gpu_check.sh [PYTHON]   (outputs under artifacts/smoke/, as any smoke run's)
set -u
PY=${1:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
S="--profile smoke --set bf16=true"
for stage in "base-agent" "train sft" "train grpo --start sft_full" "train task-grpo --start grpo_full"; do
  t=$(date +%s); $PY -m inquire_lib.cli $stage $S; echo "$stage: rc=$? $(( $(date +%s) - t )) s"
done
$PY - <<'PY'
import json
from pathlib import Path

import torch

from inquire_lib import pipeline
from inquire_lib.profiles import apply_overrides, parse_overrides
from inquire_lib.runs.notebooks import device_info
from inquire_lib.training.checkpoints import checkpoint_path
from inquire_lib.training.models import load_checkpoint

p = apply_overrides(pipeline.profile_of("smoke"), parse_overrides(["bf16=true"]))
print("device", device_info(p))
for name in ("sft_full", "grpo_full", "grpo_task"):
    cfg = json.loads((Path(checkpoint_path(p, name)) / "inquire_train.json").read_text())["config"]
    print(name, {k: cfg.get(k) for k in ("use_cpu", "bf16")})
model, _ = load_checkpoint(p, checkpoint_path(p, "grpo_full"))
layers = {}
for mod in model.modules():
    w = getattr(mod, "weight", None)
    if w is not None:
        key = f"{type(mod).__name__} {w.device} {w.dtype}"
        layers[key] = layers.get(key, 0) + 1
print("layers (type, device, dtype): count", layers)
del model
step = pipeline.evaluate_checkpoint(p, "grpo_full")
task = pipeline.evaluate_checkpoint_tasks(p, "grpo_full")
print("step", {k: step["overall"][k]["value"] for k in ("inquiry_recall", "needless_rate", "safe_step_accuracy")})
print("task", {k: task["overall"][k]["value"] for k in ("success_rate", "isr", "needless_rate")})
if torch.cuda.is_available():
    print("peak GPU memory", torch.cuda.max_memory_allocated() // 2**20, "MiB")
PY
echo "evaluation: rc=$?"
$PY -m pytest -q -rf -p no:cacheprovider tests/test_scaling.py tests/test_models.py tests/test_train.py
