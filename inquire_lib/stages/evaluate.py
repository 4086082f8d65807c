"""Evaluating named checkpoints, each evaluation once: a stored evaluation with the same key (the model's
content, the items, the settings, the code: `runs.readback`) is read back instead of run again."""

from __future__ import annotations

from ..data.benchmark import held_out_tasks, test_records, validation_tasks
from ..evaluation import episodes
from ..evaluation.operating_curve import operating_curve
from ..evaluation.steps import evaluate_model, evaluate_steps, reference_outputs
from ..profiles import Profile
from ..runs import readback
from ..runs.paths import run_dir, write_json_atomic
from ..runs.records import REFERENCES, metrics_file, read_json, read_jsonl
from ..training.checkpoints import ask_bias_of, available_checkpoints, checkpoint_path
from ..training.models import loaded, model_digest
from ..training.openvino import engine_loaded, engine_of, engine_precision
from .timed import timed
from .train import SHORT_SUFFIX


def played_digest(path: str | None, profile: Profile, bias: float | None = None) -> str:
    """What an evaluation plays: the model's digest (`training.models.model_digest`), with the checkpoint's
    ask bias (`bias`, else read from the checkpoint) when it has one, and the engine when it is not HF
    (`Profile.eval_engine`: another engine's greedy answers may differ in a token), with its precision when that
    is not f32 (`training.openvino.engine_precision`)."""
    bias = ask_bias_of(path) if bias is None else bias
    engine = engine_of(profile, bias)
    precision = engine_precision(profile) if engine != "hf" else "f32"
    if precision != "f32":
        engine = f"{engine}+precision={precision}"
    return (
        model_digest(path, profile)
        + (f"+ask_bias={bias!r}" if bias else "")
        + (f"+engine={engine}" if engine != "hf" else "")
    )


def evaluate_once(
    profile: Profile, kind: str, name: str, path: str | None, items_digest: str, out_root, evaluate, rescore=None
) -> dict:
    """The stored metrics of an evaluation with the same key (`runs.readback`), marked read back; else, given
    `rescore(raw_outputs, extra)`, another checkpoint's stored answers under the same key scored as `name`'s;
    else load the model at `path` on the engine `training.openvino.engine_of` names (HF, or the OpenVINO
    engine over the checkpoint's export), run `evaluate(model, processor, extra, ask_bias)` with the
    checkpoint's ask bias (`training.checkpoints.ask_bias_of`) and free the model. The key holds that bias
    and the engine: the same weights played at another operating point, or by another engine, differ."""
    bias = ask_bias_of(path)
    key = readback.eval_key(kind, played_digest(path, profile, bias), items_digest, profile)
    where = run_dir(profile, out_root)
    stored = readback.read_back(where, kind, name, key)
    if stored is not None:
        print(f"{name}: {kind} metrics read back (same model, items and settings)")
        return {**stored, "read_back": True}
    twin, first = readback.same_key(where, kind, key) if rescore is not None else (None, None)
    if twin is not None:
        print(f"{name}: the same model, items and settings as {twin}; its answers scored as {name}'s")
        answers = [rec["raw_output"] for _, rec in read_jsonl(where / "eval" / twin / readback.OUTPUTS[kind])]
        kept = ("eval_engine", "answers_at_token_cap", "generate_seconds", "ask_bias")
        carried = {k: first[k] for k in kept if k in first}
        return {**rescore(answers, {**carried, readback.KEY: key, "answers_from": twin}), "read_back": True}
    engine = engine_of(profile, bias)
    if engine != profile.eval_engine:
        print(f"{name}: ask bias {bias!r} is a logits processor, so it is evaluated on HF, not {profile.eval_engine}")
    with (loaded if engine == "hf" else engine_loaded)(profile, path) as m:
        return evaluate(m.model, m.processor, {readback.KEY: key, "eval_engine": engine}, bias)


@timed("evaluate steps")
def evaluate_checkpoint(
    profile: Profile,
    name: str,
    records: list[dict] | None = None,
    out_root=None,
    path: str | None = None,
    extra: dict | None = None,
) -> dict:
    """Load a named checkpoint (or `path`), evaluate it step by step on the test split (or `records`),
    free the model; returns the metrics, which also hold `extra`. Evaluated once (`evaluate_once`)."""
    records = records if records is not None else test_records(profile)
    path = path if path is not None else checkpoint_path(profile, name)
    return evaluate_once(
        profile,
        "step",
        name,
        path,
        readback.records_digest(records),
        out_root,
        lambda model, processor, key, bias: evaluate_model(
            name, model, processor, profile, records, out_root=out_root, extra={**(extra or {}), **key}, ask_bias=bias
        ),
        rescore=lambda answers, key: evaluate_steps(
            name, records, profile, answers, out_root, {**(extra or {}), **key}
        ),
    )


