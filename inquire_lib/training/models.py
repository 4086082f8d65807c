"""Models and processors: an offline tiny Qwen2.5-VL, or a real checkpoint with 4-bit QLoRA.

`build_tiny_model(dir, size)` makes a Qwen2.5-VL-architecture model with random weights and its
processor without any download: a byte-level BPE tokenizer trained on the world's own text, Qwen's
special tokens, a stock `Qwen2VLImageProcessor` bounded to tens of image tokens, and the Qwen2.5-VL
chat template. It is saved and reloaded through the `Auto*` classes, exactly like a hub checkpoint,
so every later stage runs the same code on a tiny model (CPU) or a real one (GPU).
"""

from __future__ import annotations

import contextlib
import gc
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from ..profiles import TOKENIZER_DIGITS, TOKENIZER_SLOTS, EvalSettings, ModelSettings, Profile
from ..runs.paths import atomic_dir, cache_dir
from .configs import quantization_config

QWEN_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Markers the rewards must see after decoding: ordinary added tokens (as Qwen registers them), never
# special ones, since GRPO decodes with skip_special_tokens=True.
MARKERS = ["<tool_call>", "</tool_call>", "<think>", "</think>"]
# the tokenizer's profile fields and their choices, the default first
TOKENIZER_FIELDS = {
    "tokenizer_digits": TOKENIZER_DIGITS,
    "tokenizer_slots": TOKENIZER_SLOTS,
}
# the ones that change only how text is cut, never the vocabulary: a model trained with their defaults
# reads the same ids with any of their choices
CUT_ONLY = ("tokenizer_digits", "tokenizer_slots")


def tokenizer_settings(profile: Profile) -> dict[str, str]:
    """The profile's tokenizer fields that are not their defaults."""
    return {f: getattr(profile, f) for f, choices in TOKENIZER_FIELDS.items() if getattr(profile, f) != choices[0]}


TINY_SIZES = {
    # text hidden, layers, heads, kv heads, mlp, vision hidden, vision depth, vocab
    "smoke": dict(hidden=64, layers=2, heads=4, kv=2, mlp=128, v_hidden=32, v_depth=1, vocab=1024),
    "cpu": dict(hidden=256, layers=4, heads=4, kv=2, mlp=512, v_hidden=64, v_depth=2, vocab=2048),
}


def _slot_tokens() -> list[str]:
    from ..world.apps import SLOT_IDS

    return [f"<{s}>" for s in SLOT_IDS]


def _corpus(n_tasks: int = 600, seed: int = 12345, train_values: str = "fixed") -> list[str]:
    """World text for the tokenizer: prompts and expert completions of generated training tasks,
    drawn as `train_values` says (the text the model will be trained on)."""
    from ..data.benchmark import generate_tasks
    from ..agent.prompts import completion_text, system_prompt, user_text
    from ..world.env import PhoneEnv
    from ..world.expert import run_expert

    env, lines = PhoneEnv(), [system_prompt()]
    for task in generate_tasks(seed, "train", n_tasks, train_values):
        for r in run_expert(env, task):
            rec = {"instruction": task.instruction, "history": r["history"], "a11y": r["screen"].a11y()}
            lines.append(user_text(rec, use_a11y=True, n_images=2))
            lines.append(completion_text(r["think"], r["action"], use_think=True, frame=None))
    return lines


