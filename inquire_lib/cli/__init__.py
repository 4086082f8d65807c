"""The `inquire` command: build, validate, run, report, profile, train, base-agent, export, export-openvino.

Errors are one line on stderr naming the file, line and field, or the argument: exit code 2 for a
usage error (a bad argument, a path that cannot be used), 1 for bad data (a malformed record, a
corrupt model) or a failed notebook. `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .profiles import DEFAULT_PROFILE, EvalSettings

# `inquire build`: above this many tasks the build needs --large (and says how big it will be)
MAX_TASKS = 5000
HARD_MAX_TASKS = 1_000_000
# measured on the smoke machine (2 cores): about 160 KB on disk and 0.03-0.07 s of one core a task
BYTES_PER_TASK = 160_000
SECONDS_PER_TASK = (0.03, 0.07)


class UsageError(Exception):
    """A bad argument or an unusable path: exit code 2."""


class DataError(Exception):
    """Bad data in a file the command read: exit code 1."""


def build_estimate(n_tasks: int) -> str:
    lo, hi = (round(n_tasks * t) for t in SECONDS_PER_TASK)
    return (
        f"estimate: {n_tasks} tasks, about {n_tasks * BYTES_PER_TASK / 1e6:,.0f} MB on disk and "
        f"{lo:,}-{hi:,} s of one core"
    )


def _build(args) -> int:
    from .data.benchmark import build_dataset, fingerprint, stats, write_dataset
    from .runs.outputs import check_output_dir, write_owned_dir

    if args.tasks < 1:
        raise UsageError(f"argument --tasks: expected a positive number of tasks, got {args.tasks}")
    if args.tasks > HARD_MAX_TASKS:
        raise UsageError(
            f"argument --tasks: {args.tasks} is above the limit of {HARD_MAX_TASKS:,} ({build_estimate(args.tasks)})"
        )
    if args.tasks > MAX_TASKS and not args.large:
        raise UsageError(
            f"argument --tasks: {args.tasks} is above {MAX_TASKS} without --large ({build_estimate(args.tasks)})"
        )
    check_output_dir(args.out, args.force)  # before the work, not after it
    print(build_estimate(args.tasks), file=sys.stderr)
    dd = build_dataset(args.seed, args.tasks, args.train_values)
    write_owned_dir(args.out, lambda tmp: write_dataset(dd, tmp), force=args.force)
    st = stats(dd)
    for split, s in st.items():
        print(
            f"{split}: {s['tasks']} tasks, {s['steps']} steps, {s['inquiry_steps']} inquiry steps, "
            f"{s['n_categories']} categories, {s['n_subcategories']} sub-categories, {s['safe_tasks']} safe tasks, "
            f"{s['templates']} templates"
        )
        print("  categories: " + ", ".join(f"{k} {v}" for k, v in s["categories"].items()))
    print(f"fingerprint: {fingerprint(dd)}")
    print(f"written to {args.out}")
    return 0


def _validate(args) -> int:
    from .data.external import validate_main

    if args.max_line_bytes is not None and args.max_line_bytes < 1:
        raise UsageError(f"argument --max-line-bytes: expected a positive number, got {args.max_line_bytes}")
    return validate_main(args.file, args.image_root, args.skip_bad, args.max_line_bytes)


def _profile_or_usage(name: str):
    from .profiles import PROFILES, get_profile

    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; choose one of {', '.join(sorted(PROFILES))}")
    return get_profile(name)


def _run(args) -> int:
    from .profiles import OverrideError, apply_overrides, parse_overrides
    from .runs.notebooks import NotebookFailed, discover_notebooks, run_notebooks, select_notebooks

    _profile_or_usage(args.profile)
    if args.only:
        try:
            select_notebooks(discover_notebooks(), args.only)
        except ValueError as exc:
            raise UsageError(f"argument --only: {exc}") from None
    try:
        overrides = parse_overrides(args.set or [])
        effective = apply_overrides(args.profile, overrides)
        _engine_or_usage(effective)
        figures = _figures_note()

        def preflight() -> None:  # with the run's lock held: a run another process holds prints nothing
            _plan_or_usage(effective, args.train, "inquire run", "make run TRAIN=1")
            if figures:
                print(figures)

        run_notebooks(args.profile, only=args.only or None, overrides=overrides, name=args.name, preflight=preflight)
        if figures:
            print(figures)
    except (OverrideError, KeyError, ValueError) as exc:  # settings refused before any kernel starts
        raise UsageError(exc.args[0] if isinstance(exc, KeyError) else str(exc)) from None
    except NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _engine_or_usage(profile: EvalSettings) -> None:
    """Stop before any notebook starts when the profile's evaluation engine is not installed here."""
    from .training.openvino import engine_missing

    missing = engine_missing(profile)
    if missing is not None:
        raise UsageError(f"profile {profile.name!r}: {missing}")


