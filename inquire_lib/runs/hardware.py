"""What the machine offers a run, decided once for training and for the manifest that records it."""
from __future__ import annotations

from pathlib import Path

from ..profiles import Profile


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 natively (AVX-512 BF16 or AMX), as /proc/cpuinfo says."""
    try:
        flags = next((line for line in Path(cpuinfo).read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def uses_bf16(profile: Profile, cuda: bool | None = None, native_bf16: bool | None = None) -> bool:
    """Whether training autocasts to bf16: always with `bf16` on a GPU; on CPU with `cpu_bf16`, full
    weights (bitsandbytes' CPU 4-bit kernels are fp32) and a CPU with native bf16. `cuda` and
    `native_bf16` default to what this machine has."""
    if cuda is None:
        import torch
        cuda = torch.cuda.is_available()
    if cuda:
        return profile.bf16
    if not profile.cpu_bf16 or profile.load_in_4bit:
        return False
    return cpu_has_native_bf16() if native_bf16 is None else native_bf16
