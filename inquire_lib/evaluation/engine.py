"""The evaluation engine behind `Profile.eval_engine`: "hf" (transformers' `generate`, `evaluation.steps`) or
"openvino" (OpenVINO GenAI's `ContinuousBatchingPipeline` on an exported copy, `training.openvino`).

Why another engine: greedy decoding on a CPU reads every weight once per new token, and batches of HF
`generate` decode until their longest answer, so rows that have finished still cost steps. The
continuous-batching scheduler keeps one queue of every prompt of a pass: a row leaves when its answer
ends and the next prompt's prefill takes its place, in the same forward pass as the others' decoding.

What goes in is what the HF path builds: the prompt from the processor's chat template, as text
(`apply_chat_template=False`), and the screenshots as uint8 tensors. GenAI reads the prompt's
`<|vision_start|><|image_pad|><|vision_end|>` tags and resizes and normalises each image itself by the
export's `preprocessor_config.json`, which carries the profile's min/max pixels.

What stays on HF: every pass that reads or changes logits. The operating curve's fork margins
(`evaluation.operating_curve`), the confidence score (`evaluation.confidence`) and a checkpoint's ask bias
(`evaluation.fork.ask_bias_processor`): GenAI has no logits processor and returns only the log-probability
of the tokens it chose.

Numerics: the export's fp32 weights, computed in what the HF path computes in (`training.openvino.engine_precision`,
`INFERENCE_PRECISION_HINT`): bf16 where evaluation runs bf16 on a CPU with native bf16, with a bf16 KV cache, else
f32 with the KV cache in `KV_CACHE_PRECISION` (see there). Both were measured against fp32's answers
(`benchmarks/eval_throughput.py --engine-precision f32 bf16`, docs/lab/log.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..runs.hardware import cpu_kind
from ..runs.integrity import MARKER, read_marker, verify

ENGINES = ("hf", "openvino")
# the marker field that names the checkpoint an export was made from (`training.openvino.export_key`)
SOURCE_KEY = "source_key"
# OpenVINO's CPU default is u8 (per-token scaled). f32 is chosen: it leaves the attention exact, and on both
# CPU kinds it was no slower than u8, with the same answers (docs/lab/log.md, "the KV cache's precision"). The
# cache is small on this model: 30 layers x 3 KV heads x 64 dims x 4 bytes x 2 = 46 KB a token
KV_CACHE_PRECISION = "f32"
# every prompt of a pass starts with the same system turn: measured on and off (benchmarks/eval_throughput.py)
PREFIX_CACHING = False
# the KV cache's pool, in GB: 48 prompts of ~700 tokens at 46 KB a token need ~1.6 GB
CACHE_SIZE_GB = 4


class ExportError(RuntimeError):
    """An export that cannot be used or made: `str()` is one line naming the file."""


def export_problem(folder: str | Path, key: str, hashes: bool = True) -> str | None:
    """Why the export in `folder` may not serve the checkpoint whose export key is `key` (None when it may):
    incomplete (a file missing, truncated or edited: `runs.integrity.verify`), or made from another
    checkpoint (its marker's `source_key` differs), naming the file."""
    folder = Path(folder)
    problem = verify(folder, hashes=hashes)
    if problem is not None:
        return problem
    stored = (read_marker(folder) or {}).get(SOURCE_KEY)
    if stored != key:
        return (
            f"{folder / MARKER}: exported from another checkpoint ({SOURCE_KEY} {str(stored)[:12]}, this one's "
            f"{key[:12]}): stale, export it again (inquire export-openvino)"
        )
    return None


@dataclass
class OpenVINOEngine:
    """A loaded export: `generate` answers a whole pass's prompts in one call."""

    folder: Path
    pipe: object
    eos_token_id: int
    threads: int
    kv_cache_precision: str
    precision: str = "f32"
    prefix_caching: bool = False
    engine: str = "openvino"

    def generate(self, prompts: list[str], images: list[list], max_new_tokens: int, repetition_penalty: float):
        """Greedy answers of `prompts` (each with its PIL images, in the order of its image tags), in order."""
        if not prompts:
            return []
        import numpy as np
        import openvino as ov
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = max_new_tokens
        config.do_sample = False
        config.num_beams = 1
        config.repetition_penalty = repetition_penalty
        config.apply_chat_template = False  # the prompt is already the chat template's text
        # the HF path stops at the tokenizer's end of turn alone (`eval_generation_config`), not at every eos
        # the checkpoint's generation_config.json lists
        config.eos_token_id = self.eos_token_id
        config.stop_token_ids = {self.eos_token_id}
        tensors = [
            [ov.Tensor(np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8)[None])) for im in row]
            for row in images
        ]
        results = self.pipe.generate(list(prompts), tensors, [config] * len(prompts))
        return [r.texts[0] for r in results]


PRECISIONS = ("f32", "bf16")


def open_engine(
    folder: str | Path,
    key: str,
    eos_token_id: int,
    threads: int = 0,
    precision: str = "f32",
    prefix_caching: bool = PREFIX_CACHING,
) -> OpenVINOEngine:
    """The export in `folder` as a continuous-batching pipeline on the CPU, after `export_problem` finds
    nothing; `threads` 0: OpenVINO's own choice (every core). `precision`: what the language model computes
    in (`INFERENCE_PRECISION_HINT`, one of `PRECISIONS`; bf16 only pays where the CPU has it natively, and brings
    a bf16 KV cache with it). `prefix_caching`: a prompt's blocks of KV cache that an earlier prompt of the pass
    already computed (the system turn, the screen's header) are reused instead of prefilled again."""
    if precision not in PRECISIONS:
        raise ValueError(f"engine precision {precision!r}: one of {', '.join(PRECISIONS)}")
    folder = Path(folder)
    problem = export_problem(folder, key)
    if problem is not None:
        raise ExportError(problem)
    try:
        import openvino_genai
    except ImportError as exc:
        raise ExportError(f"eval_engine openvino: {exc} (make install installs openvino-genai)") from None
    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = CACHE_SIZE_GB
    scheduler.enable_prefix_caching = prefix_caching
    # the CPU plugin's paged attention computes in bf16 only over a bf16 KV cache (it refuses an f32 one)
    kv = "bf16" if precision == "bf16" else KV_CACHE_PRECISION
    props = {"INFERENCE_PRECISION_HINT": precision, "KV_CACHE_PRECISION": kv}
    vision = {"INFERENCE_PRECISION_HINT": "f32"}
    if threads == 1 and precision == "bf16" and cpu_kind() == "amx":
        # the CPU plugin (2026.4) dies of a divide error opening a bf16 pipeline on one thread of an AMX CPU
        # (seen on an Intel Xeon; two threads, and one thread in f32, run): two threads keep bf16's answers
        threads = 2
    if threads:
        props["INFERENCE_NUM_THREADS"] = vision["INFERENCE_NUM_THREADS"] = threads
    pipe = openvino_genai.ContinuousBatchingPipeline(
        str(folder), scheduler, "CPU", props, vision_encoder_properties=vision
    )
    return OpenVINOEngine(folder, pipe, eos_token_id, threads, kv, precision, prefix_caching)


def is_engine(model) -> bool:
    """Whether `model` is an engine's (not an HF model that `generate` runs itself)."""
    return getattr(model, "engine", "hf") != "hf"


def export_record(folder: str | Path) -> dict:
    """The export's own record (`inquire_openvino.json`: key, source, exporter, time), {} when unreadable."""
    try:
        rec = json.loads((Path(folder) / "inquire_openvino.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}
