"""`inquire train STAGE` (one training stage in this process, or in each under `accelerate launch` / `torchrun`)
and `inquire base-agent` (stage 0 alone, and its export to assets/base_agents/)."""

from __future__ import annotations

import json
from pathlib import Path

from ..profiles import DEFAULT_PROFILE
from .common import UsageError, named_checkpoint, settings_or_usage

STAGES = ("base", "sft", "grpo", "task-grpo")
DEFAULT_NAMES = {"sft": "sft_full", "grpo": "grpo_full", "task-grpo": "grpo_task"}
# the stage-0 fields a shipped agent's manifest records beside its steps and learning rate
STAGE0_RECORDED = ("base_agent_init", "base_agent_tasks", "copy_drill_tasks", "recovery_drill_tasks", "open_oversample")


def register(sub, debug) -> None:
    _add_train(sub, debug)
    _add_base_agent(sub, debug)


def _add_train(sub, debug) -> None:
    t = sub.add_parser(
        "train", help="run one training stage (under `accelerate launch` for several processes)", parents=[debug]
    )
    t.add_argument("stage", choices=STAGES)
    t.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    t.add_argument(
        "--start",
        "--start-from",
        dest="start",
        default=None,
        help="checkpoint folder or name (sft_full, grpo_full, ...) to start from; under torchrun write "
        "--start-from (torchrun reads --start as its own --start-method)",
    )
    t.add_argument(
        "--name", default=None, help="output name under artifacts/<profile>/ (default: sft_full, grpo_full, grpo_task)"
    )
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a profile field, e.g. --set model=/models/Qwen2.5-VL-3B-Instruct",
    )
    t.add_argument("--max-steps", type=int, default=None)
    t.add_argument(
        "--inquiry-share",
        type=float,
        default=None,
        help="sft: share of inquiry steps kept (default: weak_inquiry_share for --name sft_weak, else sft_inquiry_share)",
    )
    t.add_argument("--resume", action="store_true", help="continue from the last checkpoint in the output folder")
    t.add_argument(
        "--rebuild", action="store_true", help="train it here even where a result is shipped for these settings"
    )
    t.add_argument(
        "--seed",
        type=int,
        default=0,
        help="grpo: train the stage's k-th extra training seed (training seed + k) into <name>_s<k>, as stages.grpo_seeds does",
    )
    t.add_argument(
        "--select",
        action="store_true",
        help="grpo: then choose among the kept checkpoints on the validation split (`training.selection`)",
    )
    t.set_defaults(fn=_train)


def _train(args) -> int:
    """One stage in this process; under `accelerate launch` / `torchrun` each process runs this
    and TRL splits the batches. The data and the tiny model are prepared by rank 0 first."""
    from ..data.benchmark import benchmark
    from ..profiles import apply_overrides, get_profile, parse_overrides
    from ..runs.paths import run_named_by_overrides
    from ..training import sft as sft_stage
    from ..training.devices import is_main_process, require_device, world_size
    from ..training.models import model_path

    try:
        profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
        require_device(profile)
    except (KeyError, ValueError, RuntimeError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    run_named_by_overrides(profile)  # `--set` trains into the run the overrides name, as `inquire run` does
    if is_main_process():
        from ..stages.plan import plan_lines

        print("\n".join(plan_lines(profile)), flush=True)
    if world_size() > 1:
        from accelerate import PartialState

        with PartialState().main_process_first():
            benchmark(profile)
            model_path(profile)
    name = args.name or DEFAULT_NAMES.get(args.stage)
    if args.stage == "base":
        res_path = sft_stage.base_agent(profile)
        print(f"base agent: {res_path}")
        return 0
    trainer = {"sft": _train_sft, "grpo": _train_grpo, "task-grpo": _train_task_grpo}[args.stage]
    res = trainer(profile, name, args)
    if is_main_process():
        losses = [round(h["loss"], 6) for h in res.log_history if "loss" in h]
        print(
            json.dumps(
                {
                    "stage": args.stage,
                    "path": res.path,
                    "processes": world_size(),
                    "examples": res.n_examples,
                    "seconds": round(res.seconds, 1),
                    "loss": losses,
                }
            )
        )
    return 0


def _train_sft(profile, name: str, args):
    from ..training import sft as sft_stage

    return sft_stage.sft(
        profile,
        name=name,
        inquiry_share=args.inquiry_share,
        resume=args.resume,
        max_steps=args.max_steps,
        start=named_checkpoint(profile, args.start),
        rebuild=args.rebuild or None,
    )


def _train_grpo(profile, name: str, args):
    """`--seed K`: the stage's K-th extra training seed, into NAME_sK; `--select`: then the choice on validation."""
    from ..training import grpo as grpo_stage

    start = named_checkpoint(profile, args.start or "sft_full")
    if args.seed:  # an extra training seed of the stage, as `stages.grpo_seeds` trains it
        from ..training.configs import train_seed

        profile, name = profile.replace(train_seed=train_seed(profile) + args.seed), f"{name}_s{args.seed}"
    res = grpo_stage.grpo(
        profile, start=start, name=name, resume=args.resume, max_steps=args.max_steps, rebuild=args.rebuild or None
    )
    if args.select:
        from ..training.selection import chosen_on_validation

        chosen = chosen_on_validation(profile, name, start, Path(res.path).parent)
        print(
            f"{name}: chose step {chosen['selected_step']} on validation (constraints met: {chosen['constraints_met']})"
        )
    return res


def _train_task_grpo(profile, name: str, args):
    """Stage 3 starts from `--start`, else from the warm start the profile names."""
    from ..training.task_grpo import grpo_task, warm_start

    start = named_checkpoint(profile, args.start) if args.start else warm_start(profile)[1]
    return grpo_task(
        profile, start=start, name=name, max_steps=args.max_steps, resume=args.resume, rebuild=args.rebuild or None
    )


def _add_base_agent(sub, debug) -> None:
    ba = sub.add_parser(
        "base-agent", help="stage 0: the base agent (a shipped copy if its hashes match, else trained)", parents=[debug]
    )
    ba.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    ba.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a profile field, e.g. --set train_values=procedural",
    )
    ba.add_argument(
        "--rebuild", action="store_true", help="train it here even when a copy is shipped (or was installed from one)"
    )
    ba.add_argument("--export", action="store_true", help="write it to assets/base_agents/ with its manifest")
    ba.set_defaults(fn=_base_agent)


