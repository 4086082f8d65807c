"""Evaluations read back instead of rerun.

A run evaluates the same checkpoint on the same items more than once (the evaluation notebook re-scores what
02-04 scored; DAgger's round table and stage 3 play the same held-out tasks). An evaluation's
metrics file records a key: a sha256 over what decides its result, namely the model's content (its
weights and configs, `training.models.model_digest`), the items (every step record, screenshot bytes
included, or every task), the profile settings that shape prompts, decoding and episodes
(`EVAL_SETTINGS`) and the source of the code it runs (`eval_modules`). A later evaluation with the same key returns the
stored metrics when its predictions are on disk too; any difference evaluates again and overwrites. The key
names no checkpoint: a step evaluation stored under another name with the same key (an ablation point that is a
recipe stage) gives its answers to be scored under the new name (`same_key`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from ..profiles import Profile, fields_affecting
from .imports import code_modules, module_file, module_names
from .paths import REPO_ROOT
from .records import metrics_file

# fields of the profile that change what an evaluation returns (prompt, image size, decoding, numerics),
# as their metadata says (`profiles.AFFECTS`)
EVAL_SETTINGS = fields_affecting("eval")
# what each kind of evaluation leaves beside its metrics (`evaluation.steps`, `evaluation.episodes`)
OUTPUTS = {"step": "step_predictions.jsonl", "task": "trajectories.jsonl"}
KEY = "eval_key"


# The code an evaluation runs: the step and episode loops, the engine, and the model loading they call, with
# what they import from the world, the agent and the data (`runs.imports.code_modules`). An edit elsewhere (a
# plot, the report, a trainer, the CLI) keeps every stored evaluation.
EVAL_STARTS = (
    "evaluation.steps",
    "evaluation.episodes",
    "evaluation.engine",
    "stages.evaluate",
    "training.models",
    "training.openvino",
)
EVAL_ROOMS = ("world", "agent", "data", "evaluation")
PACKAGE = REPO_ROOT / "inquire_lib"


def eval_modules(package: Path = PACKAGE) -> tuple[str, ...]:
    """The modules whose code decides what an evaluation returns (`EVAL_STARTS`, followed into `EVAL_ROOMS`)."""
    return code_modules(package, EVAL_STARTS, EVAL_ROOMS)


@functools.lru_cache(maxsize=4)
def code_digest(package: Path = PACKAGE) -> str:
    """sha256 over the source of `eval_modules`: a changed prompt, scorer, screen or engine changes every key,
    an edited plot or docstring in `viz` none."""
    return _sources_digest(package, eval_modules(package))


@functools.lru_cache(maxsize=1)
def library_digest() -> str:
    """sha256 over all of the library's source: for results that any stage's code may shape (a sweep point)."""
    modules = module_names(PACKAGE.parent, PACKAGE.name)
    return _sources_digest(PACKAGE, tuple(sorted(modules)))


def _sources_digest(package: Path, modules: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for module in modules:
        h.update(f"{module}\0".encode() + module_file(package, module).read_bytes())
    return h.hexdigest()


def records_digest(records: list[dict]) -> str:
    """sha256 over step records: every field, images by their pixels."""
    h = hashlib.sha256()
    for rec in records:
        plain = {k: v for k, v in rec.items() if not hasattr(v, "tobytes")}
        h.update(json.dumps(plain, sort_keys=True, default=str).encode())
        for k in sorted(set(rec) - set(plain)):
            img = rec[k]
            h.update(f"{k}{img.mode}{img.size}".encode() + img.tobytes())
    return h.hexdigest()


def tasks_digest(tasks) -> str:
    """sha256 over held-out tasks by what names them; their flows follow from these and the code."""
    fields = ("task_id", "app", "subcategory", "template", "instruction", "intent", "slots")
    rows = [{f: getattr(t, f, None) for f in fields} for t in tasks]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def eval_key(kind: str, model_digest: str, items_digest: str, profile: Profile) -> str:
    settings = {k: getattr(profile, k) for k in EVAL_SETTINGS}
    body = {"kind": kind, "model": model_digest, "items": items_digest, "settings": settings, "code": code_digest()}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def read_back(run_dir: str | Path, kind: str, name: str, key: str) -> dict | None:
    """The stored metrics of checkpoint `name` when they carry `key` and their predictions exist."""
    path = metrics_file(run_dir, kind, name)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get(KEY) != key:
        return None
    if not (Path(run_dir) / "eval" / name / OUTPUTS[kind]).is_file():
        return None
    return stored


def same_key(run_dir: str | Path, kind: str, key: str) -> tuple[str | None, dict | None]:
    """(checkpoint name, stored metrics) of another stored evaluation of `kind` that carries `key` and its outputs,
    or (None, None)."""
    for path in sorted((Path(run_dir) / "metrics").glob(f"{kind}_*.json")):
        name = path.stem[len(kind) + 1 :]
        stored = read_back(run_dir, kind, name, key)
        if stored is not None:
            return name, stored
    return None, None
