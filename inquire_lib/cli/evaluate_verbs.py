"""The verbs that score checkpoints: `inquire evaluate` (on the test split, step level and online; `--level asking`
and `--level choose`; `--split` for another split) and `inquire learning-curve` (each SFT checkpoint's fork margin)."""

from __future__ import annotations

import os
from pathlib import Path

from .common import UsageError, run_settings, settings_or_usage


def register(sub, debug) -> None:
    _add_evaluate(sub, debug)
    _add_learning_curve(sub, debug)


def _add_evaluate(sub, debug) -> None:
    from ..data.splits import SPLITS

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
    run_settings(ev, "evaluate under these settings, e.g. --set user_answers=any (the older user)")
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


def _evaluate(args) -> int:
    """Named checkpoints (or folders) on the test split, step by step and online in PhoneEnv, into the run that
    `--run` or the overrides name (each evaluated once: a stored one with the same key is read back); then the
    run's step and task tables. Checkpoint names are looked up in `--from-run`'s artifacts (default: the
    current run's), so the same checkpoints can be scored under other settings, e.g. `--set user_answers=any`."""
    from ..runs.paths import RUN_NAME, run_dir, run_named_by_overrides
    from ..runs.summary import step_markdown, task_markdown
    from ..stages.compare_asking import asking_curves
    from ..stages.evaluate import evaluate_checkpoint, evaluate_checkpoint_tasks
    from ..training.checkpoints import checkpoint_path

    profile = settings_or_usage(args.profile, args.set)
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
        from ..viz.plots import asking_auc_table

        print("When to ask (test steps; AUC with bootstrap 95% CIs; step ISR learned / confidence):")
        print(asking_auc_table(asking).to_string())
        print("\n".join(c["verdict"] for c in asking.values()))
    return 0


def _choose(profile, paths: dict) -> int:
    """`inquire evaluate NAME... --level choose`: the chain's choice on validation, printed."""
    from ..runs.summary import rate
    from ..stages import choose_on_validation

    choice = choose_on_validation(profile, list(paths), paths=paths)
    print(f"On {choice['validation_tasks']} validation tasks online (Wilson 95% CIs): {choice['rule']}")
    for name, rates in choice["validation"].items():
        print(f"  {name}: " + ", ".join(f"{k} {rate(v)}" for k, v in rates.items()))
    test = choice["test"]
    tail = ", ".join(f"{k} {rate(v)}" for k, v in test.items()) if test else "not played on the test split in this run"
    print(f"chosen: {choice['chosen']}; on the test split: {tail}")
    return 0


def _evaluate_split(profile, paths: dict, split: str) -> int:
    """`inquire evaluate NAME... --split S`: the checkpoints and the reference policies played online on split S,
    into the run `split-S` beside the one the names come from, then the generalisation table."""
    from ..data.splits import split_fingerprint, split_tasks
    from ..evaluation.episodes import evaluate_reference_tasks
    from ..runs.paths import RUN_NAME, run_dir
    from ..runs.summary import generalisation_markdown
    from ..stages.evaluate import evaluate_checkpoint_tasks

    base = run_dir(profile)
    tasks = split_tasks(profile, split)
    print(f"split {split}: {len(tasks)} tasks, fingerprint {split_fingerprint(tasks)}")
    os.environ[RUN_NAME[0]] = f"split-{split}"
    for name, path in paths.items():
        evaluate_checkpoint_tasks(profile, name, tasks=tasks, path=path)
    evaluate_reference_tasks(profile, tasks)
    print(generalisation_markdown(base, {split: run_dir(profile)}, list(paths) + ["always_act", "expert"]))
    return 0


def _add_learning_curve(sub, debug) -> None:
    lc = sub.add_parser(
        "learning-curve",
        help="stage 1's learning curve of asking: each SFT checkpoint's fork margin on the validation (or test) split",
        parents=[debug],
    )
    run_settings(lc, "the overrides the SFT run was trained with")
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


def _learning_curve(args) -> int:
    """Stage 1's learning curve of asking: the fork margin of each checkpoint of an SFT run on the
    validation split (`stages.learning_curve`), as JSON beside the run and as a Markdown table."""
    from ..runs.paths import artifacts_dir, run_named_by_overrides
    from ..stages.learning_curve import curve_table, learning_curve
    from ..training.sft import base_agent_path

    profile = settings_or_usage(args.profile, args.set)
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