def _base_agent(args) -> int:
    """Stage 0 alone: the shipped copy when its hashes match, else trained (`--rebuild`: trained here
    in any case); `--export` writes it to assets/base_agents/ with its manifest."""
    from ..training.sft import base_agent

    profile = settings_or_usage(args.profile, args.set)
    if profile.base_agent_steps <= 0:
        raise UsageError(
            f"profile {profile.name} starts from {profile.model} (base_agent_steps is "
            f"{profile.base_agent_steps}); it has no stage 0"
        )
    path = base_agent(profile, rebuild=args.rebuild or None)
    print(f"base agent: {path}")
    if args.export:
        _export_base_agent(profile, path, args.set)
    return 0


def _export_base_agent(profile, path, sets: list[str]) -> None:
    """Write the base agent at `path` to assets/base_agents/ with its manifest: the command that rebuilds it, its
    content key, the settings that made it, and what the trainer recorded."""
    from ..profiles import explain
    from ..runs.hardware import device_stamp
    from ..training import shipped
    from ..training.models import model_path
    from ..training.sft import BASE_AGENT_FIELDS, base_agent_key, base_agent_settings, base_agent_source

    if shipped.is_shipped_copy(path):
        raise UsageError(f"{path} is an installed shipped copy, not one trained here; add --rebuild to train it")
    sets_text = "".join(f" --set {item}" for item in sets)
    command = f"inquire base-agent --profile {profile.name}{sets_text} --rebuild --export"
    shaped = any(k in BASE_AGENT_FIELDS for k, _ in profile.overrides)  # another agent than the profile's own
    record = Path(path) / "inquire_train.json"  # what the trainer recorded (a cache adopted from elsewhere has none)
    trained = json.loads(record.read_text()) if record.exists() else {}
    m = shipped.export(
        path,
        model_path(profile),
        Path(path).name,
        command=command,
        seed=profile.seed,
        extra={
            # the content key it is installed by, the settings that made it, and the profile it is the
            # start of (`shipped.refuse_stale` names the fields that differ when that profile changes)
            "key": base_agent_key(profile),
            "profile": "" if shaped else base_agent_source(profile).name,
            "settings": base_agent_settings(profile),
            "steps": profile.base_agent_steps,
            "lr": profile.base_agent_lr,
            "train_values": profile.train_values,
            **{k: trained[k] for k in ("torch_threads", "seconds", "device") if k in trained},
            # an agent trained before its record named the machine: the exporting machine, named as such
            **({} if "device" in trained else {"exported_on": device_stamp()}),
            # what stage 0 started from and read, where the profile or an override set it
            **{
                row["field"]: row["value"]
                for row in explain(profile)
                if row["field"] in STAGE0_RECORDED and row["source"] != "default"
            },
        },
    )
    print(f"exported {m['bytes']} bytes, sha256 {m['sha256']} to {shipped.SHIPPED_ROOT / m['name']}")