@timed("evaluate references")
def evaluate_references(profile: Profile, records: list[dict] | None = None, out_root=None) -> list[dict]:
    """Step metrics of the reference policies (`runs.records.REFERENCES`) on the test split (or `records`)."""
    records = records if records is not None else test_records(profile)
    return [
        evaluate_steps(name, records, profile, reference_outputs(name, records, profile, seed=profile.seed), out_root)
        for name in REFERENCES
    ]


@timed("evaluate tasks")
def evaluate_checkpoint_tasks(
    profile: Profile,
    name: str,
    tasks: list | None = None,
    out_root=None,
    path: str | None = None,
    progress: bool = False,
) -> dict:
    """Load a named checkpoint (or `path`), play the held-out tasks greedily (at the checkpoint's ask
    bias, `training.checkpoints.ask_bias_of`), free the model. Evaluated once (`evaluate_once`)."""
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    path = path if path is not None else checkpoint_path(profile, name)
    return evaluate_once(
        profile,
        "task",
        name,
        path,
        readback.tasks_digest(tasks),
        out_root,
        lambda model, processor, key, bias: episodes.evaluate_tasks(
            name,
            episodes.model_policy(model, processor, profile, ask_bias=bias),
            tasks,
            profile,
            out_root,
            extra=key,
            progress=progress,
        ),
    )


# the rates a chain's choice on validation shows for each checkpoint, the first deciding
CHOICE_RATES = ("success_rate", "isr", "unsafe_rate", "needless_rate")


@timed("chain choice")
def choose_on_validation(profile: Profile, names, out_root=None, paths: dict | None = None) -> dict:
    """The chain's checkpoint to report, chosen without the test split: each of `names` played online on the
    validation tasks (`data.benchmark.validation_tasks`; evaluated once, under the run's `validation/` folder),
    the highest task SR kept, a tie going to the earlier of `names` (`paths`: a folder for a name). Returns and writes
    `metrics/chain_choice.json`: each checkpoint's validation rates, the one chosen, and its test-split task
    metrics where the run has them."""
    where = run_dir(profile, out_root)
    tasks = validation_tasks(profile)
    paths = paths or {}
    played = {
        n: evaluate_checkpoint_tasks(profile, n, tasks, out_root=where / "validation", path=paths.get(n)) for n in names
    }
    rates = {n: {k: m["overall"][k] for k in CHOICE_RATES} for n, m in played.items()}
    chosen = max(names, key=lambda n: (rates[n]["success_rate"]["value"], -list(names).index(n)))
    test = metrics_file(where, "task", chosen)
    test = read_json(test)["overall"] if test.is_file() else None
    out = {
        "profile": profile.name,
        "validation_tasks": len(tasks),
        "rule": "the highest task SR on validation; a tie goes to the earlier checkpoint",
        "validation": rates,
        "chosen": chosen,
        "test": {k: test[k] for k in CHOICE_RATES} if test else None,
    }
    write_json_atomic(where / "metrics" / "chain_choice.json", out)
    return out


def scored_names(profile: Profile, names, level: str = "step") -> list[str]:
    """The checkpoints of `names` a notebook scores at `level` ("step" or "task") on this profile, in order: no
    short run (`stages.train.short_run`: a few steps to watch, not to score), the untrained model only where
    `eval_untrained`, the base agent only where stage 0 trains one, and online only the `task_checkpoints`
    (every one where that is empty)."""
    kept = [
        n
        for n in names
        if not n.endswith(SHORT_SUFFIX)
        and (n != "untrained" or profile.eval_untrained)
        and (n != "base_agent" or profile.base_agent_steps > 0)
    ]
    if level == "task" and profile.task_checkpoints:
        kept = [n for n in kept if n in profile.task_checkpoints]
    return kept


def evaluate_all_tasks(
    profile: Profile,
    names=("untrained", "sft_full", "grpo_full", "grpo_task"),
    tasks: list | None = None,
    out_root=None,
    progress: bool = False,
) -> list[dict]:
    """Task-level metrics of the named checkpoints that exist and the profile plays online (`scored_names`;
    others are skipped), then of the reference policies, all on the same held-out tasks."""
    tasks = tasks if tasks is not None else held_out_tasks(profile)
    have = set(available_checkpoints(profile))
    names = [n for n in scored_names(profile, names, "task") if n in have]
    out = [evaluate_checkpoint_tasks(profile, n, tasks, out_root, progress=progress) for n in names]
    return out + episodes.evaluate_reference_tasks(profile, tasks, out_root)


@timed("operating curves")
def operating_curves(
    profile: Profile, names, records: list[dict] | None = None, verify_biases=(4.0,), n_boot: int = 1000
) -> dict[str, dict]:
    """The inquiry operating curve of each named checkpoint on the test split (see
    `evaluation.operating_curve`): one greedy pass that reads the ask margin at the fork, plus one
    pass per verifying bias."""
    records = records if records is not None else test_records(profile)
    out = {}
    for name in names:
        with loaded(profile, checkpoint_path(profile, name)) as m:
            out[name] = operating_curve(
                m.model, m.processor, records, profile, verify_biases=verify_biases, n_boot=n_boot, seed=profile.seed
            )
    return out