def build_tokenizer(vocab_size: int, train_values: str = "fixed", digits: str = "merged", slots: str = "apart"):
    """A byte-level BPE trained on the world's text, its spaces attached to the next word as GPT-2's are;
    `digits` and `slots` are the profile's `tokenizer_digits` and `tokenizer_slots`."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    for field, value in zip(TOKENIZER_FIELDS, (digits, slots)):
        if value not in TOKENIZER_FIELDS[field]:
            raise ValueError(f"{field} must be {' or '.join(TOKENIZER_FIELDS[field])}, not {value!r}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=QWEN_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(train_values=train_values), trainer=trainer)
    if digits == "split":
        # cut after training, so the vocabulary is the merged one's, token for token: its merges of
        # digits are never reached, and a model trained with merged digits reads the same ids otherwise
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex("[0-9]"), behavior="isolated"), tok.pre_tokenizer]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None, model_max_length=4096
    )
    # ordinary added tokens: they survive skip_special_tokens; joined, in the same order, so the same ids
    fast.add_tokens(
        MARKERS
        + (_slot_tokens() if slots == "apart" else [AddedToken(" " + t, normalized=False) for t in _slot_tokens()])
    )
    return fast


def chat_template() -> str:
    from trl.chat_template_utils import qwen2_5_vl_chat_template

    return qwen2_5_vl_chat_template


def build_tiny_model(out_dir: str | Path, size: str = "cpu", seed: int = 0, profile: Profile | None = None) -> Path:
    """Build (or reuse) a random-weight Qwen2.5-VL of the given size with its processor, in `out_dir`."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    from ..runs.integrity import check_cache, write_marker
    from .weights import check_weights

    out_dir = Path(out_dir)
    if check_cache(
        out_dir,
        adopt=lambda: (out_dir / "config.json").exists()
        and (out_dir / "tokenizer.json").exists()
        and check_weights(out_dir) > 0,
    ):
        return out_dir
    spec = TINY_SIZES[size]
    from ..profiles import get_profile

    profile = profile or get_profile("smoke" if size == "smoke" else "cpu")
    torch.manual_seed(seed)
    random.seed(seed)
    tok = build_tokenizer(spec["vocab"], profile.train_values, profile.tokenizer_digits, profile.tokenizer_slots)
    image_proc = Qwen2VLImageProcessor(
        min_pixels=profile.min_pixels,
        max_pixels=profile.max_pixels,
        size={"shortest_edge": profile.min_pixels, "longest_edge": profile.max_pixels},
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_proc,
        tokenizer=tok,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=chat_template(),
    )
    head_dim = spec["hidden"] // spec["heads"]
    quarter = head_dim // 4
    ids = {
        t: tok.convert_tokens_to_ids(t)
        for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
    }
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=spec["hidden"],
            intermediate_size=spec["mlp"],
            num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"],
            num_key_value_heads=spec["kv"],
            max_position_embeddings=4096,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [head_dim // 2 - 2 * quarter, quarter, quarter],
            },
            bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            depth=spec["v_depth"],
            hidden_size=spec["v_hidden"],
            intermediate_size=spec["v_hidden"] * 2,
            num_heads=2,
            out_hidden_size=spec["hidden"],
            fullatt_block_indexes=[spec["v_depth"] - 1],
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        # train_values only when not the default, so that a default build stays byte-identical
        extra = {} if profile.train_values == "fixed" else {"train_values": profile.train_values}
        extra.update(tokenizer_settings(profile))
        (tmp / "inquire_tiny.json").write_text(json.dumps({"size": size, "seed": seed, **spec, **extra}))
        write_marker(tmp)
    return out_dir


def tiny_dir(profile: Profile) -> Path:
    """The tiny model's cache folder: one per size, seed, `train_values` (the tokenizer is built from
    that kind of training text) and each tokenizer setting; the defaults keep the name it always had."""
    size = profile.model.split(":", 1)[1]
    suffix = "" if profile.train_values == "fixed" else f"-{profile.train_values}"
    suffix += "".join(
        f"-{field.removeprefix('tokenizer_')}-{value}" for field, value in tokenizer_settings(profile).items()
    )
    return cache_dir() / "models" / f"tiny-{size}-s{profile.seed}{suffix}"


