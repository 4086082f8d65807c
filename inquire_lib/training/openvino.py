"""The OpenVINO export of a checkpoint (`eval_engine openvino`, `evaluation.engine`), cached by content.

The export is optimum-intel's own (`optimum-cli export openvino --task image-text-to-text`, fp32 weights):
no conversion is written here. optimum-intel 2.2.0 exports Qwen2.5-VL only beside transformers < 5, and the
workbench runs transformers 5, so the exporter runs as a command from its own environment (`.venv-export`,
pinned by `configs/openvino/export-requirements.txt`, installed by `make install`). The checkpoint is
handed to it as a scratch copy that transformers 4.57 reads (`_for_transformers_4`); the copy is removed.

Cached complete-or-absent: the export is written to a temp folder beside its place, its record
(`inquire_openvino.json`) and completeness marker (`runs.integrity`, every file's sha256, the key) last,
then renamed into place. The key (`export_key`) is a sha256 over what the export is made of: the
checkpoint's weights and configs (`training.models.model_digest`, an adapter's with its base's), the
processor's tokenizer and image files, the profile's image size, the weight format and the exporter's
pins. The folder is named by the key, and opening it checks the marker's key again
(`evaluation.engine.export_problem`), so an export of a checkpoint that changed is never used: a new one
is made, and a folder given by hand that does not match is refused with one line naming its marker.
"""

from __future__ import annotations

import gc
import importlib.util
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from ..evaluation.engine import SOURCE_KEY, ExportError, export_problem, open_engine
from ..profiles import EvalSettings, Named, Profile
from ..runs.integrity import content_digest, write_marker
from ..runs.paths import REPO_ROOT, atomic_dir, cache_dir
from .models import Loaded, load_checkpoint, load_processor, model_digest, model_path

EXPORTER = REPO_ROOT / ".venv-export"
REQUIREMENTS = REPO_ROOT / "configs" / "openvino" / "export-requirements.txt"
WEIGHT_FORMAT = "fp32"
RECORD = "inquire_openvino.json"
# the processor's files (the base model's: `training.models.load_processor`) that shape prompts and images
PROCESSOR_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
)


def optimum_cli() -> Path:
    return Path(os.environ.get("INQUIRE_EXPORT_VENV", EXPORTER)) / "bin" / "optimum-cli"