def _plan_or_usage(profile, train: bool, command: str, make: str | None = None) -> None:
    """Print what the run will do with each stage (`stages.plan`); stop before anything starts when it would train
    a stage past the profile's short runs and was not asked to (`--train`)."""
    from .stages.plan import plan, plan_lines, trains_long

    steps = plan(profile)
    print("\n".join(plan_lines(profile, steps)), flush=True)
    long = trains_long(profile, steps)
    if long and not train:
        hours = [s.hours for s in long if s.hours is not None]
        cost = f"about {sum(hours):.1f} h measured" if hours else "time unmeasured"
        ways = f"add --train to `{command}`" + (f" ({make})" if make else "")
        raise UsageError(
            f"profile {profile.name!r} would train {', '.join(s.stage for s in long)} ({cost}) and was not asked "
            f"to train: {ways} to go on, or change the settings back (`inquire plan` shows the plan)"
        )


def _plan(args) -> int:
    """`inquire plan`: what a run of the profile would do with each stage, and nothing else."""
    from .profiles import OverrideError, apply_overrides, parse_overrides
    from .stages.plan import plan, plan_lines, trains_long

    _profile_or_usage(args.profile)
    try:
        profile = apply_overrides(args.profile, parse_overrides(args.set or []))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    steps = plan(profile)
    print("\n".join(plan_lines(profile, steps)))
    long = trains_long(profile, steps)
    if long:
        print(f"a run stops before it trains {', '.join(s.stage for s in long)}, unless given --train")
    return 0


def _figures_note() -> str | None:
    """The one line a run prints when its figures will be HTML only (no Chrome for plotly's PNG export)."""
    from .viz.overlays import find_chrome

    if find_chrome() is not None:
        return None
    return "figures: HTML only, no PNG: plotly's PNG export needs Chrome/Chromium, and none is installed (make browser)"


def _failures(args) -> int:
    """`inquire failures RUN NAME`: the failure table of the checkpoint's online episodes in the run."""
    from .evaluation.failures import failure_by_subcategory, failure_markdown, failure_table
    from .runs.records import read_jsonl

    path = Path(args.run_dir) / "eval" / args.checkpoint / "trajectories.jsonl"
    if not path.is_file():
        raise UsageError(f"{path}: no online episodes of {args.checkpoint} in that run")
    table = failure_table([rec for _, rec in read_jsonl(path)])
    print(failure_markdown(table))
    print(failure_by_subcategory(table))
    return 0


def _report(args) -> int:
    from .viz.report import report_main

    from pathlib import Path

    run, out = Path(args.run_dir), Path(args.out)
    if not run.is_dir():
        raise UsageError(f"{run}: run folder does not exist or is not a folder")
    if out.is_dir():
        raise UsageError(f"argument -o/--out: {out} is a folder; give the path of the .html file to write")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"argument -o/--out: {out} lies under {parent}, which is a file")
            break
    if args.max_cards is not None and args.max_cards < 1:
        raise UsageError(f"argument --max-cards: expected a positive number, got {args.max_cards}")
    return report_main(
        args.run_dir,
        args.out,
        args.failures_only,
        max_cards=args.max_cards,
        checkpoints=args.checkpoints,
        outcomes=args.outcomes,
    )


def _summary(args) -> int:
    from pathlib import Path

    from .runs.summary import summary

    run = Path(args.run_dir)
    if not run.is_dir():
        raise UsageError(f"{run}: run folder does not exist or is not a folder")
    try:
        print(summary(run, ablations=args.ablations), end="")
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _profile(args) -> int:
    from .profiles import OverrideError, apply_overrides, parse_overrides

    profile = _profile_or_usage(args.name)
    try:
        profile = apply_overrides(profile, parse_overrides(args.set or []))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    print(explain_text(profile) if args.explain else json.dumps(profile.to_dict(), indent=1))
    return 0


def explain_text(profile) -> str:
    """`inquire profile NAME --explain`: a header, then each field as `name = value  [source]  Settings  affects: ...`
    (the settings class that declares it) with its help indented below, then what each word of `affects` means (all from the fields' metadata)."""
    from .profiles import AFFECTS, explain

    rows = explain(profile)
    counts = {s: sum(r["source"] == s for r in rows) for s in ("default", "profile", "override")}
    lines = [
        f"profile {profile.name}: {len(rows)} fields, {counts['default']} default, {counts['profile']} "
        f"from the profile, {counts['override']} overridden (--set)"
    ]
    for r in rows:
        value = json.dumps(r["value"], default=str)
        lines.append(f"{r['field']} = {value}  [{r['source']}]  {r['settings']}  affects: {', '.join(r['affects'])}")
        lines.append(f"    {r['help']}")
    lines.append("affects:")
    lines += [f"  {word}: {meaning}" for word, meaning in AFFECTS.items()]
    return "\n".join(lines)


