"""What a run will do with each stage, before it does anything: find it here, install its shipped result, go on
from a shipped resume point, or train it, with its content key, the fields that differ from the nearest shipped
result of the stage, and the hours its training took there (per CPU kind). Computing a plan reads the profile,
the shipped manifests and the completeness markers of what is here: it loads, installs and trains nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..profiles import ModelSettings, Profile, RunSettings, SFTSettings
from ..runs.hardware import cpu_kind
from ..runs.integrity import finished_output, read_marker
from ..runs.keys import differences
from ..runs.paths import artifacts_dir
from ..training import shipped, shipped_stages
from ..training.sft import base_agent_dir, base_agent_key, base_agent_settings, base_agent_source
from ..training.sft import find_base_agent, run_key, stage_inquiry_share
from .grpo_seeds import seed_names
from .train import SHORT_RUNS, short_name

# what a step of the plan does; the last two train
HERE, INSTALL, SHORT, RESUME, TRAIN = "here", "install", "short", "resume", "train"
TRAINS = (RESUME, TRAIN)
# each later stage and the stage it starts from (notebooks 03 and 04: stage 3 from action-level GRPO)
STARTS = {"sft_full": "base_agent", "sft_weak": "base_agent", "grpo_full": "sft_full", "grpo_weak": "sft_weak"}
STARTS["grpo_task"] = "grpo_full"
SHOWN_DIFFERENCES = 4


@dataclass(frozen=True)
class Step:
    """One stage of the plan: what the run does with it (`action`), its content key, what it was compared with
    and how (`nearest`, `differs`), and the hours its training takes on `hours_on` (None: unmeasured)."""

    stage: str
    action: str
    key: str | None
    steps: int = 0
    nearest: str | None = None
    differs: tuple[str, ...] = ()
    hours: float | None = None
    hours_on: str = ""

    def line(self) -> str:
        says = {
            HERE: "here already (read back)",
            INSTALL: f"install the shipped {self.nearest}",
            SHORT: f"train a short run of {self.steps} steps",
            RESUME: f"go on from the shipped resume point {self.nearest} to step {self.steps}",
            TRAIN: f"train {self.steps} steps",
        }[self.action]
        text = f"{self.stage:<14} {says}" + (f"  [key {self.key}]" if self.key else "")
        if self.action in TRAINS:
            text += f"; {_hours(self.hours, self.hours_on)}"
            if self.nearest and self.action == TRAIN:
                shown = list(self.differs[:SHOWN_DIFFERENCES])
                more = len(self.differs) - len(shown)
                text += f"; nearest shipped {self.nearest}: " + ("; ".join(shown) or "the same settings")
                text += f" (+{more} more)" if more > 0 else ""
        return text


def _hours(hours: float | None, on: str) -> str:
    return f"about {hours:.1f} h on {on}" if hours is not None else "its time is unmeasured (no shipped run)"


def plan(profile: Profile) -> list[Step]:
    """A step for every stage the profile's run trains or uses, in the order the notebooks meet them."""
    steps: list[Step] = []
    keys: dict[str, str | None] = {}
    base = _base_agent_step(profile)
    if base is not None:
        steps.append(base)
        keys["base_agent"] = base.key
    for stage in ("sft_full", "sft_weak"):
        key = run_key(profile, stage, profile.sft_steps, stage_inquiry_share(profile, stage))
        keys[stage] = key
        steps.append(_stage_step(profile, stage, key, keys["base_agent"] if base else None, profile.sft_steps))
    for stage in ("grpo_full", "grpo_weak"):
        for name in seed_names(profile, stage):
            seeded = shipped_stages.seeded(profile, name)
            settings = shipped_stages.stage_settings(seeded, name, profile.grpo_steps, None)
            parent = keys[STARTS[stage]]
            key = shipped_stages.stage_key(settings, parent) if parent else None
            keys.setdefault(stage, key)
            steps.append(_stage_step(seeded, name, key, parent, profile.grpo_steps))
    if profile.task_grpo_steps > 0:
        parent = keys["grpo_full"]
        settings = shipped_stages.stage_settings(profile, "grpo_task", profile.task_grpo_steps, None)
        key = shipped_stages.stage_key(settings, parent) if parent else None
        steps.append(_stage_step(profile, "grpo_task", key, parent, profile.task_grpo_steps))
    for stage, (budget, _) in SHORT_RUNS.items():
        if getattr(profile, budget) > 0:
            steps.append(Step(short_name(stage), SHORT, None, getattr(profile, budget)))
    if profile.dagger_rounds > 0:
        # DAgger's rounds and their equal-compute control are never shipped: timed as SFT steps of the same model
        n = profile.dagger_rounds * profile.dagger_steps
        per_step = _seconds_per_step(profile, "sft_full")
        for name in ("sft_dagger", "sft_more"):
            hours, on = (per_step[0] * n / 3600, per_step[1]) if per_step else (None, "")
            steps.append(Step(name, TRAIN, None, n, hours=hours, hours_on=on))
    return steps


def trains_long(profile: RunSettings, steps: list[Step]) -> list[Step]:
    """The steps that train past the profile's short runs, where the profile does not train by design
    (`trains_in_run`): a run stops before these unless asked to train (`inquire run --train`)."""
    return [] if profile.trains_in_run else [s for s in steps if s.action in TRAINS]


def plan_lines(profile: Profile, steps: list[Step] | None = None) -> list[str]:
    """The plan as the run prints it: a header naming the profile and this CPU kind, then a line a stage."""
    steps = plan(profile) if steps is None else steps
    head = f"plan for profile {profile.name!r} on this machine ({cpu_kind()}):"
    return [head] + [f"  {s.line()}" for s in steps]


