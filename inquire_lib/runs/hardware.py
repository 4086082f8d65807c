"""What the machine offers a run, decided once for training and for the manifest that records it."""

from __future__ import annotations

from pathlib import Path

from ..profiles import Profile


# the CPU flags that change which kernels torch runs, and so what a run trains: the same code and seed
# give other starts with and without AVX-512 (docs/log.md)
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


def cpu_kind(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The machine kind results are reported per: "amx", "avx512_bf16", "avx512", "avx2" or "other"."""
    flags = cpu_flags(cpuinfo)
    for kind, needs in (("amx", "amx_bf16"), ("avx512_bf16", "avx512_bf16"), ("avx512", "avx512f"), ("avx2", "avx2")):
        if needs in flags:
            return kind
    return "other"


def _bf16_here(profile: Profile, on_cpu: bool, cuda: bool | None, native_bf16: bool | None) -> bool:
    """`bf16` on a GPU; on CPU `on_cpu` (the profile's switch), full weights (bitsandbytes' CPU 4-bit
    kernels are fp32) and native bf16 matmuls. `cuda` and `native_bf16` default to this machine's."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if cuda:
        return profile.bf16
    if not on_cpu or profile.load_in_4bit:
        return False
    return cpu_has_native_bf16() if native_bf16 is None else native_bf16


def uses_bf16(profile: Profile, cuda: bool | None = None, native_bf16: bool | None = None) -> bool:
    """Whether training autocasts to bf16 (`cpu_bf16` on a CPU; see `_bf16_here`)."""
    return _bf16_here(profile, profile.cpu_bf16, cuda, native_bf16)


def eval_uses_bf16(profile: Profile, cuda: bool | None = None, native_bf16: bool | None = None) -> bool:
    """Whether evaluation loads the model in bf16 (`eval_bf16` on a CPU; see `_bf16_here`)."""
    return _bf16_here(profile, profile.eval_bf16, cuda, native_bf16)
