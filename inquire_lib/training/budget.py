"""Memory and time of a training step, estimated from the model's shape and the step's tokens.

ESTIMATES, not measurements: `docs/lab/scaling.md` prints `memory_table()`; `tests/test_budget.py`
checks `estimate_memory` against the tiny model's measured peak on CPU. The terms (bytes):

    weights      4-bit NF4 (QLoRA: ~0.53 B/param for the language model's linear layers) or 16-bit,
                 embeddings, lm_head and the vision tower in 16-bit (they are never quantised here)
    trainable    LoRA (or all) parameters: weight + gradient + AdamW's two moments, fp32: 16 B/param
    activations  per token per layer, what autograd keeps of a decoder layer:
                     act_bytes x (7 h + 2 kv + 4 i)          (h hidden, kv = kv_heads x head_dim, i MLP width)
                 all layers without gradient checkpointing; with it, the layer inputs
                 (layers x h x act_bytes) plus one layer recomputed in full; an attention kernel
                 that keeps its probabilities (PyTorch's math SDPA, the one CPU training takes)
                 adds heads x seq_len x act_bytes per token per kept layer (flash and
                 memory-efficient kernels on a GPU keep none)
    logits       positions x vocab x 8 (fp32 logits and their gradient); SFT: every position,
                 GRPO: the completion positions (TRL keeps only those)
    kv cache     GRPO generation: sequences x length x layers x 2 kv x 2 B (not at the same time as
                 the backward pass, so the peak is the larger of the two)
    overhead     CUDA context and allocator slack, 1.5 GB on a GPU (0 on CPU)

Time: a step's training FLOPs are 6 x N x tokens with gradient checkpointing (forward, recompute,
backward through frozen weights: 2 + 2 + 2), 8 x N for full training with it, at a model-FLOPs
utilisation of 35% (LoRA) or 25% (QLoRA, for the dequantisation); generation is bound by memory
bandwidth: one read of the weights per new token.
"""

from __future__ import annotations

from ..profiles import ModelSettings
from dataclasses import asdict, dataclass

GB = 1024**3


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    vision_params: float  # parameters of the vision tower and merger
    tied_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_linear_params(self) -> int:
        """q, k, v, o and the three MLP projections of one decoder layer."""
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        return h * h + 2 * h * kv + h * h + 3 * h * i

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> float:
        return self.layers * self.layer_linear_params + self.embedding_params + self.vision_params

    def lora_params(self, r: int) -> int:
        """LoRA parameters on q, k, v, o, gate, up and down of every layer: r x (in + out) each."""
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        per_layer = r * ((h + h) + (h + kv) * 2 + (h + h) + (h + i) * 2 + (i + h))
        return self.layers * per_layer


# Qwen2.5-VL configs (config.json of the hub checkpoints); vision tower ~0.67B in both
QWEN25_VL = {
    "3B": ModelSpec(
        "Qwen2.5-VL-3B",
        layers=36,
        hidden=2048,
        intermediate=11008,
        heads=16,
        kv_heads=2,
        vocab=151936,
        vision_params=0.67e9,
        tied_embeddings=True,
    ),
    "7B": ModelSpec(
        "Qwen2.5-VL-7B",
        layers=28,
        hidden=3584,
        intermediate=18944,
        heads=28,
        kv_heads=4,
        vocab=152064,
        vision_params=0.67e9,
        tied_embeddings=False,
    ),
}

# memory (GB), bf16 dense TFLOP/s, memory bandwidth (GB/s) of a typical GPU of each size
GPUS = {24: ("A10 / RTX 4090 (24 GB)", 125, 600), 40: ("A100 40 GB", 312, 1555), 80: ("H100 80 GB", 989, 3350)}


def spec_of(config) -> ModelSpec:
    """A ModelSpec from a transformers Qwen2.5-VL config (the tiny models included)."""
    text = config.text_config
    vision = config.vision_config
    v_h, v_i = vision.hidden_size, vision.intermediate_size
    vision_params = vision.depth * (4 * v_h * v_h + 3 * v_h * v_i) + vision.out_hidden_size * v_h * 4
    return ModelSpec(
        getattr(config, "name_or_path", "") or "qwen2.5-vl",
        text.num_hidden_layers,
        text.hidden_size,
        text.intermediate_size,
        text.num_attention_heads,
        text.num_key_value_heads,
        text.vocab_size,
        vision_params,
        bool(getattr(text, "tie_word_embeddings", True)),
    )


