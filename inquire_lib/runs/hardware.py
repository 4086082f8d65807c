"""What the machine offers a run, decided once for training and for the manifest that records it."""

from __future__ import annotations

import functools
import time
from pathlib import Path

from ..profiles import EvalSettings, ModelSettings


# the CPU flags that change which kernels torch runs, and so what a run trains: the same code and seed
# give other starts with and without AVX-512 (docs/lab/log.md)
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str]:
    """The flags of the first CPU in /proc/cpuinfo (none when it cannot be read)."""
    try:
        flags = next((line for line in Path(cpuinfo).read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return set()
    return set(flags.partition(":")[2].split())


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 natively (AVX-512 BF16 or AMX), as /proc/cpuinfo says."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags(cpuinfo))


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name as /proc/cpuinfo gives it ("unknown" when it cannot be read)."""
    try:
        line = next((x for x in Path(cpuinfo).read_text().splitlines() if x.startswith("model name")), "")
    except OSError:
        return "unknown"
    return line.partition(":")[2].strip() or "unknown"


# bf16 is used only where a bf16 matmul beats fp32's by this factor. The flag alone does not decide: on an
# AMD EPYC with AVX-512 BF16 a bf16 matmul of the small model's shapes ran ~2.4x fp32, on an Intel Xeon
# with the same flag 0.55x (docs/lab/log.md), and autocast adds a cast of every weight on top
BF16_MIN_SPEEDUP = 1.25


@functools.lru_cache(maxsize=None)
def bf16_probe() -> dict:
    """Time a [512 x 576] @ [576 x 1536] matmul (a prefill chunk through the small model's MLP) in fp32
    and in bf16 on this machine, best of interleaved repeats (about 0.3 s), once a process: the ratio and
    whether bf16 pays (`BF16_MIN_SPEEDUP`)."""
    import torch

    a, b = torch.randn(512, 576), torch.randn(576, 1536)
    pair = {"fp32": (a, b), "bf16": (a.bfloat16(), b.bfloat16())}
    best = {"fp32": float("inf"), "bf16": float("inf")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ratio, not the speed, is wanted: one thread keeps it from the other jobs
    try:
        for _ in range(5):
            for name, (a, b) in pair.items():
                t0 = time.perf_counter()
                a @ b
                best[name] = min(best[name], time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    # four significant figures, not decimals: where bf16 is emulated (AVX2) the ratio is ~0.02, and three
    # decimals would move it by more than 1% from the times it is the ratio of. `pays` reads the recorded
    # speedup, so a record never says a ratio at the bound pays where its own number says it does not
    speedup = _significant(best["fp32"] / best["bf16"])
    return {
        "fp32_ms": _significant(1e3 * best["fp32"]),
        "bf16_ms": _significant(1e3 * best["bf16"]),
        "speedup": speedup,
        "pays": speedup >= BF16_MIN_SPEEDUP,
    }


def _significant(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def bf16_pays(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 natively (`cpu_has_native_bf16`) and a bf16 matmul measures faster
    than fp32's here (`bf16_probe`); a CPU without the flags is not probed."""
    return cpu_has_native_bf16(cpuinfo) and bf16_probe()["pays"]


def cpu_kind(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The machine kind results are reported per: "amx", "avx512_bf16", "avx512", "avx2" or "other"."""
    return _kind_of(cpu_flags(cpuinfo))


def _kind_of(flags: set[str]) -> str:
    for kind, needs in (("amx", "amx_bf16"), ("avx512_bf16", "avx512_bf16"), ("avx512", "avx512f"), ("avx2", "avx2")):
        if needs in flags:
            return kind
    return "other"


def device_stamp(cpuinfo: str | Path = "/proc/cpuinfo") -> dict:
    """What every metrics file and the manifest name about the machine that computed them: the CPU kind,
    its model and the kernel flags it has (results are reported per kind)."""
    flags = cpu_flags(cpuinfo)
    return {
        "cpu_kind": _kind_of(flags),
        "cpu_model": cpu_model(cpuinfo),
        "cpu_flags": sorted(set(KERNEL_FLAGS) & flags),
    }


def _bf16_here(profile: ModelSettings, on_cpu: bool, cuda: bool | None, native_bf16: bool | None) -> bool:
    """`bf16` on a GPU; on CPU `on_cpu` (the profile's switch), full weights (bitsandbytes' CPU 4-bit
    kernels are fp32) and bf16 matmuls that are native and pay (`bf16_pays`). `cuda` and `native_bf16` default
    to this machine's."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if cuda:
        return profile.bf16
    if not on_cpu or profile.load_in_4bit:
        return False
    return bf16_pays() if native_bf16 is None else native_bf16


def uses_bf16(profile: ModelSettings, cuda: bool | None = None, native_bf16: bool | None = None) -> bool:
    """Whether training autocasts to bf16 (`cpu_bf16` on a CPU; see `_bf16_here`)."""
    return _bf16_here(profile, profile.cpu_bf16, cuda, native_bf16)


def eval_uses_bf16(profile: EvalSettings, cuda: bool | None = None, native_bf16: bool | None = None) -> bool:
    """Whether evaluation loads the model in bf16 (`eval_bf16` on a CPU; see `_bf16_here`)."""
    return _bf16_here(profile, profile.eval_bf16, cuda, native_bf16)