def model_path(profile: Profile) -> str:
    """Where the profile's base model lives: the tiny cache folder, the pretrained graft's cache folder
    (`training.pretrained`), or the hub id / local path."""
    if profile.is_tiny:
        size = profile.model.split(":", 1)[1]
        return str(build_tiny_model(tiny_dir(profile), size, profile.seed, profile))
    from .pretrained import PRETRAINED, build_pretrained_model, pretrained_dir

    if profile.model in PRETRAINED:
        return str(build_pretrained_model(pretrained_dir(profile), profile, profile.seed))
    from .devices import resolve_model

    return resolve_model(profile)


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def disable_bnb_cpu_repack(model) -> int:
    """On CPU, an eval-mode forward repacks 4-bit weights for AVX512-BF16 and breaks later training;
    switching that path off on every Linear4bit keeps inference and training interleavable."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        return 0
    n = 0
    for m in model.modules():
        if isinstance(m, bnb.nn.Linear4bit):
            m.support_avx512bf16_for_cpu = False
            n += 1
    return n


def load_processor(path: str, profile: ModelSettings):
    from transformers import AutoProcessor

    kw = {} if profile.is_tiny else {"min_pixels": profile.min_pixels, "max_pixels": profile.max_pixels}
    proc = AutoProcessor.from_pretrained(path, **kw)
    if not hasattr(proc, "image_processor"):
        raise TypeError(f"{path}: AutoProcessor returned {type(proc).__name__}, not a multimodal processor")
    proc.tokenizer.padding_side = "left"  # batched generation needs left padding
    return proc


def load_model_and_processor(
    profile: Profile, checkpoint: str | None = None, adapter: str | None = None, trainable: bool = False
):
    """Model + processor for a profile. `checkpoint` overrides the base (a full SFT output dir);
    `adapter` loads a PEFT adapter on top. 4-bit NF4 when the profile asks for it."""
    from transformers import AutoModelForImageTextToText

    from .devices import require_device
    from .weights import check_weights

    require_device(profile)
    path = checkpoint or model_path(profile)
    check_weights(path)  # truncated or NaN/Inf weights are refused here, naming the file
    if adapter:
        check_weights(adapter)
    kwargs: dict = {}
    use_cuda = torch.cuda.is_available()
    if profile.load_in_4bit:
        kwargs["quantization_config"] = quantization_config(profile)
    if use_cuda:
        kwargs["device_map"] = {"": 0}
        kwargs["dtype"] = torch.bfloat16 if profile.bf16 else torch.float32
    else:
        kwargs["dtype"] = torch.float32
    model = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    disable_bnb_cpu_repack(model)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter, is_trainable=trainable)
    # the processor never changes in training: always take the base model's, never a trainer's re-save
    processor = load_processor(model_path(profile), profile)
    if not trainable:
        model.eval()
    return model, processor


def base_of(path: str | None, profile: Profile, base: str | None = None) -> str:
    """The full-weights model under a training output (itself, unless it is an adapter). `base`: the model under
    an adapter whose folder does not name it (a trainer's checkpoint-<step> folder)."""
    if path is None:
        return model_path(profile)
    meta = Path(path) / "inquire_train.json"
    if (Path(path) / "adapter_config.json").exists():
        if base is not None:
            return str(base)
        return json.loads(meta.read_text())["base"] if meta.exists() else model_path(profile)
    return str(path)


def load_checkpoint(profile: Profile, path: str | None, trainable: bool = False, base: str | None = None):
    """Model + processor from a training output: an adapter dir goes on top of the model it was
    trained on (`base_of`), a full model dir is loaded as is; None gives the untrained base."""
    if path is not None and (Path(path) / "adapter_config.json").exists():
        return load_model_and_processor(
            profile, checkpoint=base_of(path, profile, base), adapter=path, trainable=trainable
        )
    return load_model_and_processor(profile, checkpoint=path, trainable=trainable)


def for_inference(model, profile: EvalSettings):
    """The model as evaluation runs it where the profile asks for fast evaluation on a CPU (`eval_bf16`):
    an adapter merged into its base (in fp32, so no LoRA layer pays for its extra matmuls at every new
    token), then bf16 where `runs.hardware.eval_uses_bf16` says bf16 pays on this machine; else as loaded."""
    from ..runs.hardware import eval_uses_bf16

    if torch.cuda.is_available() or not profile.eval_bf16:
        return model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    if not eval_uses_bf16(profile):
        return model.eval()
    # a new token's attention is a few small matmuls per head: CPU SDPA in bf16 takes 3x its fp32 time there
    # (21 ms against 7 ms a layer for 16 rows x 9 heads x 400 keys, measured), eager attention less than either
    model.set_attn_implementation("eager")
    return model.to(torch.bfloat16).eval()


@dataclass
class Loaded:
    """A loaded checkpoint; `loaded` empties it when its block ends."""

    model: object
    processor: object


@contextlib.contextmanager
def loaded(profile: Profile, path: str | None, base: str | None = None):
    """`with loaded(profile, path) as m:` the checkpoint at `path` (`load_checkpoint`) as `m.model` and
    `m.processor`, freed when the block ends, raised or not. The block's name holds the emptied
    `Loaded`, not the model, so the next model of a loop is loaded into the memory this one held, not
    beside it. `base`: the model under an adapter checkpoint whose folder does not name it (a trainer's
    checkpoint-<step> folder)."""
    held = Loaded(*load_checkpoint(profile, path, base=base))
    held.model = for_inference(held.model, profile)
    try:
        yield held
    finally:
        held.model = held.processor = None
        gc.collect()


def model_digest(path: str | None, profile: Profile, base: str | None = None) -> str:
    """What a model *is*, not where it lies: a sha256 over its weights and configs (an adapter's
    together with its base's, `base_of`); the profile's base model for None; a hub id stands for itself."""
    import hashlib

    from ..runs.integrity import content_digest

    def one(p) -> str:
        folder = Path(p)
        if not folder.is_dir():
            return f"id:{p}"
        names = {
            f.name
            for f in folder.iterdir()
            if f.suffix == ".safetensors" or f.name in ("config.json", "adapter_config.json")
        }
        return content_digest(folder, names)

    if path is None:
        return one(model_path(profile))
    if (Path(path) / "adapter_config.json").exists():
        return hashlib.sha256(f"{one(path)}+{one(base_of(path, profile, base))}".encode()).hexdigest()
    return one(path)