STAGES = ("base", "sft", "grpo", "task-grpo")
DEFAULT_NAMES = {"sft": "sft_full", "grpo": "grpo_full", "task-grpo": "grpo_task"}


def _checkpoint(profile, start: str | None) -> str | None:
    """--start: a folder as is, else a named checkpoint of the profile (sft_full, grpo_full, ...)."""
    from pathlib import Path

    from .training.checkpoints import checkpoint_path

    if start is None or Path(start).exists():
        return start
    return checkpoint_path(profile, start)


def _train(args) -> int:
    """One stage in this process; under `accelerate launch` / `torchrun` each process runs this
    and TRL splits the batches. The data and the tiny model are prepared by rank 0 first."""
    from .data.benchmark import benchmark
    from .profiles import apply_overrides, get_profile, parse_overrides
    from .runs.paths import run_named_by_overrides
    from .training import grpo as grpo_stage
    from .training import sft as sft_stage
    from .training.devices import is_main_process, require_device, world_size
    from .training.models import model_path

    try:
        profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
        require_device(profile)
    except (KeyError, ValueError, RuntimeError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    run_named_by_overrides(profile)  # `--set` trains into the run the overrides name, as `inquire run` does
    if is_main_process():
        from .stages.plan import plan_lines

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
    if args.stage == "sft":
        res = sft_stage.sft(
            profile,
            name=name,
            inquiry_share=args.inquiry_share,
            resume=args.resume,
            max_steps=args.max_steps,
            start=_checkpoint(profile, args.start),
            rebuild=args.rebuild or None,
        )
    elif args.stage == "grpo":
        start = _checkpoint(profile, args.start or "sft_full")
        if args.seed:  # an extra training seed of the stage, as `stages.grpo_seeds` trains it
            from .training.configs import train_seed

            profile, name = profile.replace(train_seed=train_seed(profile) + args.seed), f"{name}_s{args.seed}"
        res = grpo_stage.grpo(
            profile, start=start, name=name, resume=args.resume, max_steps=args.max_steps, rebuild=args.rebuild or None
        )
        if args.select:
            from .training.selection import chosen_on_validation

            chosen = chosen_on_validation(profile, name, start, Path(res.path).parent)
            print(
                f"{name}: chose step {chosen['selected_step']} on validation (constraints met: {chosen['constraints_met']})"
            )
    else:
        from .training.task_grpo import grpo_task, warm_start

        start = _checkpoint(profile, args.start) if args.start else warm_start(profile)[1]
        res = grpo_task(
            profile, start=start, name=name, max_steps=args.max_steps, resume=args.resume, rebuild=args.rebuild or None
        )
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


def _learning_curve(args) -> int:
    """Stage 1's learning curve of asking: the fork margin of each checkpoint of an SFT run on the
    validation split (`stages.learning_curve`), as JSON beside the run and as a Markdown table."""
    from pathlib import Path

    from .profiles import OverrideError, apply_overrides, parse_overrides
    from .runs.paths import artifacts_dir, run_named_by_overrides
    from .stages.learning_curve import curve_table, learning_curve
    from .training.sft import base_agent_path

    profile = _profile_or_usage(args.profile)
    try:
        profile = apply_overrides(profile, parse_overrides(args.set))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    run_named_by_overrides(profile)
    run = Path(args.run) if args.run else artifacts_dir(profile) / args.name
    if not run.is_dir():
        raise UsageError(f"{run}: no SFT run there (train one with `inquire train sft`)")
    steps = {int(x) for x in args.steps.split(",")} if args.steps else None
    name = "learning_curve.json" if args.split == "validation" else f"learning_curve.{args.split}.json"
    out = Path(args.out) if args.out else run / name
    curve = learning_curve(
        profile, run, base_agent_path(profile), out, max_needless=args.max_needless, steps=steps, split=args.split
    )
    print(curve_table(curve))
    print(f"written: {out}")
    return 0


def _choose(profile, paths: dict) -> int:
    """`inquire evaluate NAME... --level choose`: the chain's choice on validation, printed."""
    from .runs.summary import rate
    from .stages import choose_on_validation

    choice = choose_on_validation(profile, list(paths), paths=paths)
    print(f"On {choice['validation_tasks']} validation tasks online (Wilson 95% CIs): {choice['rule']}")
    for name, rates in choice["validation"].items():
        print(f"  {name}: " + ", ".join(f"{k} {rate(v)}" for k, v in rates.items()))
    test = choice["test"]
    tail = ", ".join(f"{k} {rate(v)}" for k, v in test.items()) if test else "not played on the test split in this run"
    print(f"chosen: {choice['chosen']}; on the test split: {tail}")
    return 0


def _evaluate(args) -> int:
    """Named checkpoints (or folders) on the test split, step by step and online in PhoneEnv, into the run that
    `--run` or the overrides name (each evaluated once: a stored one with the same key is read back); then the
    run's step and task tables. Checkpoint names are looked up in `--from-run`'s artifacts (default: the
    current run's), so the same checkpoints can be scored under other settings, e.g. `--set user_answers=any`."""
    import os
    from pathlib import Path

    from .profiles import OverrideError, apply_overrides, parse_overrides
    from .runs.paths import RUN_NAME, run_dir, run_named_by_overrides
    from .runs.summary import step_markdown, task_markdown
    from .stages.compare_asking import asking_curves
    from .stages.evaluate import evaluate_checkpoint, evaluate_checkpoint_tasks
    from .training.checkpoints import checkpoint_path

    profile = _profile_or_usage(args.profile)
    try:
        profile = apply_overrides(profile, parse_overrides(args.set))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    given = os.environ.get(RUN_NAME[0])
    os.environ[RUN_NAME[0]] = args.from_run  # where the names are looked up
    paths = {}
    for spec in args.checkpoints:
        name, _, folder = spec.partition("=")
        if folder and not Path(folder).is_dir():
            raise UsageError(f"{folder}: no checkpoint folder there")
        try:
            paths[name] = folder or checkpoint_path(profile, name)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
    os.environ[RUN_NAME[0]] = args.run or given or ""  # where the metrics go: --run, else the caller's run
    run_named_by_overrides(profile)  # where the metrics go
    if args.level == "choose":
        return _choose(profile, paths)
    if args.split != "test":
        return _evaluate_split(profile, paths, args.split)
    asking = {}
    for name, path in paths.items():
        if args.level in ("step", "both"):
            evaluate_checkpoint(profile, name, path=path)
        if args.level in ("task", "both"):
            evaluate_checkpoint_tasks(profile, name, path=path)
        if args.level == "asking":
            asking[name] = asking_curves(profile, name, path=path)
    out = run_dir(profile)
    print(f"run {out}")
    if args.level in ("step", "both"):
        print("Step level (held-out test steps, greedy; Wilson 95% CIs):\n" + step_markdown(out))
    if args.level in ("task", "both"):
        print("Task level (online in PhoneEnv, held-out tasks):\n" + task_markdown(out))
    if asking:
        from .viz.plots import asking_auc_table

        print("When to ask (test steps; AUC with bootstrap 95% CIs; step ISR learned / confidence):")
        print(asking_auc_table(asking).to_string())
        print("\n".join(c["verdict"] for c in asking.values()))
    return 0


def _evaluate_split(profile, paths: dict, split: str) -> int:
    """`inquire evaluate NAME... --split S`: the checkpoints and the reference policies played online on split S,
    into the run `split-S` beside the one the names come from, then the generalisation table."""
    import os

    from .data.splits import split_fingerprint, split_tasks
    from .evaluation.episodes import evaluate_reference_tasks
    from .runs.paths import RUN_NAME, run_dir
    from .runs.summary import generalisation_markdown
    from .stages.evaluate import evaluate_checkpoint_tasks

    base = run_dir(profile)
    tasks = split_tasks(profile, split)
    print(f"split {split}: {len(tasks)} tasks, fingerprint {split_fingerprint(tasks)}")
    os.environ[RUN_NAME[0]] = f"split-{split}"
    for name, path in paths.items():
        evaluate_checkpoint_tasks(profile, name, tasks=tasks, path=path)
    evaluate_reference_tasks(profile, tasks)
    print(generalisation_markdown(base, {split: run_dir(profile)}, list(paths) + ["always_act", "expert"]))
    return 0


def _ship(args) -> int:
    """Ship a later stage's result under assets/stages/: its finished adapter, or the last complete
    checkpoint of a run that has not finished (to go on from in another sitting), with its manifest."""
    from pathlib import Path

    from .data.benchmark import benchmark_fingerprint
    from .profiles import UNNAMED_OVERRIDES, OverrideError, apply_overrides, parse_overrides
    from .runs.hardware import device_stamp
    from .runs.integrity import finished_output, last_complete_checkpoint, read_marker
    from .runs.paths import artifacts_dir, run_named_by_overrides
    from .training import shipped_stages
    from .training.sft import base_agent_key, run_key, stage_inquiry_share

    profile = _profile_or_usage(args.profile)
    try:
        profile = apply_overrides(profile, parse_overrides(args.set))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    run_named_by_overrides(profile)
    out_dir = artifacts_dir(profile) / args.stage
    if shipped_stages.kind_of(args.stage) is None:
        raise UsageError(
            f"{args.stage}: not a stage that ships ({', '.join(shipped_stages.STAGE_KINDS)}, or a GRPO stage's seed "
            "such as grpo_weak_s1)"
        )
    if shipped_stages.kind_of(args.stage) != "sft":
        return _ship_later(profile, args.stage, out_dir)
    final = out_dir / "final"
    source = final if finished_output(final) else last_complete_checkpoint(out_dir)
    if source is None:
        raise UsageError(f"{out_dir}: no finished result and no complete checkpoint to ship")
    source = Path(source)
    share = stage_inquiry_share(profile, args.stage)
    trained = json.loads((final / "inquire_train.json").read_text()) if source == final else {}
    state = json.loads((source / "trainer_state.json").read_text()) if (source / "trainer_state.json").exists() else {}
    per_step = profile.sft_batch  # the global batch of one optimizer step (accumulation splits it)
    step = trained.get("steps", state.get("global_step"))
    sets = "".join(f" --set {k}={v}" for k, v in profile.overrides if k not in UNNAMED_OVERRIDES)
    share_arg = "" if args.stage == "sft_full" else f" --name {args.stage} --inquiry-share {share}"
    settings = shipped_stages.stage_settings(profile, args.stage, profile.sft_steps, share)
    # the resume point this run went on from, when one is shipped under the same key: its sittings go on in this one
    parent, device = base_agent_key(profile), trained.get("device", device_stamp())
    marker = read_marker(source) or {}
    made, key = marker.get("key"), run_key(profile, args.stage, profile.sft_steps, share)
    if made != key:
        raise UsageError(
            f"{source}: made under settings key {made or 'unrecorded'}, these settings' key is {key}: ship it with "
            "the settings it was trained with (--profile, --set)"
        )
    previous = shipped_stages.find(args.stage, settings, parent)
    total = trained.get("seconds_total", marker.get("seconds") or 0.0)
    sat = shipped_stages.sittings(previous, step, total, device, args.paused_seconds)
    kept = {k: previous[k] for k in ("schedule_note",) if previous and k in previous}
    m = shipped_stages.ship(
        source,
        args.stage,
        settings,
        parent,
        command=f"inquire train sft --profile {profile.name}{sets}{share_arg} --resume",
        extra={
            "step": step,  # a finished result's marker holds no step; its training record does
            "profile": profile.name,
            "data_fingerprint": benchmark_fingerprint(profile),
            "examples": step * per_step if step is not None else None,
            "of_steps": profile.sft_steps,
            "device": device,
            "seconds": round(sum(float(x["seconds"] or 0.0) for x in sat), 1),
            "seconds_note": "training seconds, summed over the sittings; the seconds a sitting was stopped are left out",
            "sittings": sat,
            **kept,
        },
    )
    print(
        f"shipped {m['kind']} of {args.stage} at step {m['step']} ({m['bytes']} bytes) to {shipped_stages.STAGES_ROOT / m['name']}"
    )
    return 0


# the command that trains a later stage, and the runs it starts from where the run's record names no other
LATER_COMMANDS = {"grpo": "grpo", "task_grpo": "task-grpo"}


def _ship_later(profile, stage: str, out_dir) -> int:
    """Ship a later stage's finished result (GRPO: the checkpoint chosen on validation where a choice was
    made, else the last; stage 3: its final), keyed by its settings under its start's key."""
    from .data.benchmark import benchmark_fingerprint
    from .profiles import UNNAMED_OVERRIDES
    from .runs.hardware import device_stamp
    from .runs.integrity import finished_output, read_marker
    from .training import shipped_stages

    kind = shipped_stages.kind_of(stage)
    base_name, offset = shipped_stages.seed_of(stage)
    profile = shipped_stages.seeded(profile, stage)  # the run of an extra seed was trained with the seed it names
    source = next((out_dir / f for f in ("selected", "final") if finished_output(out_dir / f)), None)
    if source is None:
        raise UsageError(f"{out_dir}: no finished result to ship (a later stage ships once it has finished)")
    record = json.loads((source / "inquire_train.json").read_text())
    steps = record.get("config", {}).get("max_steps")
    key = shipped_stages.result_key(profile, stage, steps, record.get("start"))
    made = (read_marker(source) or {}).get("key")
    if key is None or made != key:
        raise UsageError(
            f"{source}: made under settings key {made or 'unrecorded'}, these settings and its start give "
            f"{key or 'none (its start has no content key)'}: ship it with the settings it was trained with (--profile, --set)"
        )
    start_name = Path(record["start"]).parent.name
    sets = "".join(f" --set {k}={v}" for k, v in profile.overrides if k not in UNNAMED_OVERRIDES)
    select = " --select" if source.name == "selected" else ""
    m = shipped_stages.ship(
        source,
        stage,
        shipped_stages.stage_settings(profile, stage, steps, None),
        shipped_stages.start_key(record["start"]),
        command=f"inquire train {LATER_COMMANDS[kind]} --profile {profile.name}{sets} --name {base_name} --start "
        f"{start_name}{select}{f' --seed {offset}' if offset else ''}",
        extra={
            "step": steps,
            "profile": profile.name,
            "start": start_name,
            "data_fingerprint": benchmark_fingerprint(profile),
            **shipped_stages.later_extent(kind, record, steps, profile),
            "of_steps": steps,
            "device": record.get("device") or device_stamp(),
            "seconds_note": "training seconds; the choice on validation is not counted",
            **({"selected_step": record.get("selected_step"), "ask_bias": record.get("ask_bias")} if select else {}),
        },
    )
    print(f"shipped {m['kind']} of {stage} ({m['bytes']} bytes) to {shipped_stages.STAGES_ROOT / m['name']}")
    return 0


# the stage-0 fields a shipped agent's manifest records beside its steps and learning rate
STAGE0_RECORDED = ("base_agent_init", "base_agent_tasks", "copy_drill_tasks", "recovery_drill_tasks", "open_oversample")


def _base_agent(args) -> int:
    """Stage 0 alone: the shipped copy when its hashes match, else trained (`--rebuild`: trained here
    in any case); `--export` writes it to assets/base_agents/ with its manifest."""
    from pathlib import Path

    from .profiles import OverrideError, apply_overrides, explain, parse_overrides
    from .runs.hardware import device_stamp
    from .training import shipped
    from .training.models import model_path
    from .training.sft import BASE_AGENT_FIELDS, base_agent, base_agent_key, base_agent_settings, base_agent_source

    profile = _profile_or_usage(args.profile)
    try:
        profile = apply_overrides(profile, parse_overrides(args.set))
    except OverrideError as exc:
        raise UsageError(str(exc)) from None
    if profile.base_agent_steps <= 0:
        raise UsageError(
            f"profile {profile.name} starts from {profile.model} (base_agent_steps is "
            f"{profile.base_agent_steps}); it has no stage 0"
        )
    path = base_agent(profile, rebuild=args.rebuild or None)
    print(f"base agent: {path}")
    if args.export:
        if shipped.is_shipped_copy(path):
            raise UsageError(f"{path} is an installed shipped copy, not one trained here; add --rebuild to train it")
        sets = "".join(f" --set {item}" for item in args.set)
        command = f"inquire base-agent --profile {profile.name}{sets} --rebuild --export"
        shaped = any(k in BASE_AGENT_FIELDS for k, _ in profile.overrides)  # another agent than the profile's own
        record = (
            Path(path) / "inquire_train.json"
        )  # what the trainer recorded (a cache adopted from elsewhere has none)
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
    return 0


def _export(args) -> int:
    from .training.export_verl import export_verl
    from .profiles import apply_overrides, get_profile, parse_overrides

    profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
    info = export_verl(profile, args.out, splits=args.splits)
    print(json.dumps(info, indent=1))
    return 0


def _export_openvino(args) -> int:
    from .evaluation.engine import ExportError
    from .profiles import apply_overrides, get_profile, parse_overrides
    from .training.openvino import export_openvino

    profile = apply_overrides(get_profile(args.profile), parse_overrides(args.set))
    try:
        info = export_openvino(profile, _checkpoint(profile, args.checkpoint), args.out, rebuild=args.rebuild)
    except ExportError as exc:
        raise DataError(str(exc)) from None
    print(json.dumps(info, indent=1))
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (`inquire: error: ...`), exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from .world.values import TRAIN_VALUES

    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an error instead of one line",
    )
    p = _Parser(prog="inquire", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error instead of one line")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    b = sub.add_parser("build", help="generate InquireBench as an HF DatasetDict", parents=[debug])
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--tasks", type=int, default=400, help=f"number of tasks, 1 to {MAX_TASKS} (more with --large)")
    b.add_argument("--large", action="store_true", help=f"allow more than {MAX_TASKS} tasks")
    b.add_argument("--out", required=True, help="a new or empty folder, or one an earlier build wrote")
    b.add_argument(
        "--force", action="store_true", help="write into a folder that holds other files, leaving them alone"
    )
    b.add_argument(
        "--train-values",
        choices=TRAIN_VALUES,
        default="fixed",
        help="how training tasks draw slot values and phrasings (test and validation: the same either way)",
    )
    b.set_defaults(fn=_build)
    v = sub.add_parser("validate", help="check an InquireMobile-format .jsonl file", parents=[debug])
    v.add_argument("file")
    v.add_argument("--image-root", default=None)
    v.add_argument("--skip-bad", action="store_true", help="skip and count malformed rows instead of failing")
    v.add_argument(
        "--max-line-bytes",
        type=int,
        default=None,
        help="longest line accepted (default 1 MiB, or $INQUIRE_MAX_LINE_BYTES)",
    )
    v.set_defaults(fn=_validate)
    r = sub.add_parser(
        "run", help="execute the notebooks with papermill into papermill_runs/<profile>/<name>/", parents=[debug]
    )
    r.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    r.add_argument("--only", nargs="*", help="notebook prefixes, e.g. 01 02")
    r.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a profile field (repeatable), e.g. --set grpo_lr=1e-4 --set missed_penalty=2",
    )
    r.add_argument(
        "--name",
        default=None,
        help="run name (default: 'default', or the overrides, e.g. grpo_lr=0.0001); an existing run "
        "with the same settings is continued, one with other settings is refused",
    )
    r.add_argument(
        "--train",
        action="store_true",
        help="train the stages the plan trains past the profile's short runs (without it such a run stops first)",
    )
    r.set_defaults(fn=_run)
    pl = sub.add_parser(
        "plan", help="print what a run would do with each stage: find, install, or train it", parents=[debug]
    )
    pl.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    pl.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile field (repeatable)")
    pl.set_defaults(fn=_plan)
    rep = sub.add_parser("report", help="write a self-contained HTML report of a run's evaluation", parents=[debug])
    rep.add_argument("run_dir")
    rep.add_argument("-o", "--out", default="report.html")
    rep.add_argument("--failures-only", action="store_true")
    rep.add_argument("--checkpoints", nargs="+", help="only these checkpoints (default: all)")
    rep.add_argument("--outcomes", nargs="+", help="only steps with these outcomes, e.g. missed_inquiry")
    rep.add_argument(
        "--max-cards",
        type=int,
        default=200,
        help="step cards in all, shared across checkpoints, failures first (default 200)",
    )
    rep.set_defaults(fn=_report)
    fa = sub.add_parser(
        "failures",
        help="where a checkpoint's online episodes of a run first went wrong, and whether they came back",
        parents=[debug],
    )
    fa.add_argument("run_dir", help="a run folder, e.g. papermill_runs/small/default")
    fa.add_argument("checkpoint", help="a checkpoint the run played online (its eval/<name>/trajectories.jsonl)")
    fa.set_defaults(fn=_failures)
    su = sub.add_parser("summary", help="print a run's step, task and wall-time tables as Markdown", parents=[debug])
    su.add_argument("run_dir")
    su.add_argument("--ablations", action="store_true", help="list the ablations notebook's points in the tables too")
    su.set_defaults(fn=_summary)
    pr = sub.add_parser("profile", help="print a profile's settings", parents=[debug])
    pr.add_argument("name")
    pr.add_argument("--set", action="append", metavar="KEY=VALUE", help="show the profile with this override")
    pr.add_argument(
        "--explain",
        action="store_true",
        help="each field with its help, where its value came from (default, profile, override) and what it affects",
    )
    pr.set_defaults(fn=_profile)
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
    sh = sub.add_parser(
        "ship",
        help="ship a stage's result (or a run's last complete checkpoint) under assets/stages/ with its manifest",
        parents=[debug],
    )
    sh.add_argument(
        "stage",
        help="the stage whose result is shipped: sft_full, sft_weak, grpo_full, grpo_weak (and their seeds, "
        "e.g. grpo_weak_s1), grpo_task",
    )
    _run_settings(sh, "the overrides the stage was trained with")
    sh.add_argument(
        "--paused-seconds",
        type=float,
        default=0.0,
        help="seconds the run was stopped (e.g. SIGSTOP) in the sitting being shipped, left out of its training seconds",
    )
    sh.set_defaults(fn=_ship)
    ev = sub.add_parser(
        "evaluate",
        help="score checkpoints on the test split, step level and online (each once), and print the run's tables",
        parents=[debug],
    )
    ev.add_argument(
        "checkpoints",
        nargs="+",
        metavar="NAME[=FOLDER]",
        help="a checkpoint name of the run's artifacts (sft_full, grpo_weak, ...), or NAME=FOLDER for any folder",
    )
    _run_settings(ev, "evaluate under these settings, e.g. --set user_answers=any (the older user)")
    ev.add_argument(
        "--run", default=None, help="the run the metrics go to (default: the one the overrides name, else default)"
    )
    ev.add_argument(
        "--from-run",
        default="default",
        help="the run whose artifacts the checkpoint names are looked up in (default: default)",
    )
    ev.add_argument(
        "--level",
        choices=("step", "task", "both", "asking", "choose"),
        default="both",
        help="step level, task level, both, or asking: learned asking against a confidence threshold, both curves "
        "on the test steps from one HF pass (metrics/asking_<name>.json); or choose: the checkpoints played online "
        "on the validation tasks, the highest task SR chosen, with its test row (metrics/chain_choice.json)",
    )
    from .data.splits import SPLITS

    ev.add_argument(
        "--split",
        choices=tuple(SPLITS),
        default="test",
        help="the tasks played online: "
        + "; ".join(f"{k}, {v}" for k, v in SPLITS.items())
        + ". Another split than test plays at task level only, into the run split-<name>, and prints the "
        "generalisation table (each split against test, with the reference policies)",
    )
    ev.set_defaults(fn=_evaluate)
    lc = sub.add_parser(
        "learning-curve",
        help="stage 1's learning curve of asking: each SFT checkpoint's fork margin on the validation (or test) split",
        parents=[debug],
    )
    _run_settings(lc, "the overrides the SFT run was trained with")
    lc.add_argument("--name", default="sft_full", help="the run's output name under artifacts/<profile>/")
    lc.add_argument("--run", default=None, help="the SFT output folder itself (default: from --profile, --set, --name)")
    lc.add_argument(
        "--out",
        default=None,
        help="where the curve's JSON goes (default: learning_curve.json in the run, learning_curve.test.json for test)",
    )
    lc.add_argument(
        "--split",
        default="validation",
        choices=["validation", "test"],
        help="validation (choose the recipe) or test (confirm the chosen checkpoint; default validation)",
    )
    lc.add_argument(
        "--max-needless", type=float, default=0.05, help="the needless-ask rate the step ISR is read at (default 0.05)"
    )
    lc.add_argument(
        "--steps", default="", help="score only these checkpoints, e.g. 60,120,300 (default: every one the run kept)"
    )
    lc.set_defaults(fn=_learning_curve)
    e = sub.add_parser("export", help="write the GRPO prompts for another RL framework", parents=[debug])
    e.add_argument("--format", choices=["verl"], default="verl", help="verl / EasyR1 RL dataset parquet")
    e.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    e.add_argument("--out", required=True)
    e.add_argument("--splits", nargs="*", default=["train", "validation"], choices=["train", "validation", "test"])
    e.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    e.set_defaults(fn=_export)
    ov = sub.add_parser(
        "export-openvino",
        help="export a checkpoint for eval_engine openvino (cached by its content; reused unless it changed)",
        parents=[debug],
    )
    ov.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    ov.add_argument(
        "--checkpoint", default="base_agent", help="checkpoint folder or name (untrained, base_agent, sft_full, ...)"
    )
    ov.add_argument("--out", default=None, help="export folder (default: .cache/openvino/<profile>-<key>)")
    ov.add_argument("--rebuild", action="store_true", help="export again even when a matching export exists")
    ov.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ov.set_defaults(fn=_export_openvino)
    return p


