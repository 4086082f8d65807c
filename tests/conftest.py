"""Every test writes into folders of its own, never into the repository's.

- artifacts, runs and figures: a fresh temporary folder per test;
- cache: one temporary folder per session. Its entries are keyed by what built them (seed, size,
  version), so tests share the tiny models and generated datasets without depending on each
  other, and a test session never reads or fills the repository's `.cache/`.
A module fixture that set up its own folders first (a trained checkpoint shared by a module's
tests) keeps them. Kernels that papermill starts inherit these variables.
"""

from __future__ import annotations

import os

import pytest

from inquire_lib.runs.paths import FOLDERS, RUN_NAME


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def private_folders(tmp_path_factory, session_cache, monkeypatch):
    folders = {"cache": session_cache}
    for folder in ("artifacts", "runs", "figures"):
        folders[folder] = tmp_path_factory.mktemp(folder)
    base = str(tmp_path_factory.getbasetemp())
    for folder, path in folders.items():
        variable = FOLDERS[folder][0]
        if os.environ.get(variable, "").startswith(base):  # set by an enclosing fixture
            folders[folder] = os.environ[variable]
        else:
            monkeypatch.setenv(variable, str(path))
            if folder == "runs":  # a fresh runs folder holds the default run
                monkeypatch.delenv(RUN_NAME[0], raising=False)
    return folders
