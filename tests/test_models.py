"""The offline tiny Qwen2.5-VL: built without a download, reloaded like a hub checkpoint, and its
4-bit QLoRA form on CPU, where inference and training must interleave."""

from __future__ import annotations

import math

import pytest

import torch
from PIL import Image

from inquire_lib.training import models
from inquire_lib.profiles import get_profile
from inquire_lib.agent.prompts import prompt_messages

pytestmark = pytest.mark.slow

SMOKE = get_profile("smoke")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private INQUIRE_CACHE with the smoke tiny model built in it once."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INQUIRE_CACHE", str(root))
        torch.set_num_threads(1)
        path = models.model_path(SMOKE)
        yield root, path


def test_build_tiny_model_reloads_through_auto_classes(cache):
    from transformers import AutoModelForImageTextToText, AutoProcessor, Qwen2_5_VLProcessor

    root, path = cache
    assert path == str(root / "models" / "tiny-smoke-s0")
    model = AutoModelForImageTextToText.from_pretrained(path)
    proc = AutoProcessor.from_pretrained(path)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert isinstance(proc, Qwen2_5_VLProcessor)
    spec = models.TINY_SIZES["smoke"]
    text = model.config.text_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads) == (
        spec["hidden"],
        spec["layers"],
        spec["heads"],
    )
    assert model.config.vision_config.out_hidden_size == spec["hidden"]
    n = models.n_params(model)
    assert 100_000 < n < 1_000_000
    # every token the tokenizer can emit has an embedding row
    assert model.get_input_embeddings().weight.shape[0] == len(proc.tokenizer)
    assert model.config.image_token_id == proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")


def test_build_is_cached_and_not_rebuilt(cache):
    root, path = cache
    weights = next((root / "models" / "tiny-smoke-s0").glob("*.safetensors"))
    before = weights.stat().st_mtime_ns
    again = models.build_tiny_model(root / "models" / "tiny-smoke-s0", "smoke")
    assert str(again) == path and weights.stat().st_mtime_ns == before
    # no temporary build folders left beside it
    assert [p.name for p in (root / "models").iterdir()] == ["tiny-smoke-s0"]


# sha256 (first 16 hex digits) of the default smoke tiny model's files, taken before train_values
# existed: the default tokenizer and weights must not move
DEFAULT_SMOKE_FILES = {
    "tokenizer.json": "b4a3954b7b39e099",
    "model.safetensors": "06b93e6512db03ac",
    "inquire_tiny.json": "38dfe08cc60fd5d5",
    "config.json": "b2aba9b78da186eb",
}


