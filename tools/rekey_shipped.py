"""Rename shipped results to the content keys today's settings give them, after fields were removed or added.

A content key hashes every field that shapes a result, so removing a field renames every key, and the shipped
base agents and stage results would be refused as stale. A removed field shaped nothing when its recorded value
is the one the code now always behaves as (`REMOVED`); an added field shaped nothing new when its value is the one
the code behaved as before it existed (`ADDED`). For each shipped manifest this drops the removed fields, gives the
added ones its key reads that value, refuses in one line when a removed one was recorded at another value, recomputes the key under the renamed parent, checks
that today's code computes the same settings and key for the manifest's own command, and moves the folder (the
manifest last, so an interrupted run leaves the old folder whole). Each manifest keeps `rekeyed_from`.

    python tools/rekey_shipped.py            # say what would move
    python tools/rekey_shipped.py --apply    # move it
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from inquire_lib.cli import _parser
from inquire_lib.profiles import apply_overrides, parse_overrides
from inquire_lib.runs.keys import differences, settings_key
from inquire_lib.training import shipped, shipped_stages
from inquire_lib.training.sft import base_agent_key, base_agent_settings

# removed field -> the value the code kept; None: inert at the other removed fields' values (a copy warm-up's
# sizes when it runs no steps). The lab log (docs/lab/log.md, 2026-12-02, "Pruned") says why each went.
REMOVED = {
    "task_last": False,
    "tokenizer_spaces": "attached",
    "copy_warmup_steps": 0,
    "copy_mix_share": 0.0,
    "copy_warmup_gap": None,
    "copy_warmup_lr": None,
    "copy_warmup_easy_steps": None,
    "copy_warmup_easy_vocab": None,
    "copy_warmup_easy_gap": None,
    "grpo_mistake_share": 0.0,
    "grpo_mistake_tasks": None,
    "grpo_mistake_outcomes": None,
    "dagger_repeat_cap": 0,
    # the hand-bumped data version: the data caches are now named by the generator's code (`generator_key`)
    "data_version": 2,
}


# added field -> the value the code behaved as before the field existed: a result made before it was made at that
# value, so its manifest gets it (a field set by a recipe to another value gives another key, as it should)
ADDED: dict = {"task_rollout": "conversation", "task_start_shares": {"start": 1.0}}


STAGE_ORDER = {"sft": 0, "grpo": 1, "task_grpo": 2}


class RekeyError(ValueError):
    """A shipped result that cannot be renamed: it was shaped by a removed field, or today's code disagrees."""


def pruned(settings: dict, where: Path, read) -> dict:
    """`settings` without the removed fields, each checked to hold the value the code kept, and with the added
    fields among `read` (the fields today's key reads) at the value the code behaved as before them."""
    for field, kept in REMOVED.items():
        if field in settings and kept is not None and settings[field] != kept:
            raise RekeyError(f"{where}: {field}={settings[field]!r} shaped it; the code now always runs {kept!r}")
    added = {k: v for k, v in ADDED.items() if k in read and k not in settings}
    return {**{k: v for k, v in settings.items() if k not in REMOVED}, **added}


def profile_of(manifest: dict):
    """The profile the manifest's own command resolves to, read by the `inquire` command's own parser."""
    args = _parser().parse_args(shlex.split(manifest["command"])[1:])
    return apply_overrides(args.profile, parse_overrides(args.set))


def plan_base_agent(manifest: dict, where: Path, renamed: dict[str, str]) -> tuple[str, dict]:
    """The new key and manifest of a shipped base agent. Its key is computed with the profile's own stage-0
    settings (`training.sft.base_agent_settings`), whatever overrides its command used to make it."""
    profile = apply_overrides(manifest["profile"], {})
    today = base_agent_settings(profile)
    settings = pruned(manifest["settings"], where, today)
    if differences(settings, today):
        raise RekeyError(f"{where}: today's settings differ: {'; '.join(differences(settings, today))}")
    parent = renamed.get(profile.base_agent_init, profile.base_agent_init)
    key = settings_key(settings, parent)
    if key != base_agent_key(profile):
        raise RekeyError(f"{where}: key {key} but today's code computes {base_agent_key(profile)}")
    return key, {**manifest, "name": f"base-agent-{key}", "key": key, "settings": settings}