def estimate_memory(
    spec: ModelSpec,
    method: str,
    micro_batch: int,
    seq_len: int,
    logit_positions: int | None = None,
    lora_r: int = 64,
    gradient_checkpointing: bool = True,
    act_bytes: int = 2,
    generation: tuple[int, int] | None = None,
    gpu: bool = True,
    attention_scores: bool = False,
) -> dict:
    """Peak memory of one training micro-step, by term, in bytes, plus "total".

    method: "qlora" (4-bit base + LoRA), "lora" (16-bit base + LoRA) or "full" (every parameter
    trained, weights in `act_bytes`); micro_batch x seq_len tokens per forward pass;
    logit_positions per sequence (default seq_len); generation = (sequences, length) for the KV
    cache of GRPO's sampling."""
    if method not in ("qlora", "lora", "full"):
        raise ValueError(f"method must be qlora, lora or full, got {method!r}")
    tokens = micro_batch * seq_len
    linear = spec.layers * spec.layer_linear_params
    rest = spec.embedding_params + spec.vision_params
    if method == "qlora":
        weights = linear * 0.53 + rest * 2
    else:
        weights = (linear + rest) * (act_bytes if method == "full" else 2)
    trainable_params = spec.params if method == "full" else spec.lora_params(lora_r)
    # fp32 weight, gradient and two AdamW moments; a fully trained model's own weights are counted above
    trainable = trainable_params * (12 if method == "full" else 16)
    per_layer = act_bytes * (7 * spec.hidden + 2 * spec.kv_dim + 4 * spec.intermediate)
    if attention_scores:
        per_layer += act_bytes * spec.heads * seq_len
    if gradient_checkpointing:
        activations = tokens * (spec.layers * spec.hidden * act_bytes + per_layer)
    else:
        activations = tokens * spec.layers * per_layer
    logits = micro_batch * (seq_len if logit_positions is None else logit_positions) * spec.vocab * 8
    kv_cache = 0
    if generation is not None:
        sequences, length = generation
        kv_cache = sequences * length * spec.layers * 2 * spec.kv_dim * 2
    overhead = 1.5 * GB if gpu else 0
    out = {
        "weights": weights,
        "trainable": trainable,
        "activations": activations,
        "logits": logits,
        "kv_cache": kv_cache,
        "overhead": overhead,
    }
    out["total"] = weights + trainable + overhead + max(activations + logits, kv_cache)
    return out


def estimate_step_seconds(
    spec: ModelSpec,
    method: str,
    train_tokens: int,
    gpu_gb: int,
    generated_tokens_per_sequence: int = 0,
    gradient_checkpointing: bool = True,
) -> float:
    """Seconds of one optimizer step on the GPU class of `gpu_gb` (see the module docstring)."""
    _, tflops, bandwidth = GPUS[gpu_gb]
    flops_per_token = (6 if method != "full" else 8) if gradient_checkpointing else (4 if method != "full" else 6)
    mfu = 0.25 if method == "qlora" else 0.35
    train = flops_per_token * spec.params * train_tokens / (tflops * 1e12 * mfu)
    weight_bytes = estimate_memory(spec, method, 1, 1, gpu=False)["weights"]
    generate = generated_tokens_per_sequence * weight_bytes / (bandwidth * 1e9)
    return train + generate


# text tokens of a prompt (system prompt, task, history, element list with coordinates) with Qwen's
# tokenizer: the longest prompt text of the cpu profile's training split is ~790 characters, ~265
# tokens at 3 characters a token; the rest is room for the chat template and longer element lists
PROMPT_TEXT_TOKENS = 384


