"""A GRPO stage over several training seeds: the extra seeds trained, chosen and evaluated, in worker
processes when the profile runs several at once."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..profiles import GRPOSettings, Profile
from ..runs.paths import run_dir
from ..training.checkpoints import checkpoint_path
from ..training.configs import train_seed
from .evaluate import evaluate_checkpoint
from .train import grpo, select_checkpoint


def seed_names(profile: GRPOSettings, name: str) -> list[str]:
    """A GRPO stage's checkpoints over `grpo_seeds` training seeds: `name` (the profile's own training seed,
    the checkpoint later notebooks use), then `<name>_s1`, `<name>_s2`, ..."""
    return [name] + [f"{name}_s{k}" for k in range(1, profile.grpo_seeds)]


def _seed_run(profile: Profile, start_name: str, name: str, offset: int, out_root) -> dict:
    """One extra seed of a GRPO stage: trained from `start_name` with the training seed + `offset`, chosen
    on validation, evaluated on the test split; its test step metrics."""
    seeded = profile.replace(train_seed=train_seed(profile) + offset)
    grpo(seeded, start=checkpoint_path(profile, start_name), name=name, reuse=True)
    select_checkpoint(seeded, name, start_name, out_root)
    return evaluate_checkpoint(seeded, name, out_root=out_root)


def _quiet_worker(log: str) -> None:
    """A worker's own output (TRL's metric lines, progress bars) goes to `log`, not to the console of the
    command that runs the notebook: the kernel's output is the notebook's, a worker writes to file
    descriptors it inherited from the console. The run's metrics and records hold what it measured."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def grpo_seeds(profile: Profile, stages: dict[str, str], out_root=None) -> dict[str, list[dict]]:
    """The test step metrics of each GRPO stage in `stages` ({name: start name}, e.g. {"grpo_weak":
    "sft_weak"}) over `grpo_seeds` training seeds (`seed_names`). Seed 0 is the stage's own run, trained
    and chosen before; every other is trained, chosen on validation and evaluated here, a finished run with
    the same settings reused, `parallel_runs` at a time, each in a process of its own."""
    jobs = [
        (stage, start, name, k)
        for stage, start in stages.items()
        for k, name in enumerate(seed_names(profile, stage))
        if k > 0
    ]
    if profile.parallel_runs > 1 and len(jobs) > 1:
        # spawn: a fresh interpreter per worker, not a fork of a kernel that holds torch's threads
        log = str(run_dir(profile, out_root) / "logs" / "grpo_seeds.log")
        with ProcessPoolExecutor(
            profile.parallel_runs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_quiet_worker,
            initargs=(log,),
        ) as pool:
            futures = [pool.submit(_seed_run, profile, start, name, k, out_root) for _, start, name, k in jobs]
            extra = [f.result() for f in futures]
    else:
        extra = [_seed_run(profile, start, name, k, out_root) for _, start, name, k in jobs]
    out = {stage: [evaluate_checkpoint(profile, stage, out_root=out_root)] for stage in stages}
    for (stage, *_), metrics in zip(jobs, extra):
        out[stage].append(metrics)
    return out