def plan_stage(manifest: dict, where: Path, renamed_keys: dict[str, str]) -> tuple[str, dict]:
    """The new key and manifest of a shipped stage result, under its renamed parent. Fields its key no longer
    reads (`shipped_stages.stage_fields`, e.g. the test split's size) are dropped whatever their value."""
    read = {"stage", "steps", "inquiry_share", *shipped_stages.stage_fields(manifest["stage"])}
    settings = {k: v for k, v in pruned(manifest["settings"], where, read).items() if k in read}
    profile = shipped_stages.seeded(profile_of(manifest), manifest["stage"])
    today = shipped_stages.stage_settings(profile, manifest["stage"], settings["steps"], settings["inquiry_share"])
    if differences(settings, today):
        raise RekeyError(f"{where}: today's settings differ: {'; '.join(differences(settings, today))}")
    parent = renamed_keys.get(manifest["parent"], manifest["parent"])
    key = shipped_stages.stage_key(settings, parent)
    name = shipped_stages.folder_of(manifest["stage"], key).name
    return key, {**manifest, "name": name, "key": key, "parent": parent, "settings": settings}


def move(old: Path, new: Path, manifest: dict, apply: bool) -> None:
    print(f"{old.parent.name}/{old.name} -> {new.name}")
    if not apply or old == new:
        return
    new.mkdir()
    for f in old.iterdir():
        if f.name != "manifest.json":
            f.rename(new / f.name)
    (new / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (old / "manifest.json").unlink()
    old.rmdir()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apply", action="store_true", help="move the folders (default: print what would move)")
    args = ap.parse_args(argv)
    renamed, renamed_keys, moves = {}, {}, []
    # a result shipped under a parent's key before that parent was renamed finds it by the name it had
    for path in [*shipped.SHIPPED_ROOT.glob("*/manifest.json"), *shipped_stages.STAGES_ROOT.glob("*/manifest.json")]:
        manifest = json.loads(path.read_text())
        if "rekeyed_from" in manifest:
            renamed_keys[manifest["rekeyed_from"]] = manifest["key"]
    try:
        for path in sorted(shipped.SHIPPED_ROOT.glob("*/manifest.json")):
            manifest = json.loads(path.read_text())
            key, new = plan_base_agent(manifest, path, renamed)
            if key != manifest["key"]:
                new["rekeyed_from"] = manifest["key"]
                renamed[manifest["name"]], renamed_keys[manifest["key"]] = new["name"], key
                moves.append((path.parent, path.parent.with_name(new["name"]), new))
        # stage 1 before 2 before 3: a later stage's parent is an earlier stage's key
        for path, manifest in sorted(
            ((p, json.loads(p.read_text())) for p in shipped_stages.STAGES_ROOT.glob("*/manifest.json")),
            key=lambda pm: (STAGE_ORDER[shipped_stages.kind_of(pm[1]["stage"])], pm[0].name),
        ):
            key, new = plan_stage(manifest, path, renamed_keys)
            if key != manifest["key"]:
                new["rekeyed_from"] = manifest["key"]
                renamed_keys[manifest["key"]] = key
                moves.append((path.parent, path.parent.with_name(new["name"]), new))
    except RekeyError as e:
        print(f"rekey_shipped: {e}", file=sys.stderr)
        return 1
    for old, new, manifest in moves:
        move(old, new, manifest, args.apply)
    print(f"{len(moves)} shipped result(s) {'moved' if args.apply else 'to move (--apply moves them)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