def prompt_tokens(profile: ModelSettings) -> int:
    """Tokens of one stage 1-2 prompt: its screenshots' image tokens (one per 28x28 patch of the
    resized screen) and PROMPT_TEXT_TOKENS of text."""
    from ..agent.prompts import frame_for

    frame = frame_for(profile)
    images = 2 if profile.use_prev_screenshot else 1
    return images * (frame.model_w // 28) * (frame.model_h // 28) + PROMPT_TEXT_TOKENS


def tokens_per_forward(profile, stage: str, processes: int = 1) -> int:
    """The most tokens one forward pass of a stage holds: the per-device micro-batch times the
    longest sequence (prompt + `max_completion_length`; stage 3: prompt + the episode budget)."""
    from .devices import batch_kwargs
    from .task_grpo import episode_token_budget

    micro = batch_kwargs(profile, stage, processes)["per_device_train_batch_size"]
    tail = episode_token_budget(profile) if stage == "task" else profile.max_completion_length
    return micro * (prompt_tokens(profile) + tail)


@dataclass(frozen=True)
class Workload:
    stage: str  # "SFT" or "GRPO"
    micro_batch: int
    seq_len: int
    steps_tokens: int  # tokens trained per optimizer step
    logit_positions: int | None = None
    generation: tuple[int, int] | None = None
    generated: int = 0  # new tokens per sequence sampled per step


def gpu_workloads(profile=None) -> list[Workload]:
    """The gpu profile's stage 1, 2 and 3 steps: prompts of `prompt_tokens` (two screenshots of
    338 image tokens each and 384 text tokens), SFT completions of ~120 tokens, GRPO completions of
    `max_completion_length`, stage 3 one episode of up to `episode_token_budget` tokens after its
    first prompt with every token's logits kept."""
    from ..profiles import get_profile
    from .devices import batch_kwargs

    from .task_grpo import episode_token_budget

    p = profile or get_profile("gpu")
    sft_micro = batch_kwargs(p, "sft", 1)["per_device_train_batch_size"]
    grpo_micro = batch_kwargs(p, "grpo", 1)["per_device_train_batch_size"]
    task_micro = batch_kwargs(p, "task", 1)["per_device_train_batch_size"]
    completions = p.grpo_prompts_per_step * p.num_generations
    episodes = p.grpo_prompts_per_step * p.task_num_generations
    budget = episode_token_budget(p)
    prompt = prompt_tokens(p)
    sft_len, grpo_len, task_len = prompt + 120, prompt + p.max_completion_length, prompt + budget
    return [
        Workload("SFT", sft_micro, sft_len, p.sft_batch * sft_len),
        Workload(
            "GRPO",
            grpo_micro,
            grpo_len,
            completions * grpo_len,
            logit_positions=p.max_completion_length,
            generation=(completions, grpo_len),
            generated=p.max_completion_length,
        ),
        Workload(
            "task GRPO",
            task_micro,
            task_len,
            episodes * task_len,
            logit_positions=budget,
            generation=(episodes, task_len),
            generated=p.max_episode_steps * p.max_completion_length,
        ),
    ]


def memory_table(profile=None) -> list[dict]:
    """One row per model, method and stage at the gpu profile's settings: the estimated peak (GB),
    whether it fits 24 / 40 / 80 GB, and the estimated seconds per optimizer step on each."""
    rows = []
    for size, spec in QWEN25_VL.items():
        for method in ("qlora", "lora"):
            for w in gpu_workloads(profile):
                mem = estimate_memory(
                    spec, method, w.micro_batch, w.seq_len, w.logit_positions, generation=w.generation
                )
                row = {
                    "model": spec.name,
                    "method": "QLoRA 4-bit" if method == "qlora" else "LoRA bf16",
                    "stage": w.stage,
                    "tokens_per_forward": w.micro_batch * w.seq_len,
                    **{k: round(v / GB, 1) for k, v in mem.items()},
                }
                for gb in GPUS:
                    row[f"fits_{gb}"] = mem["total"] <= gb * GB
                    row[f"s_per_step_{gb}"] = round(
                        estimate_step_seconds(spec, method, w.steps_tokens, gb, w.generated), 1
                    )
                rows.append(row)
    return rows


def markdown_table(rows: list[dict] | None = None) -> str:
    rows = rows or memory_table()
    head = (
        "| model | method | stage | tokens / forward | weights | LoRA + AdamW | activations | logits | KV cache "
        "| **peak GB** | 24 GB | 40 GB | 80 GB |"
    )
    out = [head, "|" + "---|" * 13]
    for r in rows:
        cells = [
            r["model"],
            r["method"],
            r["stage"],
            f"{r['tokens_per_forward']:,}",
            r["weights"],
            r["trainable"],
            r["activations"],
            r["logits"],
            r["kv_cache"],
            f"**{r['total']}**",
        ]
        cells += [f"{'fits' if r[f'fits_{gb}'] else 'no'}, ~{r[f's_per_step_{gb}']} s" for gb in GPUS]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out)


def as_dict(spec: ModelSpec) -> dict:
    return {**asdict(spec), "params": spec.params}
