"""Inquire workbench: train and study mobile GUI agents that ask a human before they act."""

import logging as _logging

__version__ = "0.1.0"

# bitsandbytes, imported on a CPU with AVX-512 BF16, logs a warning when the optional `kernels` package (a
# faster 4-bit CPU matmul fetched from the hub) is missing, and then uses its own kernel. The workbench
# never installs or needs it (4-bit weights run on a CPU only in the smoke profile), so that one message,
# and nothing else the logger says, is dropped at its source.
OPTIONAL_KERNEL_NOTICE = "Failed to load CPU gemm_4bit_forward"


class _DropOptionalKernelNotice(_logging.Filter):
    def filter(self, record: _logging.LogRecord) -> bool:
        return not str(record.msg).startswith(OPTIONAL_KERNEL_NOTICE)


_logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_DropOptionalKernelNotice())