def _sha16(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_default_tiny_model_is_unchanged(cache):
    from pathlib import Path

    _, path = cache
    assert {name: _sha16(Path(path) / name) for name in DEFAULT_SMOKE_FILES} == DEFAULT_SMOKE_FILES


def test_procedural_train_values_get_a_tokenizer_and_cache_of_their_own(tmp_path, monkeypatch):
    """The tokenizer learns from the kind of training text the model will see; the two settings never
    share a cache folder."""
    from pathlib import Path

    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    torch.set_num_threads(1)
    proc = models.model_path(SMOKE.replace(train_values="procedural"))
    assert proc == str(tmp_path / "models" / "tiny-smoke-s0-procedural")
    assert models.tiny_dir(SMOKE) == tmp_path / "models" / "tiny-smoke-s0"
    assert _sha16(Path(proc) / "tokenizer.json") != DEFAULT_SMOKE_FILES["tokenizer.json"]
    assert '"train_values": "procedural"' in (Path(proc) / "inquire_tiny.json").read_text()


def test_the_tokenizer_corpus_follows_train_values():
    fixed, proc = models._corpus(n_tasks=6), models._corpus(n_tasks=6, train_values="procedural")
    assert fixed[0] == proc[0]  # the system prompt
    assert fixed != proc
    assert models._corpus(n_tasks=6, train_values="fixed") == fixed


def _sublist(small: list, big: list) -> bool:
    return any(big[i : i + len(small)] == small for i in range(len(big) - len(small) + 1))


def test_split_digits_make_a_number_the_same_tokens_wherever_it_stands():
    """Merged, "18" after "$" (the instruction) or a quote (the action) and " 18" after a space (the
    reasoning) share no token; split, the digits are the same ids in all three. The vocabulary is the
    merged one's, id for id, so an agent trained with merged digits can continue with split ones."""
    merged = models.build_tokenizer(1024, "procedural", "merged")
    split = models.build_tokenizer(1024, "procedural", "split")
    assert split.get_vocab() == merged.get_vocab()
    places = ["Send $18 to Dante Moreau.", "Type: 18. Inquiry check", '{"action": "type", "text": "18"}']
    for tok, same in ((split, True), (merged, False)):
        digits = [[tok.convert_ids_to_tokens(i) for i in tok(p, add_special_tokens=False)["input_ids"]] for p in places]
        runs = [[t for t in toks if any(c.isdigit() for c in t)] for toks in digits]
        assert (runs[0] == runs[1] == runs[2] == ["1", "8"]) is same, (tok is split, runs)
    for text in places + ["Sunday 8:15, code cle9805, $140.50"]:
        ids = split(text, add_special_tokens=False)["input_ids"]
        assert split.decode(ids) == text
        assert all(len(t) == 1 for t in split.convert_ids_to_tokens(ids) if any(c.isdigit() for c in t))
    words = "Tell Cleo Kim: dinner is ready in Chat."
    assert merged(words)["input_ids"] == split(words)["input_ids"]  # text without digits is cut alike
    with pytest.raises(ValueError, match="merged or split"):
        models.build_tokenizer(1024, "fixed", "single")


def test_joined_slots_follow_a_name_directly_in_the_list_and_in_the_reasoning():
    """Apart, every element line puts the same space token between a name and its slot; joined, the
    slot token carries the space, so the slot comes right after the name's last token in the element
    list and in the reasoning alike. Same ids, same text back."""
    apart = models.build_tokenizer(1024, "procedural", "merged", "apart")
    joined = models.build_tokenizer(1024, "procedural", "merged", "joined")
    assert len(joined) == len(apart)
    assert joined.convert_tokens_to_ids(" <r2>") == apart.convert_tokens_to_ids("<r2>")
    line, think = "- Dinner party <r2>\n- Flight details <r4>", "Target: Dinner party <r2>. Inquiry check"
    for tok, slot in ((apart, "<r2>"), (joined, " <r2>")):
        for text in (line, think):
            toks = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
            at = toks.index(slot)
            assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
            assert (toks[at - 1] == "y") is (slot == " <r2>"), toks  # "...part" "y" then the slot, or a space first
    words = "Tell Cleo Kim: dinner is ready in Chat."
    assert apart(words)["input_ids"] == joined(words)["input_ids"]
    with pytest.raises(ValueError, match="apart or joined"):
        models.build_tokenizer(1024, "fixed", "merged", "glued")


def test_tokenizer_digits_get_a_cache_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    from inquire_lib.profiles import apply_overrides
    from inquire_lib.training.sft import base_agent_dir

    cpu = get_profile("cpu")
    split = apply_overrides(cpu, {"tokenizer_digits": "split"})
    assert models.tiny_dir(split) == tmp_path / "models" / "tiny-cpu-s0-procedural-digits-split"
    assert base_agent_dir(split) != base_agent_dir(cpu)
    both = apply_overrides(cpu, {"tokenizer_digits": "split", "tokenizer_slots": "joined"})
    assert models.tiny_dir(both) == tmp_path / "models" / "tiny-cpu-s0-procedural-digits-split-slots-joined"
    assert len({base_agent_dir(p) for p in (cpu, split, both)}) == 3


def test_screen_becomes_32_image_tokens(cache):
    _, path = cache
    proc = models.load_processor(path, SMOKE)
    assert proc.tokenizer.padding_side == "left"
    img = Image.new("RGB", (360, 720), "white")
    enc = proc(text=["<|vision_start|><|image_pad|><|vision_end|>Task"], images=[img], return_tensors="pt")
    assert enc["image_grid_thw"].tolist() == [[1, 16, 8]]  # 224/14 x 112/14 patches, merged 2x2 into tokens
    image_id = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((enc["input_ids"] == image_id).sum()) == 32


def test_chat_prompt_expands_each_image_placeholder(cache):
    _, path = cache
    proc = models.load_processor(path, SMOKE)
    screen = Image.new("RGB", (360, 720), "white")
    rec = {"instruction": "Open Chat", "history": [], "a11y": [], "screenshot": screen, "prev_screenshot": screen}
    text = proc.apply_chat_template(prompt_messages(rec, SMOKE), tokenize=False, add_generation_prompt=True)
    assert text.count("<|vision_start|>") == 2 and text.endswith("<|im_start|>assistant\n")
    enc = proc(text=[text], images=[screen, screen], return_tensors="pt")
    image_id = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((enc["input_ids"] == image_id).sum()) == 64


def test_markers_survive_skip_special_tokens(cache):
    _, path = cache
    proc = models.load_processor(path, SMOKE)
    text = '<think>Inquiry check: not needed.</think>\n<tool_call>{"name": "mobile_use"}</tool_call><|im_end|>'
    ids = proc.tokenizer(text)["input_ids"]
    for marker in models.MARKERS:
        assert proc.tokenizer.convert_tokens_to_ids(marker) in ids, marker  # one token each
    decoded = proc.batch_decode([ids], skip_special_tokens=True)[0]
    assert decoded == text.replace("<|im_end|>", "")
    assert proc.tokenizer.eos_token == "<|im_end|>"


@pytest.fixture(scope="module")
def qlora(cache):
    """The smoke model in 4-bit NF4 with LoRA adapters on the language model."""
    from peft import get_peft_model

    from inquire_lib.training.configs import lora_config

    model, proc = models.load_model_and_processor(SMOKE, trainable=True)
    return get_peft_model(model, lora_config(SMOKE)), proc


def test_4bit_loading_disables_cpu_repack(qlora):
    import bitsandbytes as bnb

    model, _ = qlora
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(layers) >= 7 * models.TINY_SIZES["smoke"]["layers"]
    assert all(m.support_avx512bf16_for_cpu is False for m in layers)
    assert models.disable_bnb_cpu_repack(model) == len(layers)


def test_4bit_quantises_the_language_model_only(qlora):
    import bitsandbytes as bnb

    model, _ = qlora
    names = [n for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)]
    # 7 projections in each of the 2 language-model layers; the vision tower and lm_head stay in
    # full precision, as the quantization config's skip list asks
    assert len(names) == 7 * models.TINY_SIZES["smoke"]["layers"]
    assert not [n for n in names if "visual" in n]
    assert type(model.get_output_embeddings()).__name__ == "Linear"


