"""Shipped base agents: stage-0 weights kept in the repository, verified by sha256 before use.

A base agent that costs more compute than a first `make run` should pay is trained once with the
project's own stage-0 command (`inquire base-agent --profile P --rebuild --export`), then exported
here: `assets/base_agents/<name>/` holds the `model.safetensors`, the model's `config.json` (and
generation config) and a `manifest.json` with the weights' sha256 and size, the sha256 of the
tokenizer it was trained with, the command, seed and code version that produced it. `<name>` is
the base agent's cache folder name, `base-agent-<key>`, the key hashing the settings that shape stage 0
(`training.sft.base_agent_dir`). `install` copies a shipped agent into the cache only when every hash
matches; anything else (no manifest, a missing or tampered file, another tokenizer) returns False and
nothing is installed.

Only the results a profile starts from are committed with the code: these base agents and the later stages'
results under `assets/stages/` (`shipped_stages`), about 150 MB in all, each with its weights' sha256 in its
manifest, checked before it is used.

A base agent of a pretrained model (the `small` profile) ships as its LoRA adapter and vision tower
(`adapter_model.safetensors`, within the `MAX_BYTES` a shipped agent may hold) instead of the merged
weights (hundreds of MB): `install` hands the checked adapter to a `merge` callback that writes the full
model, since the language model itself comes from its own installed package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ..runs.integrity import sha256_file, write_marker
from ..runs.paths import REPO_ROOT, atomic_dir

SHIPPED_ROOT = REPO_ROOT / "assets" / "base_agents"
WEIGHTS = "model.safetensors"
CONFIGS = ("config.json", "generation_config.json")
ADAPTER = "adapter"  # the subfolder of a pretrained model's base agent that holds its adapter
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIGS = ("adapter_config.json",)
MAX_BYTES = 25 * 1024 * 1024


def code_version() -> str:
    """The git commit the code runs from ("unknown" outside a checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def export(
    model_dir: str | Path,
    tokenizer_dir: str | Path,
    name: str,
    command: str,
    seed: int,
    root: str | Path | None = None,
    extra: dict | None = None,
) -> dict:
    """Copy a trained base agent's weights and config into `root/name` (default: `SHIPPED_ROOT`)
    with its manifest; returns the manifest."""
    model_dir, out = Path(model_dir), Path(SHIPPED_ROOT if root is None else root) / name
    kind = "adapter" if (model_dir / ADAPTER / ADAPTER_WEIGHTS).exists() else "model"
    source, file, configs = (
        (model_dir / ADAPTER, ADAPTER_WEIGHTS, ADAPTER_CONFIGS) if kind == "adapter" else (model_dir, WEIGHTS, CONFIGS)
    )
    weights = source / file
    size = weights.stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"{weights}: {size} bytes, more than the {MAX_BYTES} a shipped agent may hold")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, out / file)
    for cfg in configs:
        if (source / cfg).exists():
            shutil.copyfile(source / cfg, out / cfg)
    manifest = {
        "name": name,
        "kind": kind,
        "file": file,
        "sha256": sha256_file(out / file),
        "bytes": size,
        "tokenizer_sha256": sha256_file(Path(tokenizer_dir) / "tokenizer.json"),
        "command": command,
        "seed": seed,
        "code_version": code_version(),
        **(extra or {}),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def install(name: str, tokenizer_dir: str | Path, dest: str | Path, root: str | Path | None = None, merge=None) -> bool:
    """Put the shipped agent `name` at `dest` (a model folder `from_pretrained` loads, with its
    completeness marker) when its weights' and tokenizer's hashes match the manifest; False when
    there is none or a hash differs, and `dest` is then left as it was. An adapter (`kind` "adapter")
    needs `merge(adapter_folder, out_folder)`, which writes the full model into `out_folder`."""
    src = Path(SHIPPED_ROOT if root is None else root) / name
    if not (src / "manifest.json").exists():
        return False
    manifest = json.loads((src / "manifest.json").read_text())
    weights = src / manifest["file"]
    if not weights.exists() or sha256_file(weights) != manifest["sha256"]:
        return False
    tokenizer = Path(tokenizer_dir) / "tokenizer.json"
    if not tokenizer.exists() or sha256_file(tokenizer) != manifest["tokenizer_sha256"]:
        return False
    adapter = manifest.get("kind") == "adapter"
    if adapter and merge is None:
        return False
    with atomic_dir(dest) as tmp:
        target = tmp / ADAPTER if adapter else tmp
        target.mkdir(exist_ok=True)
        shutil.copyfile(weights, target / manifest["file"])
        for cfg in ADAPTER_CONFIGS if adapter else CONFIGS:
            if (src / cfg).exists():
                shutil.copyfile(src / cfg, target / cfg)
        if adapter:
            merge(target, tmp)
        (tmp / "inquire_train.json").write_text(json.dumps({"stage": "base_agent", "shipped": manifest}))
        write_marker(tmp)
    return True


class StaleShippedAgent(ValueError):
    """A profile's shipped base agent was made under other settings than the profile's own now."""


def refuse_stale(profile: str, name: str, settings: dict, root: str | Path | None = None) -> None:
    """Raise `StaleShippedAgent` in one line when a base agent is shipped as `profile`'s start under another
    key than `name` (its settings changed since it was shipped: a default was edited); nothing when none is."""
    from ..runs.keys import differences

    for manifest_path in sorted(Path(SHIPPED_ROOT if root is None else root).glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("profile") == profile and manifest.get("name") != name:
            changed = "; ".join(differences(manifest.get("settings", {}), settings)) or "its parent"
            raise StaleShippedAgent(
                f"{manifest_path}: {profile}'s shipped base agent was made under other settings ({changed}), "
                f"so it is not used for {name}; train stage 0 for these with `inquire base-agent --profile "
                f"{profile} --rebuild` (or INQUIRE_REBUILD_BASE_AGENT=1)"
            )


def is_shipped_copy(folder: str | Path) -> bool:
    """Whether a cached base agent was installed from a shipped copy rather than trained here."""
    meta = Path(folder) / "inquire_train.json"
    try:
        return "shipped" in json.loads(meta.read_text())
    except (OSError, ValueError):
        return False
