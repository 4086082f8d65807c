"""The system Chromium the browser tests drive, and the flags that keep it off the network (this
machine's closed network refuses its background connections, many at a time)."""

from __future__ import annotations

import os
import shutil

import pytest

OFFLINE_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium(test: str) -> str:
    """Its path; a missing one fails `test` with one line saying how to install it."""
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if path is None:
        pytest.fail(
            f"Chromium is required for the {test} and was not found: "
            "install it with `apt-get install -y chromium` (CI does this in .ci/run)."
        )
    return path