def test_eval_forward_then_training_step_on_4bit_lora(qlora):
    model, proc = qlora
    screen = Image.new("RGB", (360, 720), (200, 220, 240))
    text = proc.apply_chat_template(
        prompt_messages(
            {"instruction": "Open Chat", "history": [], "a11y": [], "screenshot": screen, "prev_screenshot": None},
            SMOKE,
        ),
        tokenize=False,
        add_generation_prompt=True,
    )
    enc = proc(
        text=[text + '<think>x</think><tool_call>{"name": "mobile_use"}</tool_call>'],
        images=[screen],
        return_tensors="pt",
    ).to(model.device)
    model.eval()
    with torch.no_grad():
        logits = model(**enc).logits  # the eval-mode forward that, unpatched, repacks 4-bit weights
        out = model.generate(**enc, max_new_tokens=3, do_sample=False)
    assert logits.shape[:2] == enc["input_ids"].shape and out.shape[1] == enc["input_ids"].shape[1] + 3

    model.train()
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)
    loss = model(**enc, labels=enc["input_ids"]).loss
    assert math.isfinite(loss.item()) and loss.item() > 0
    loss.backward()
    opt.step()
    # LoRA B starts at zero, so only B gets a gradient on the first step; every B must move
    changed = {n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(p.detach(), trainable[n])}
    lora_b = {n for n in trainable if "lora_B" in n}
    assert len(lora_b) == 7 * models.TINY_SIZES["smoke"]["layers"] and changed == lora_b
    # and inference still works afterwards
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model(**enc).logits).all()
