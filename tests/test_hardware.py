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
    monkeypatch.setattr(hardware, "bf16_pays", lambda *a: False)
    kept = models.for_inference(peft, smoke)
    assert kept is peft  # eval_bf16 off: as loaded
    # fast evaluation where bf16 does not pay: merged, fp32
    merged = models.for_inference(peft, smoke.replace(eval_bf16=True))
    assert not hasattr(merged, "peft_config") and type(merged).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert {p.dtype for p in merged.parameters()} == {torch.float32}
    monkeypatch.setattr(hardware, "bf16_pays", lambda *a: True)
    model, _ = models.load_model_and_processor(smoke)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"]))
    fast = models.for_inference(peft, smoke.replace(eval_bf16=True))
    assert not hasattr(fast, "peft_config") and type(fast).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert {p.dtype for p in fast.parameters()} == {torch.bfloat16}
    assert fast.config._attn_implementation == "eager"


def test_bf16_is_used_only_where_the_flags_allow_it_and_it_measures_faster(monkeypatch, tmp_path):
    from inquire_lib.runs import hardware

    info = tmp_path / "cpuinfo"
    info.write_text(AVX2)

    def never(*a):
        raise AssertionError("a CPU without native bf16 is not probed")

    monkeypatch.setattr(hardware, "bf16_probe", never)
    assert not hardware.bf16_pays(info)
    info.write_text(AVX512_BF16)
    for speedup, pays in ((0.56, False), (1.2, False), (2.4, True)):
        probe = {
            "fp32_ms": 1.0,
            "bf16_ms": 1.0 / speedup,
            "speedup": speedup,
            "pays": speedup >= hardware.BF16_MIN_SPEEDUP,
        }
        monkeypatch.setattr(hardware, "bf16_probe", lambda: probe)
        assert hardware.bf16_pays(info) is pays, speedup


def test_the_probe_times_both_dtypes_on_this_machine():
    from inquire_lib.runs.hardware import BF16_MIN_SPEEDUP, bf16_probe

    probe = bf16_probe()
    assert probe["fp32_ms"] > 0 and probe["bf16_ms"] > 0
    assert probe["speedup"] == pytest.approx(probe["fp32_ms"] / probe["bf16_ms"], rel=1e-2)
    assert probe["pays"] == (probe["speedup"] >= BF16_MIN_SPEEDUP)


def test_every_metrics_file_names_the_kind_and_its_kernel_flags(tmp_path):
    from inquire_lib.runs.hardware import device_stamp

    info = tmp_path / "cpuinfo"
    info.write_text(AVX512_BF16)
    assert device_stamp(info) == {
        "cpu_kind": "avx512_bf16",
        "cpu_model": "unknown",
        "cpu_flags": ["avx2", "avx512_bf16", "avx512f"],
    }
    info.write_text("model name\t: AMD EPYC 9R14 96-Core Processor\n" + AVX512_BF16)
    assert device_stamp(info)["cpu_model"] == "AMD EPYC 9R14 96-Core Processor"