def export_key(profile: Profile, path: str | None, base: str | None = None) -> str:
    """sha256 over what the export of the checkpoint at `path` (None: the profile's base model; `base`: the model
    under an adapter whose folder does not name it, `training.models.base_of`) is made of."""
    processor_base = Path(model_path(profile))
    body = {
        "model": model_digest(path, profile, base),
        "processor": (
            content_digest(processor_base, set(PROCESSOR_FILES)) if processor_base.is_dir() else f"id:{processor_base}"
        ),
        "pixels": [profile.min_pixels, profile.max_pixels],
        "weight_format": WEIGHT_FORMAT,
        "exporter": hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def export_dir(profile: Named, key: str) -> Path:
    return cache_dir() / "openvino" / f"{profile.name}-{key[:16]}"


def export_openvino(
    profile: Profile,
    path: str | None = None,
    out: str | Path | None = None,
    rebuild: bool = False,
    base: str | None = None,
) -> dict:
    """The export of the checkpoint at `path` (None: the base model; `base` as in `export_key`) in `out` (default:
    its cache folder): reused when complete and made from this very checkpoint, else (or with `rebuild`) made
    again. Returns {"folder", "key", "built", "seconds", "bytes"}."""
    key = export_key(profile, path, base)
    folder = Path(out) if out is not None else export_dir(profile, key)
    problem = None if rebuild else export_problem(folder, key)
    if not rebuild and problem is None:
        return {"folder": str(folder), "key": key, "built": False, "seconds": 0.0, "bytes": _size(folder)}
    if folder.exists() and problem is not None:
        print(f"re-exporting: {problem}", file=sys.stderr)
    cli = optimum_cli()
    if not cli.is_file():
        raise ExportError(f"{cli}: missing; `make install` installs the exporter's environment (.venv-export)")
    start = time.time()
    with atomic_dir(folder) as tmp, tempfile.TemporaryDirectory(prefix=".source.", dir=folder.parent) as src:
        _source_copy(profile, path, Path(src), base)
        _run_exporter(cli, Path(src), tmp, folder.parent / f"{folder.name}.export.log")
        seconds = round(time.time() - start, 1)
        record = {SOURCE_KEY: key, "checkpoint": str(path) if path else model_path(profile), "seconds": seconds}
        record |= {"weight_format": WEIGHT_FORMAT, "exporter": _pins()}
        (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        write_marker(tmp, **{SOURCE_KEY: key})
    return {"folder": str(folder), "key": key, "built": True, "seconds": seconds, "bytes": _size(folder)}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _pins() -> list[str]:
    return [line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]


def _source_copy(profile: Profile, path: str | None, src: Path, base: str | None = None) -> None:
    """The checkpoint as one full fp32 model folder (an adapter merged into its base) with the processor the
    workbench evaluates with (the base model's, at the profile's image size), in `src`."""
    # full weights whatever the profile trains in: a 4-bit load would save its quantisation config, which the
    # exporter would try to honour (and the engine's weights are fp32 by design)
    model, processor = load_checkpoint(profile.replace(load_in_4bit=False), path, base=base)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(src)
    processor.save_pretrained(src)
    model = processor = None
    gc.collect()
    _for_transformers_4(src)


def _for_transformers_4(src: Path) -> None:
    """Rewrite the files transformers 5 saved the way transformers 4.57 (the exporter's) reads them; the
    weights are not touched."""
    config = json.loads((src / "config.json").read_text())
    for sub in ("text_config", "vision_config"):
        part = config.get(sub) or {}
        rope = part.pop("rope_parameters", None)
        # transformers 5 folds rope_theta and rope_scaling into rope_parameters; 4.57 reads them apart and, for
        # Qwen2.5-VL's text, finds the multimodal rope's sections (temporal, height, width) in rope_scaling
        # {"type": "mrope"}. The vision tower's rope is fixed in 4.57's code, so its entry is just dropped.
        if sub == "text_config" and rope is not None:
            part["rope_theta"] = rope["rope_theta"]
            if "mrope_section" in rope:
                part["rope_scaling"] = {"type": "mrope", "mrope_section": rope["mrope_section"]}
    config.setdefault("torch_dtype", config.get("dtype", "float32"))  # 4.57 still reads the older name
    (src / "config.json").write_text(json.dumps(config, indent=1))
    tok_path = src / "tokenizer_config.json"
    tok = json.loads(tok_path.read_text())
    # transformers 5 names its tokenizers.json-backed class TokenizersBackend, which 4.57 does not have; the
    # fast tokenizer over the same tokenizer.json is what 4.57 loads. Its extra special tokens are a list in
    # 5 and a dict of named tokens in 4.57, where the list's meaning is additional_special_tokens.
    if tok.get("tokenizer_class") == "TokenizersBackend":
        tok["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = tok.pop("extra_special_tokens", None)
    if isinstance(extra, list):
        tok["additional_special_tokens"] = extra
    elif extra is not None:
        tok["extra_special_tokens"] = extra
    tok_path.write_text(json.dumps(tok, indent=1))
    _preprocessor_config(src)


def _preprocessor_config(src: Path) -> None:
    """transformers 5 saves the image processor inside processor_config.json; 4.57 (and GenAI, which reads
    the export's copy) look for preprocessor_config.json, with the image size as min/max pixels."""
    proc = src / "processor_config.json"
    if (src / "preprocessor_config.json").exists() or not proc.exists():
        return
    image = dict(json.loads(proc.read_text()).get("image_processor") or {})
    size = image.get("size") or {}
    if "shortest_edge" in size:
        image["min_pixels"], image["max_pixels"] = size["shortest_edge"], size["longest_edge"]
    image.setdefault("processor_class", "Qwen2_5_VLProcessor")
    (src / "preprocessor_config.json").write_text(json.dumps(image, indent=1))


def _run_exporter(cli: Path, src: Path, out: Path, log: Path) -> None:
    """The exporter as a command; its output goes to `log`, which a failure's one line names."""
    cmd = [str(cli), "export", "openvino", "--model", str(src), "--task", "image-text-to-text"]
    cmd += ["--weight-format", WEIGHT_FORMAT, str(out)]
    # the exporter reads only the local copy (no hub), and an emptied PYTHONPATH keeps the workbench's own
    # transformers 5 from shadowing the exporter's 4.57
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log.write_text(f"$ {' '.join(cmd)}\n{done.stdout}\n{done.stderr}", encoding="utf-8")
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()] or [f"exit code {done.returncode}"]
        last = re.sub(r"\s+", " ", lines[-1])
        raise ExportError(f"{log}: the export failed: {last}")


@contextmanager
def engine_loaded(profile: Profile, path: str | None, base: str | None = None):
    """`with engine_loaded(profile, path) as m:` the OpenVINO engine over the export of the checkpoint at `path`
    (made when absent or stale; `base` as in `export_key`) as `m.model`, with the HF processor that builds the
    prompts as `m.processor`."""
    export = export_openvino(profile, path, base=base)
    processor = load_processor(model_path(profile), profile)
    engine = open_engine(
        export["folder"],
        export["key"],
        processor.tokenizer.eos_token_id,
        profile.torch_threads,
        engine_precision(profile),
    )
    held = Loaded(engine, processor)
    try:
        yield held
    finally:
        held.model = held.processor = None
        gc.collect()


def engine_precision(profile: EvalSettings) -> str:
    """What the engine computes in: bf16 where the HF path does (`runs.hardware.eval_uses_bf16`: `eval_bf16` on a
    CPU with native bf16), else f32, so that both engines answer from the same numerics on every CPU kind."""
    from ..runs.hardware import eval_uses_bf16

    return "bf16" if eval_uses_bf16(profile) else "f32"


def engine_of(profile: EvalSettings, ask_bias: float = 0.0) -> str:
    """The engine an evaluation plays a checkpoint on: the profile's `eval_engine`, but HF for a checkpoint
    with an ask bias (the bias is a logits processor, which the engine has not)."""
    return "hf" if ask_bias else profile.eval_engine


def engine_missing(profile: EvalSettings) -> str | None:
    """One line saying what the profile's evaluation engine lacks on this machine (None when nothing): checked by
    `inquire run` before any notebook starts, so a run never stops at its first evaluation for an install."""
    if profile.eval_engine != "openvino":
        return None
    cli = optimum_cli()
    if not cli.is_file():
        return f"eval_engine openvino needs the exporter's environment, and {cli} is missing: run `make install`"
    if importlib.util.find_spec("openvino_genai") is None:
        return "eval_engine openvino needs openvino-genai, which is not installed: run `make install`"
    return None