def _stage_step(profile: Profile, stage: str, key: str | None, parent: str | None, n_steps: int) -> Step:
    out = artifacts_dir(profile) / stage / "final"
    if key is not None and finished_output(out) and (read_marker(out) or {}).get("key") == key:
        return Step(stage, HERE, key, n_steps)
    manifest = _manifest(stage, key) if key else None
    if manifest is not None:
        action = INSTALL if manifest["kind"] == "final" else RESUME
        hours, on = _remaining_hours(manifest, n_steps) if action == RESUME else (None, "")
        return Step(stage, action, key, n_steps, manifest["name"], hours=hours, hours_on=on)
    settings = shipped_stages.stage_settings(profile, stage, n_steps, _share(profile, stage))
    nearest, differs = _nearest(stage, settings, parent, profile.model)
    per_step = _seconds_per_step(profile, stage)
    hours, on = (per_step[0] * n_steps / 3600, per_step[1]) if per_step else (None, "")
    return Step(stage, TRAIN, key, n_steps, nearest, differs, hours, on)


def _share(profile: SFTSettings, stage: str) -> float | None:
    return stage_inquiry_share(profile, stage) if shipped_stages.kind_of(stage) == "sft" else None


def _manifest(stage: str, key: str) -> dict | None:
    path = shipped_stages.folder_of(stage, key) / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _manifests(stage: str) -> list[dict]:
    root = Path(shipped_stages.STAGES_ROOT)
    return [json.loads(p.read_text()) for p in sorted(root.glob(f"{stage}-*/manifest.json"))]


def _nearest(stage: str, settings: dict, parent: str | None, model: str) -> tuple[str | None, tuple[str, ...]]:
    """The shipped result of `stage` on the same model whose settings differ from these in the fewest fields, and
    how (nothing where none of the stage was shipped for that model)."""
    best: tuple[int, str, tuple[str, ...]] | None = None
    for m in _manifests(stage):
        if m.get("settings", {}).get("model") != model:
            continue
        differs = tuple(differences(m.get("settings", {}), settings))
        if m.get("parent") != parent:
            differs += (f"its start {m.get('parent')} -> {parent}",)
        if best is None or len(differs) < best[0]:
            best = (len(differs), m["name"], differs)
    return (best[1], best[2]) if best else (None, ())


def _sittings(manifest: dict) -> list[dict]:
    """A manifest's training sittings: steps, machine and seconds each (one for a result trained at once)."""
    if manifest.get("sittings"):
        return manifest["sittings"]
    step = manifest.get("step") or manifest.get("steps")
    return [{"steps": [0, step], "device": manifest.get("device"), "seconds": manifest.get("seconds")}]


def _per_step(manifest: dict, kind: str) -> tuple[float, str] | None:
    """(seconds a step, the CPU kinds it was measured on) from a manifest's sittings: those on `kind` where
    there are any, else all of them."""
    timed = [s for s in _sittings(manifest) if s.get("seconds") and s.get("steps") and s["steps"][1]]
    on_kind = [s for s in timed if (s.get("device") or {}).get("cpu_kind") == kind]
    use = on_kind or timed
    n = sum(s["steps"][1] - s["steps"][0] for s in use)
    if not use or n <= 0:
        return None
    kinds = sorted({str((s.get("device") or {}).get("cpu_kind") or "an unrecorded kind") for s in use})
    return sum(float(s["seconds"]) for s in use) / n, ", ".join(kinds)


def _seconds_per_step(profile: ModelSettings, stage: str) -> tuple[float, str] | None:
    """Seconds a training step of `stage` took in its shipped results on the profile's model (this CPU kind's
    sittings where there are any); None where none was shipped."""
    kind = cpu_kind()
    for m in _manifests(shipped_stages.seed_of(stage)[0]):
        if m.get("settings", {}).get("model") == profile.model:
            found = _per_step(m, kind)
            if found:
                return found
    return None


def _remaining_hours(manifest: dict, n_steps: int) -> tuple[float | None, str]:
    per_step = _per_step(manifest, cpu_kind())
    left = max(0, n_steps - int(manifest.get("step") or 0))
    return (per_step[0] * left / 3600, per_step[1]) if per_step else (None, "")


def _base_agent_step(profile: Profile) -> Step | None:
    source = base_agent_source(profile)
    if source.base_agent_steps <= 0:
        return None
    key, folder = base_agent_key(profile), base_agent_dir(profile)
    if find_base_agent(source) is not None:
        return Step("base_agent", HERE, key, source.base_agent_steps)
    manifests = [json.loads(p.read_text()) for p in sorted(Path(shipped.SHIPPED_ROOT).glob("*/manifest.json"))]
    for m in manifests:
        if m.get("name") == folder.name:
            return Step("base_agent", INSTALL, key, source.base_agent_steps, m["name"])
    settings = base_agent_settings(profile)
    near = [m for m in manifests if isinstance(m.get("settings"), dict) and m["settings"].get("model") == profile.model]
    ranked = sorted(near, key=lambda m: len(differences(m["settings"], settings)))
    nearest = ranked[0] if ranked else None
    differs = tuple(differences(nearest["settings"], settings)) if nearest else ()
    per_step = next((p for m in manifests if (p := _per_step(m, cpu_kind())) and m.get("profile") == source.name), None)
    hours, on = (per_step[0] * source.base_agent_steps / 3600, per_step[1]) if per_step else (None, "")
    return Step("base_agent", TRAIN, key, source.base_agent_steps, nearest and nearest["name"], differs, hours, on)
