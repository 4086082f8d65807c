"""Helpers shared by the benchmarks (not a benchmark itself: `make bench` skips `_*.py`).

Every result file is stamped with the run manifest (git sha and dirty flag, profile name and full
settings, package versions, time) and written atomically; a bare-TRL baseline loads its model and
builds its trainer config with the library's own builders, so "ours vs bare" differs only in the
wrapper being measured.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere, installed or not
    sys.path.insert(0, str(ROOT))

from inquire_lib.runs.notebooks import run_manifest  # noqa: E402
from inquire_lib.runs.paths import FOLDERS, write_json_atomic  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def trainer_parser(doc: str, steps: int, repeats: int, out: Path):
    """The command line the trainer benchmarks share: profile, steps, interleaved repeats, threads, out."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--repeats", type=int, default=repeats, help="ours/bare pairs, interleaved")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 leaves a core to others)")
    ap.add_argument("--out", default=str(out))
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a profile field (repeatable), as `inquire run --set`",
    )
    return ap


def bench_profile(name: str, overrides=(), threads: int = 1):
    """The profile a trainer benchmark measures: `name` with `--set` overrides applied and recorded, and
    `threads` torch threads."""
    from inquire_lib.profiles import apply_overrides, get_profile, parse_overrides

    return apply_overrides(get_profile(name), parse_overrides(overrides)).replace(torch_threads=threads)


def finish(result: dict, profile, out: Path | None) -> dict:
    """Stamp the result (`stamped`) and write it to `out` unless None."""
    result = stamped(result, profile)
    write_result(out, result)
    return result


def stamped(result: dict, profile) -> dict:
    """`result` with the manifest of the code and settings it measured, and the machine."""
    return {**result, "machine": machine(), "manifest": run_manifest(profile)}


def write_result(path: Path | None, result: dict) -> None:
    if path is not None:
        write_json_atomic(path, result)


def machine() -> dict:
    out = {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count()}
    if "torch" in sys.modules:
        import torch

        out.update(cuda=torch.cuda.is_available(), torch=torch.__version__)
    return out


@contextlib.contextmanager
def private_artifacts(prefix: str):
    """Checkpoints of a benchmark go to a temporary artifacts folder (yielded) and its tracker logs to
    a temporary runs folder, both removed afterwards: a benchmark never writes into the user's runs."""
    folders = {
        "artifacts": Path(tempfile.mkdtemp(prefix=prefix)),
        "runs": Path(tempfile.mkdtemp(prefix=prefix + "runs-")),
    }
    old = {FOLDERS[k][0]: os.environ.get(FOLDERS[k][0]) for k in folders}
    for key, folder in folders.items():
        os.environ[FOLDERS[key][0]] = str(folder)
    os.environ.setdefault("CI", "1")  # no progress bars in either trainer
    try:
        yield folders["artifacts"]
    finally:
        for variable, value in old.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)


def bare_model(profile, start: str, base: str | None = None):
    """A model as plain transformers/PEFT load it (no library loader): `start` itself, or `base`
    with the adapter `start` on top; the processor of the profile's base model."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from inquire_lib.training.configs import quantization_config
    from inquire_lib.training.models import model_path

    kwargs = {"dtype": torch.float32}
    if profile.load_in_4bit:
        kwargs["quantization_config"] = quantization_config(profile)
    if torch.cuda.is_available():
        kwargs["device_map"] = {"": 0}
    adapter = (Path(start) / "adapter_config.json").exists()
    model = AutoModelForImageTextToText.from_pretrained(base if adapter else start, **kwargs)
    if adapter:
        model = PeftModel.from_pretrained(model, start, is_trainable=True)
    processor = AutoProcessor.from_pretrained(model_path(profile))
    return model, processor, adapter


def step_timer():
    """A TrainerCallback that records the wall time of every optimizer step."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self._t0 = None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self._t0)

    return StepTimer()


def train_runtime(log_history: list[dict]) -> float:
    """The trainer's own train_runtime (seconds), from its final log entry."""
    for entry in reversed(log_history):
        if "train_runtime" in entry:
            return float(entry["train_runtime"])
    raise KeyError("train_runtime missing from the trainer's log history")