def _run_settings(parser, set_help: str) -> None:
    """--profile (default small) and --set: the settings that name a trained run's folder."""
    parser.add_argument(
        "--profile", default=DEFAULT_PROFILE, help=f"the profile the run was trained with (default: {DEFAULT_PROFILE})"
    )
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help=set_help)


def exit_code(exc: BaseException) -> int:
    """2 for a usage error (an argument or a path that cannot be used), 1 for bad data and the rest."""
    from .runs.bounds import LineTooLong
    from .data.external import RecordError
    from .training.weights import CorruptWeightsError
    from .viz.inspector import PredictionFormatError

    if isinstance(
        exc, (RecordError, PredictionFormatError, CorruptWeightsError, LineTooLong, DataError, UnicodeDecodeError)
    ):
        return 1
    if isinstance(exc, (UsageError, OSError)):
        return 2
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("inquire: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader stopped early (`inquire profile cpu --explain | head`): not an error of ours; stdout
        # goes to /dev/null so that the interpreter's own flush at exit does not complain either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        code = exit_code(exc)
        known = code == 2 or isinstance(exc, (ValueError, OSError, DataError))
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
            text = f"{exc.filename}: {text}"
        if not known:
            text = f"internal error: {type(exc).__name__}: {text} (run with --debug for the traceback)"
        print(f"inquire {args.cmd}: {text}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
