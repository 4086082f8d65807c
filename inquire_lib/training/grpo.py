"""Stage 2: action-level GRPO with TRL's `GRPOTrainer`.

For each prompt, `num_generations` sampled completions are scored by the verifiable rewards of
`agent.rewards`; the policy gradient uses group-normalised advantages, with a KL penalty of weight
`beta` to the starting policy (0 drops the reference). Checkpoints are kept for `training.selection`
to choose from on the validation split; a finished run with the same inputs can be reused.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import datasets
import torch

from ..agent.rewards import build_reward_funcs
from ..data.benchmark import benchmark, grpo_detours, inquiry_need
from ..profiles import DataSettings, GRPOSettings, Profile, get_profile
from ..runs.paths import artifacts_dir
from ..runs.tracking import trainer_tracking, use_tracking
from .configs import config_record, grpo_config, lora_config
from .fit import TrainResult, fit
from .models import base_of, load_checkpoint, model_digest
from . import shipped_stages
from .sft import training_records


def grpo_records(profile: GRPOSettings, n: int | None = None) -> datasets.Dataset:
    """The GRPO prompt set: inquiry situations are ~10% of all steps, too rare for a few hundred
    prompts to teach when to ask; so a share `grpo_inquiry_share` of the prompts are steps that
    require an inquiry, a share `grpo_followup_share` (None: the same share) are the steps right after
    the user answered (where asking again is needless), a share `grpo_detour_share` are states off
    the expert's path (`data.benchmark.grpo_detours`), and the rest are other steps. Deterministic for a
    profile."""
    ds = benchmark(profile)["train"]
    n = n or profile.grpo_steps * profile.grpo_prompts_per_step
    required, after, other = [], [], []
    for i, (req, hist) in enumerate(zip(ds["inquiry_required"], ds["history"])):
        (required if req else after if hist and hist[-1].startswith("asked:") else other).append(i)
    rng = random.Random(f"grpo:{profile.seed}")
    k = round(n * profile.grpo_inquiry_share)
    share_after = profile.grpo_inquiry_share if profile.grpo_followup_share is None else profile.grpo_followup_share
    k_after = min(round(n * share_after), n - k)
    k_detour = min(round(n * profile.grpo_detour_share), n - k - k_after)
    pick = lambda pool, m: [rng.choice(pool) for _ in range(m)] if pool else []
    idx = pick(required, k) + pick(after, k_after) + pick(other, max(0, n - k - k_after - k_detour))
    rng.shuffle(idx)
    parts = [ds.select(idx)]
    if k_detour:
        detours = grpo_detours(profile)
        if len(detours) == 0:
            raise ValueError(
                f"grpo_detour_share={profile.grpo_detour_share} but {profile.grpo_detour_tasks} "
                "grpo_detour_tasks give no step off the path"
            )
        parts.append(detours.select(pick(range(len(detours)), k_detour)).cast(parts[0].features))
    prompts = parts[0]
    if len(parts) > 1:
        prompts = datasets.concatenate_datasets(parts)
        order = list(range(len(prompts)))
        rng.shuffle(order)  # the extra states among the others, not after them
        prompts = prompts.select(order)
    return with_inquiry_needs(training_records(prompts, profile, 1.0), profile)


def with_inquiry_needs(rows: datasets.Dataset, profile: DataSettings) -> datasets.Dataset:
    """`rows` with an `inquiry_need` column: at an inquiry step, the JSON of what a question must name
    (`agent.questions.Need`, rebuilt from the row's id), which the inquiry reward reads; "" elsewhere."""

    def need(rid: str, required: bool, gold: str) -> str:
        if not required:
            return ""
        found = inquiry_need(rid, json.loads(gold).get("text"), profile.train_values)
        return found.to_json() if found is not None else ""

    needs = [need(*r) for r in zip(rows["id"], rows["inquiry_required"], rows["gold_action"])]
    return rows.add_column("inquiry_need", needs)


def grpo(
    profile: str | Profile,
    start: str | None,
    name: str = "grpo",
    resume: bool = False,
    max_steps: int | None = None,
    train: datasets.Dataset | None = None,
    reward_names=None,
    callbacks=None,
    reuse: bool = False,
    rebuild: bool | None = None,
) -> TrainResult:
    """Stage 2 from the checkpoint `start` (an SFT output: adapter or full model).

    Each step samples `num_generations` completions for each of `grpo_prompts_per_step` prompts at
    `temperature`, scores them with the named rewards (`profile.reward_funcs` unless given; weighted
    by `profile.reward_weights`), and
    maximises the clipped, group-normalised advantage objective; `beta` > 0 adds a KL penalty.
    With `top_entropy_quantile` < 1 only the completion tokens whose entropy is in that top quantile
    of the batch carry the loss: the forking tokens (ask or act, which target) learn, while the
    near-deterministic format tokens are left alone. `grpo_iterations` > 1 reuses each generated
    batch for that many optimisation passes.

    With `reuse`, a finished run in `artifacts/<profile>/<name>` from the same start with the same
    settings is returned as recorded (log history and samples included) instead of being retrained.
    A result shipped for exactly these settings and start (`shipped_stages.result_key`) is installed
    instead of trained, unless `rebuild` (default: `name` in $INQUIRE_REBUILD) asks to train it here.
    """
    from trl import GRPOTrainer

    profile = get_profile(profile)
    reward_names = tuple(profile.reward_funcs if reward_names is None else reward_names)
    torch.set_num_threads(profile.torch_threads)
    out_dir = artifacts_dir(profile) / name
    steps = max_steps or profile.grpo_steps
    key = shipped_stages.result_key(profile, name, steps, start) if train is None else None
    if key is not None and not shipped_stages.rebuilds(name, rebuild):
        installed = shipped_stages.install_final(profile, name, key, out_dir, base_of(start, profile))
        if installed is not None:
            shutil.rmtree(out_dir / "selected", ignore_errors=True)  # chosen among the checkpoints of an older run
            return installed
    train = train if train is not None else grpo_records(profile)
    train = train.remove_columns([c for c in ("completion",) if c in train.column_names])
    is_adapter = start is not None and (Path(start) / "adapter_config.json").exists()
    config = grpo_config(profile, out_dir, reward_names, steps)
    record = config_record(config)
    start_digest = model_digest(start, profile)
    prompts = prompts_digest(train)
    rewards = build_reward_funcs(reward_names, profile)
    reward_params = {f.__name__: f.params for f in rewards}  # penalties and the like, as the rewards use them
    if reuse and (
        done := finished_run(
            out_dir, start, start_digest, list(reward_names), record, len(train), prompts, reward_params
        )
    ):
        return done
    shutil.rmtree(out_dir / "selected", ignore_errors=True)  # chosen among the checkpoints of an older run
    model, processor = load_checkpoint(profile, start, trainable=True)
    processor.tokenizer.padding_side = "left"
    peft_config = lora_config(profile) if (profile.lora and not is_adapter) else None
    with trainer_tracking(profile, name) as tracking:  # the record above stays free of where logs go
        trainer = GRPOTrainer(
            model=model,
            args=use_tracking(config, tracking),
            train_dataset=train,
            processing_class=processor,
            reward_funcs=rewards,
            peft_config=peft_config,
            callbacks=callbacks,
        )
    final, seconds = fit(
        trainer,
        out_dir,
        resume,
        meta=lambda folder, seconds: {
            "stage": "grpo",
            "profile": profile.name,
            "start": start,
            "start_digest": start_digest,
            "adapter": (folder / "adapter_config.json").exists(),
            "base": base_of(start, profile),
            "seconds": seconds,
            "rewards": list(reward_names),
            "config": record,
            "n_examples": len(train),
            "prompts_digest": prompts,
            "reward_params": reward_params,
            "log_history": trainer.state.log_history,
            "samples": last_samples(trainer),
        },
        key=key,
    )
    adapter = (final / "adapter_config.json").exists()
    samples = last_samples(trainer)
    return TrainResult(str(final), adapter, trainer.state.log_history, len(train), seconds, samples)


def prompts_digest(train: datasets.Dataset) -> str:
    """Which steps, in which order, a GRPO run trains on: a sha256 over the records' step ids (the
    benchmark itself is deterministic for a profile), so another prompt mix of the same size differs."""
    import hashlib

    return hashlib.sha256(json.dumps(list(train["id"])).encode()).hexdigest()


def finished_run(
    out_dir: Path,
    start: str | None,
    start_digest: str,
    reward_names: list,
    config: dict,
    n_examples: int,
    prompts: str,
    reward_params: dict,
) -> TrainResult | None:
    """The recorded result of a finished, complete GRPO run from the same start, with the same
    rewards and their parameters (penalties), the same prompts (`prompts_digest`) and the same config
    (`configs.config_record`), else None. The start is matched on its content (`model_digest`) as
    well as its path, so a start retrained at the same path is a different start; a record without
    the digests (older runs) is never reused."""
    from ..runs.integrity import verify

    final = out_dir / "final"
    if verify(final) is not None:
        return None
    rec = json.loads((final / "inquire_train.json").read_text())
    same = (
        rec.get("start") == start
        and rec.get("start_digest") == start_digest
        and rec.get("rewards") == reward_names
        and rec.get("n_examples") == n_examples
        and rec.get("prompts_digest") == prompts
        and rec.get("reward_params") == reward_params
        and config == rec.get("config")
    )
    if not same or "log_history" not in rec:
        return None
    return TrainResult(str(final), rec["adapter"], rec["log_history"], n_examples, rec["seconds"], rec["samples"])


def last_samples(trainer) -> list[dict]:
    """The trainer's buffer of its last generation batch (prompts, completions, rewards, advantages)."""
    logs = getattr(trainer, "_logs", None) or {}
    completions = list(logs.get("completion", []))
    rewards = {k: list(v) for k, v in logs.get("rewards", {}).items()}
    advantages = list(logs.get("advantages", []))
    out = []
    for i, c in enumerate(completions):
        text = (
            c
            if isinstance(c, str)
            else (
                c[0]["content"]
                if isinstance(c[0].get("content"), str)
                else "".join(part.get("text", "") for part in c[0]["content"])
            )
        )
        out.append(
            {
                "completion": text,
                "rewards": {k: v[i] for k, v in rewards.items() if i < len(v)},
                "advantage": advantages[i] if i < len(advantages) else float("nan"),
            }
        )
    return out
