"""A run that succeeds prints no error-looking line: noise is silenced at its source, and only that noise."""
from __future__ import annotations

import logging

import inquire_lib


def test_the_optional_kernel_notice_of_bitsandbytes_is_dropped_and_nothing_else(caplog):
    log = logging.getLogger("bitsandbytes.backends.cpu.ops")
    with caplog.at_level(logging.WARNING, logger=log.name):
        log.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you already "
                    "`pip install kernels` and the kernels >= 0.11.1", "No module named 'kernels'")
        log.warning("another warning of the same module")
    assert [r.getMessage() for r in caplog.records] == ["another warning of the same module"]
    assert inquire_lib.OPTIONAL_KERNEL_NOTICE == "Failed to load CPU gemm_4bit_forward"
