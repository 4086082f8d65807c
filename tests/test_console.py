"""A run that succeeds prints no error-looking line: noise is silenced at its source, and only that noise."""

from __future__ import annotations

import logging

import inquire_lib


def test_the_optional_kernel_notice_of_bitsandbytes_is_dropped_and_nothing_else(caplog):
    log = logging.getLogger("bitsandbytes.backends.cpu.ops")
    with caplog.at_level(logging.WARNING, logger=log.name):
        log.warning(
            "Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you already "
            "`pip install kernels` and the kernels >= 0.11.1",
            "No module named 'kernels'",
        )
        log.warning("another warning of the same module")
    assert [r.getMessage() for r in caplog.records] == ["another warning of the same module"]
    assert inquire_lib.OPTIONAL_KERNEL_NOTICE == "Failed to load CPU gemm_4bit_forward"


def test_a_finished_kernel_is_shut_down_without_sigint(tmp_path):
    """papermill's kernels are asked to stop, not interrupted first: a SIGINT at shutdown is what ipykernel
    logs as "KeyboardInterrupt caught in kernel" when it lands inside a handler. The kernel below installs
    a SIGINT handler after its cell has finished (so it is live while the kernel idles) that writes a file."""
    import asyncio

    from inquire_lib.runs.notebooks import _ipc_kernel_manager

    marker = tmp_path / "interrupted"
    code = (
        "import asyncio, signal\n"
        f"handler = lambda *a: open({str(marker)!r}, 'w').write('SIGINT')\n"
        "asyncio.get_event_loop().call_later(0.2, lambda: signal.signal(signal.SIGINT, handler))\n"
    )

    async def run() -> None:
        km = _ipc_kernel_manager()(kernel_name="python3")
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            reply = await kc.execute_interactive(code, timeout=60)
            assert reply["content"]["status"] == "ok"
            await asyncio.sleep(1.0)  # the handler is installed
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=False)
        assert not await km.is_alive()

    asyncio.run(run())
    assert not marker.exists()
