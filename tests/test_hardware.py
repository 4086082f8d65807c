"""The machine kind a result is reported per, and the dtype evaluation runs in on it."""

from __future__ import annotations

import pytest

from inquire_lib.profiles import get_profile
from inquire_lib.runs.hardware import cpu_flags, cpu_kind, eval_uses_bf16

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_vnni\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\nprocessor\t: 1\n"
AMX = "flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"


@pytest.mark.parametrize(
    "text, kind",
    [
        (AVX2, "avx2"),
        (AVX512, "avx512"),
        (AVX512_BF16, "avx512_bf16"),
        (AMX, "amx"),
        ("flags\t\t: fpu sse2\n", "other"),
    ],
)
def test_the_cpu_kind_is_read_off_the_flags(tmp_path, text, kind):
    info = tmp_path / "cpuinfo"
    info.write_text(text)
    assert cpu_kind(info) == kind


def test_flags_are_the_words_after_the_colon(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(AVX512_BF16)
    assert cpu_flags(info) == {"fpu", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"}
    assert cpu_flags(tmp_path / "missing") == set() and cpu_kind(tmp_path / "missing") == "other"


def test_evaluation_runs_in_bf16_only_where_the_cpu_has_it_and_the_profile_asks():
    small, cpu = get_profile("small"), get_profile("cpu")
    assert small.eval_bf16 and not cpu.eval_bf16
    assert eval_uses_bf16(small, cuda=False, native_bf16=True)
    assert not eval_uses_bf16(small, cuda=False, native_bf16=False)  # AVX2 emulates bf16: ~90x slower
    assert not eval_uses_bf16(cpu, cuda=False, native_bf16=True)  # the cpu profile's results stay fp32
    assert not eval_uses_bf16(small.replace(load_in_4bit=True), cuda=False, native_bf16=True)
    assert eval_uses_bf16(get_profile("gpu"), cuda=True) and not eval_uses_bf16(small, cuda=True)


def test_a_model_for_inference_is_merged_and_bf16_where_evaluation_runs_in_bf16(monkeypatch):
    import torch
    from peft import LoraConfig, get_peft_model

    from inquire_lib.runs import hardware
    from inquire_lib.training import models

    smoke = get_profile("smoke").replace(load_in_4bit=False)
    model, _ = models.load_model_and_processor(smoke)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"]))
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda *a: True)
    kept = models.for_inference(peft, smoke)
    assert kept is peft  # eval_bf16 off: as loaded
    fast = models.for_inference(peft, smoke.replace(eval_bf16=True))
    assert not hasattr(fast, "peft_config") and type(fast).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert {p.dtype for p in fast.parameters()} == {torch.bfloat16}
    assert fast.config._attn_implementation == "eager"
