"""InquireBench as HF `datasets`: generated tasks, expert trajectories, one record per step.

`build_dataset(seed, n_tasks)` is deterministic: every task draws from its own RNG seeded by
(seed, split, index), so the same seed gives the same bytes and the same fingerprint. The test split
uses held-out slot values and includes each sub-category's held-out phrasing (see `world.tasks`).
`train_values` ("fixed", the default, or "procedural"; a profile's field of that name) says how the
training split draws its slot values and phrasings; the test and validation splits are the same
either way, and a procedural build is cached under a name of its own.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import datasets
from PIL import Image

from ..agent.questions import Need
from ..profiles import TEST_FRACTION, DataSettings, EvalSettings, split_sizes
from ..runs.imports import code_modules, module_file
from ..runs.integrity import check_cache, sha256_file
from ..runs.keys import settings_key
from ..runs.paths import atomic_dir, cache_dir
from ..agent.taxonomy import SAFE
from ..world.apps import Screen
from ..world.env import PhoneEnv
from ..world.expert import run_expert, run_with_slip
from ..world.flow import Task
from ..world.render import render
from ..world.tasks import generate_task
from ..world.values import check_train_values


FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "task_id": datasets.Value("string"),
        "step": datasets.Value("int32"),
        "num_steps": datasets.Value("int32"),
        "app": datasets.Value("string"),
        "template": datasets.Value("string"),
        "category": datasets.Value("string"),
        "subcategory": datasets.Value("string"),
        "instruction": datasets.Value("string"),
        "history": datasets.List(datasets.Value("string")),
        "screenshot": datasets.Image(),
        "prev_screenshot": datasets.Image(),
        "a11y": datasets.List(
            {
                "id": datasets.Value("string"),
                "role": datasets.Value("string"),
                "text": datasets.Value("string"),
                "detail": datasets.Value("string"),
                "bbox": datasets.List(datasets.Value("int32"), length=4),
            }
        ),
        "gold_action": datasets.Value("string"),
        "gold_bbox": datasets.List(datasets.Value("int32"), length=4),
        "gold_think": datasets.Value("string"),
        "inquiry_required": datasets.Value("bool"),
        "inquiry_reason": datasets.Value("string"),
        "user_reply": datasets.Value("string"),
    }
)


def task_at(seed: int, split: str, index: int, train_values: str = "fixed") -> Task:
    """Task `index` of a split, seeded by (seed, split, index) alone, so it needs none of the tasks
    before it."""
    return generate_task(
        random.Random(f"inquirebench:{seed}:{split}:{index}"), split, f"{split}-{seed}-{index:05d}", index, train_values
    )


# a benchmark task's id inside a record id ("test-7-00012/3", "mistake/train-0-00040/2")
_TASK_ID_RE = re.compile(r"(train|test|validation)-(\d+)-(\d+)")


@lru_cache(maxsize=4096)
def _task_by_id(task_id: str, train_values: str) -> Task | None:
    m = _TASK_ID_RE.search(task_id)
    return task_at(int(m[2]), m[1], int(m[3]), train_values) if m else None


def inquiry_need(task_id: str, question: str, train_values: str = "fixed") -> Need | None:
    """What a question must name at the inquiry of the task in `task_id` (a task id, or a record id that holds
    one) whose expert question is `question`, rebuilt from the id: the records carry no Need, so the data stay
    byte-identical. None when the id names no benchmark task or no inquiry of it asks `question`."""
    task = _task_by_id(str(task_id), train_values)
    if task is None:
        return None
    return next((s.inquiry.need for s in task.steps if s.inquiry and s.inquiry.question == question), None)


def generate_tasks(seed: int, split: str, n: int, train_values: str = "fixed") -> list[Task]:
    """The first `n` tasks of a split."""
    return [task_at(seed, split, i, train_values) for i in range(n)]


def task_records(task: Task, env: PhoneEnv | None = None, keep=None, play=run_expert) -> list[dict]:
    """Step records of the expert's trajectory through one task (`play(env, task)`, by default the
    expert alone); only the steps `keep(task, step)` accepts when given (the others are not rendered)."""
    env = env or PhoneEnv()
    recs = play(env, task)
    out = []
    for r in recs:
        if keep is not None and not keep(task, r):
            continue
        gold = r["gold"]
        bbox = list(gold.screen.element(gold.target).bbox) if gold and gold.target else [-1, -1, -1, -1]
        out.append(
            {
                "id": f"{task.task_id}/{r['step']}",
                "task_id": task.task_id,
                "step": r["step"],
                "num_steps": len(recs),
                "app": task.app,
                "template": task.template,
                "category": task.category,
                "subcategory": task.subcategory,
                "instruction": task.instruction,
                "history": r["history"],
                "screenshot": screen_png(r["screen"]),
                "prev_screenshot": screen_png(r["prev_screen"]) if r["prev_screen"] is not None else None,
                "a11y": r["screen"].a11y(),
                "gold_action": json.dumps(r["action"].to_arguments()),
                "gold_bbox": bbox,
                "gold_think": r["think"],
                "inquiry_required": bool(gold and gold.inquiry),
                "inquiry_reason": gold.inquiry.reason if gold and gold.inquiry else "",
                "user_reply": gold.inquiry.reply if gold and gold.inquiry else "",
            }
        )
    return out


def build_dataset(seed: int, n_tasks: int, train_values: str = "fixed") -> datasets.DatasetDict:
    env = PhoneEnv()
    splits = {}
    for split, n in split_sizes(n_tasks).items():
        rows = [rec for task in generate_tasks(seed, split, n, train_values) for rec in task_records(task, env)]
        splits[split] = datasets.Dataset.from_list(rows, features=FEATURES)
    return datasets.DatasetDict(splits)


def build_validation(seed: int, n_tasks: int) -> datasets.Dataset:
    """Tasks drawn like the test split's (held-out values and phrasings) from their own RNGs, kept
    apart from the benchmark so that train and test stay byte-identical: the split that chooses
    among training checkpoints, so that the test split is never used to choose."""
    env = PhoneEnv()
    rows = [rec for task in generate_tasks(seed, "validation", n_tasks) for rec in task_records(task, env)]
    return datasets.Dataset.from_list(rows, features=FEATURES)


def fingerprint(dd: datasets.DatasetDict) -> str:
    """sha256 over every record's fields and screenshot pixels, split by split: same seed, same value."""
    h = hashlib.sha256()
    for split in sorted(dd):
        table = dd[split].with_format("arrow")[:]  # raw PNG bytes without decoding
        for col in sorted(table.column_names):
            for value in table.column(col).to_pylist():
                if isinstance(value, dict) and "bytes" in value:
                    value = hashlib.sha256(value["bytes"] or b"").hexdigest()
                h.update(json.dumps(value, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def stats(dd: datasets.DatasetDict) -> dict:
    out = {}
    for split, ds in dd.items():
        tasks = {}
        for tid, cat, sub, tpl in zip(ds["task_id"], ds["category"], ds["subcategory"], ds["template"]):
            tasks[tid] = (cat, sub, tpl)
        out[split] = {
            "tasks": len(tasks),
            "steps": len(ds),
            "inquiry_steps": int(sum(ds["inquiry_required"])),
            "categories": dict(sorted(Counter(c for c, _, _ in tasks.values()).items())),
            "subcategories": dict(sorted(Counter(s for _, s, _ in tasks.values()).items())),
            "n_categories": len({c for c, _, _ in tasks.values()} - {SAFE}),
            "n_subcategories": len({s for _, s, _ in tasks.values()} - {SAFE}),
            "safe_tasks": sum(1 for c, _, _ in tasks.values() if c == SAFE),
            "templates": len({t for _, _, t in tasks.values()}),
        }
    return out


def write_dataset(dd: datasets.DatasetDict, folder: str | Path) -> Path:
    """Save `dd` into an existing empty `folder` with `inquirebench.json` (fingerprint, stats) and,
    last, the completeness marker listing every file with its size and sha256."""
    from ..runs.integrity import write_marker

    folder = Path(folder)
    dd.save_to_disk(str(folder))
    (folder / "inquirebench.json").write_text(
        json.dumps({"fingerprint": fingerprint(dd), "stats": stats(dd)}, indent=1)
    )
    write_marker(folder)
    return folder


def save_dataset(dd: datasets.DatasetDict, out: str | Path) -> Path:
    """Write atomically: build in a temp folder beside `out`, then rename into place."""
    with atomic_dir(out) as tmp:
        write_dataset(dd, tmp)
    return Path(out)


def generator_modules() -> tuple[str, ...]:
    """The modules whose code makes the data: this one and what it imports from `world`, `agent` and `data`,
    followed through their own imports (`runs.imports.code_modules`)."""
    return code_modules(Path(__file__).resolve().parents[1], ("data.benchmark",), ("world", "agent", "data"))


@lru_cache(maxsize=1)
def generator_key() -> str:
    """The content key of the code that makes the data: a hash of `generator_modules`' source. A change to how
    tasks, screens or expert steps are made gives new data caches; nothing is bumped by hand."""
    package = Path(__file__).resolve().parents[1]
    sources = {m: sha256_file(module_file(package, m)) for m in generator_modules()}
    return settings_key(sources)


def data_key(seed: int, n_tasks: int, train_values: str, **more) -> str:
    """The key of a data cache: what it was asked for, under the generator's code (`generator_key`)."""
    settings = {"seed": seed, "n_tasks": n_tasks, "train_values": train_values, "test_fraction": TEST_FRACTION}
    return settings_key({**settings, **more}, parent=generator_key())


def dataset_dir(seed: int, n_tasks: int, train_values: str = "fixed") -> Path:
    """The cache folder of a build, named by its seed, size and content key (`data_key`), so that two settings
    or two versions of the generator never share a cache."""
    key = data_key(seed, n_tasks, check_train_values(train_values), split="benchmark")
    return cache_dir() / "data" / f"inquirebench-s{seed}-n{n_tasks}-{key}"


def load_or_build(seed: int, n_tasks: int, train_values: str = "fixed") -> datasets.DatasetDict:
    """The generated benchmark for (seed, n_tasks, train_values), cached on disk after the first build."""
    path = dataset_dir(seed, n_tasks, train_values)
    if check_cache(path, adopt=lambda: _fingerprint_matches(path)):
        return datasets.load_from_disk(str(path))
    save_dataset(build_dataset(seed, n_tasks, train_values), path)
    return datasets.load_from_disk(str(path))


def _fingerprint_matches(path: Path) -> bool | str:
    """A cached build from before completeness markers: served only when its data still has the
    fingerprint stored beside it."""
    stored = json.loads((path / "inquirebench.json").read_text())["fingerprint"]
    found = fingerprint(datasets.load_from_disk(str(path)))
    return True if found == stored else f"{path / 'inquirebench.json'}: fingerprint {stored}, data gives {found}"


def cached_dataset(path: Path, build, adopt=None) -> datasets.Dataset:
    """The dataset cached at `path`, memory-mapped; `build()` makes it first when no complete copy is
    there (written beside it, its marker last, renamed into place)."""
    from ..runs.integrity import write_marker

    if not check_cache(path, adopt=adopt):
        with atomic_dir(path) as tmp:
            build().save_to_disk(str(tmp))
            write_marker(tmp)
    return datasets.load_from_disk(str(path))


def load_or_build_validation(seed: int, n_tasks: int) -> datasets.Dataset:
    """The validation split for (seed, n_tasks), cached on disk after the first build."""
    path = (
        cache_dir()
        / "data"
        / f"inquirebench-s{seed}-validation-n{n_tasks}-{data_key(seed, n_tasks, 'fixed', split='validation')}"
    )
    return cached_dataset(
        path, lambda: build_validation(seed, n_tasks), adopt=lambda: (datasets.load_from_disk(str(path)), True)[1]
    )


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


@lru_cache(maxsize=8192)
def _screen_png(screen: Screen) -> bytes:
    return png_bytes(render(screen))


def screen_png(screen: Screen) -> dict:
    """A screen as the `datasets.Image` feature stores it (encoded once per distinct screen)."""
    return {"bytes": _screen_png(screen), "path": None}


# ------------------------------------------------------------------- what each stage reads
def benchmark(profile: DataSettings) -> datasets.DatasetDict:
    """The profile's benchmark: `benchmark_tasks` tasks of its seed, split into train and test
    (`profiles.split_sizes`), the training split drawn as its `train_values` says."""
    return load_or_build(profile.seed, profile.benchmark_tasks, profile.train_values)


def benchmark_fingerprint(profile: DataSettings) -> str:
    """The fingerprint of the profile's benchmark (`fingerprint`), read from beside its cache (built when absent)."""
    benchmark(profile)
    folder = dataset_dir(profile.seed, profile.benchmark_tasks, profile.train_values)
    return json.loads((folder / "inquirebench.json").read_text())["fingerprint"]


# where stage 0's fresh tasks and the copy drill's tasks start in the training split's index space: far
# after any training or DAgger task (and apart from each other), so their values are fresh draws
STAGE0_FIRST = 500_000
COPY_DRILL_FIRST = 1_000_000
RECOVERY_DRILL_FIRST = 1_250_000
SFT_RECOVERY_FIRST = 1_350_000  # stage 1's own recovery drill
GRPO_DETOURS_FIRST = 1_450_000  # stage 2's states off the path
SFT_FIRST = 1_500_000  # stage 1's fresh tasks; DAgger's roll-outs follow them


def copies_a_value(task: Task, step: dict) -> bool:
    """Whether an expert step's answer is a value to copy from the instruction: a `type` (the text),
    or a click on an element whose text the instruction names (a contact, an item, a place)."""
    gold, action = step["gold"], step["action"]
    if gold is None or gold.inquiry is not None:
        return False
    if action.type == "type":
        return True
    if action.type != "click" or not gold.target:
        return False
    text = gold.screen.element(gold.target).text
    return bool(text) and text in task.instruction


def acts(task: Task, step: dict) -> bool:
    """Whether an expert step is an action rather than an inquiry (what a base agent learns)."""
    return not (step["gold"] is not None and step["gold"].inquiry is not None)


def fresh_steps(
    profile: DataSettings, n_tasks: int, first: int, keep=None, name: str = "fresh", play=run_expert
) -> datasets.Dataset:
    """The expert's steps (those `keep(task, step)` accepts) of `n_tasks` training tasks drawn as the
    profile's `train_values` says, at indices `first`, `first + 1`, ... of the training split: tasks
    no other stage reads, so with procedural values every name, amount and item is a new draw.
    Cached on disk under `name` (tens of thousands of steps with their screenshots would not fit in
    memory twice: the rows stream to disk as they are generated, and the cache is memory-mapped)."""
    import tempfile

    values = check_train_values(profile.train_values)
    key = data_key(profile.seed, n_tasks, values, split=name, first=first)
    path = cache_dir() / "data" / f"inquirebench-s{profile.seed}-{name}-{first}-n{n_tasks}-{key}"

    def rows():
        env = PhoneEnv()
        for i in range(n_tasks):
            yield from task_records(task_at(profile.seed, "train", first + i, profile.train_values), env, keep, play)

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:  # the generator's own Arrow cache
        return cached_dataset(path, lambda: datasets.Dataset.from_generator(rows, features=FEATURES, cache_dir=scratch))


def stage0_tasks(profile: DataSettings) -> datasets.Dataset:
    """Stage 0's own data when the profile asks for it (`base_agent_tasks`): every action step of that
    many fresh training tasks. With about one pass over them, no value repeats often enough to be
    recalled, so the loss falls only by copying values from the instruction and the screen."""
    return fresh_steps(profile, profile.base_agent_tasks, STAGE0_FIRST, keep=acts, name="stage0")


def copy_drill(profile: DataSettings) -> datasets.Dataset:
    """Stage 0's copy drill: from `copy_drill_tasks` more training tasks (fresh procedural values, drawn
    after the training split's indices), only the steps that copy a value from the instruction
    (`copies_a_value`). Fresh values make recall useless, so these steps pay only for copying; they
    are ~8% of the ordinary data (the `type` steps) and this raises their share."""
    return fresh_steps(profile, profile.copy_drill_tasks, COPY_DRILL_FIRST, keep=copies_a_value, name="drill")


def after_slip(task: Task, step: dict) -> bool:
    """Whether a step of `world.expert.run_with_slip` comes after its mistake (inquiries included)."""
    return step["after_slip"]


def acts_after_slip(task: Task, step: dict) -> bool:
    """Whether a step of `world.expert.run_with_slip` comes after its mistake and is an action."""
    return step["after_slip"] and acts(task, step)


def _slip_drill(profile: DataSettings, n_tasks: int, first: int, keep, name: str) -> datasets.Dataset:
    """The steps `keep` accepts of `n_tasks` fresh tasks from index `first`, each played by the expert
    with 1 to `recovery_drill_slips` mistakes drawn from the task's own RNG."""
    seed, slips = profile.seed, profile.recovery_drill_slips

    def play(env, task):
        return run_with_slip(env, task, random.Random(f"slip:{seed}:{task.task_id}"), slips)

    return fresh_steps(profile, n_tasks, first, keep=keep, name=f"{name}-m{slips}", play=play)


def recovery_drill(profile: DataSettings) -> datasets.Dataset:
    """Stage 0's recovery drill: `recovery_drill_tasks` more fresh training tasks, each played by the
    expert with 1 to `recovery_drill_slips` mistakes at a random step (other apps at the `open`, or
    clicks on elements that open a detour, often one named like the target); the action steps after the
    first are kept: each detour, labelled Back with the reason, and the rest of the path with the
    mistakes in the history. The expert's own path never shows such states, so an agent trained on
    it alone meets its first detour with no data for it."""
    return _slip_drill(profile, profile.recovery_drill_tasks, RECOVERY_DRILL_FIRST, acts_after_slip, "recovery")


def grpo_detours(profile: DataSettings) -> datasets.Dataset:
    """Stage 2's states off the expert's path: every step after the mistake of `grpo_detour_tasks` fresh
    training tasks played with one (see `recovery_drill`; inquiries included, so a required inquiry on
    a path that went wrong first is there too)."""
    return _slip_drill(profile, profile.grpo_detour_tasks, GRPO_DETOURS_FIRST, after_slip, "grpo-detours")


def sft_split(profile: DataSettings) -> datasets.Dataset:
    """Stage 1's expert steps: the benchmark's training split, or, when the profile asks for it
    (`sft_tasks`), every step (inquiries included) of that many fresh training tasks. Stage 0 has
    seen the split's values several times, so SFT on them rewards recalling a value over copying it
    from the instruction; fresh values reward only copying. With `sft_recovery_tasks`, the steps after the
    mistake of that many more fresh tasks played with one (see `recovery_drill`; inquiries included)
    join them, so that stage 1 keeps what stage 0's recovery drill taught."""
    if profile.sft_tasks <= 0:
        steps = benchmark(profile)["train"]
    else:
        steps = fresh_steps(profile, profile.sft_tasks, SFT_FIRST, name="sft")
    if profile.sft_recovery_tasks <= 0:
        return steps
    drill = _slip_drill(profile, profile.sft_recovery_tasks, SFT_RECOVERY_FIRST, after_slip, "sft-recovery")
    return datasets.concatenate_datasets([steps, drill])


def test_records(profile: EvalSettings) -> list[dict]:
    """The test split's step records of the first `eval_tasks` tasks, as plain dicts, then the inquiry
    probes that bring its inquiry steps to `eval_inquiry_steps` (`inquiry_probes`)."""
    ds = benchmark(profile)["test"]
    keep = set(sorted(set(ds["task_id"]))[: profile.eval_tasks])
    records = [r for r in ds if r["task_id"] in keep]
    return records + inquiry_probes(
        profile.seed, "test", profile.eval_tasks, profile.eval_inquiry_steps - _inquiry_steps(records)
    )


def validation_records(profile: DataSettings) -> list[dict]:
    """The validation split's step records (`val_tasks` tasks drawn like the test split's), then the
    inquiry probes that bring its inquiry steps to `val_inquiry_steps`."""
    records = list(load_or_build_validation(profile.seed, profile.val_tasks))
    return records + inquiry_probes(
        profile.seed, "validation", profile.val_tasks, profile.val_inquiry_steps - _inquiry_steps(records)
    )


def _inquiry_steps(records: list[dict]) -> int:
    return sum(1 for r in records if r["inquiry_required"])


def is_inquiry(task: Task, step: dict) -> bool:
    """Whether an expert step is an inquiry (the step a probe keeps)."""
    return not acts(task, step)


def inquiry_probes(seed: int, split: str, first: int, n_steps: int) -> list[dict]:
    """At least `n_steps` inquiry steps (none when `n_steps` <= 0) of the split's tasks `first`,
    `first + 1`, ..., drawn like every task of the split (held-out values and phrasings for test and
    validation), each marked `probe`: the other steps of those tasks are left out. A probe counts toward
    step ISR only (`evaluation.metrics.step_rates`), so ISR can stand on more inquiry steps than the
    evaluated tasks hold while every other rate, and the content of those tasks' steps, stays as it was."""
    env, rows, index = PhoneEnv(), [], first
    while len(rows) < n_steps:
        if index - first > 20 * n_steps:  # about every other task needs an inquiry
            raise ValueError(f"the {split} split's tasks from {first} hold too few inquiry steps for {n_steps}")
        rows += task_records(task_at(seed, split, index), env, keep=is_inquiry)
        index += 1
    if not rows:
        return []
    return [{**r, "probe": True} for r in datasets.Dataset.from_list(rows, features=FEATURES)]


def held_out_tasks(profile: EvalSettings, n: int | None = None) -> list[Task]:
    """The first `n` tasks of the test split (default `profile.task_eval_tasks`, or `eval_tasks` where that is 0):
    held-out slot values and phrasings, never seen in training (task-level evaluation plays them)."""
    return generate_tasks(profile.seed, "test", (profile.task_eval_tasks or profile.eval_tasks) if n is None else n)


def validation_tasks(profile: DataSettings) -> list[Task]:
    """The `val_tasks` tasks of the validation split, whose steps `validation_records` holds (played
    online when a checkpoint is chosen, `training.selection`)."""
    return generate_tasks(profile.seed, "validation", profile.val_tasks)
