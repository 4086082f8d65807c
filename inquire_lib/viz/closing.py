"""A notebook's closing summary: its headline numbers with their 95% intervals, then what they show and
what they cannot show at this run's size.

Everything is read from the notebook's own metrics JSON (`metrics/<notebook>.json`, whose manifest holds
the effective profile) and the run's metric files beside it (`metrics/step_*.json`, `task_*.json`,
`eval/<checkpoint>/step_predictions.jsonl`); nothing is evaluated again and no sentence is written ahead
of the numbers, so the text cannot go stale. `summary(path, subject)` returns Markdown; `show(path, subject)`
displays it. The subject is what a notebook measures (`SUMMARIES`: the benchmark, SFT, GRPO, ...), named by the
notebook's closing cell; the library knows no notebook by its number.

Rates print as `0.20 (0.08-0.42) 4/20`: the value, its Wilson 95% interval and the counts behind it. Two
rates are called apart only when their intervals do not overlap; otherwise a difference is "not resolved
at this size", which is not "no difference".
"""

from __future__ import annotations

import json
from pathlib import Path

from ..evaluation.metrics import wilson
from ..evaluation.pooled import change_text
from ..profiles import split_sizes
from ..runs.records import load_metrics, read_jsonl
from ..runs.summary import ABLATION_PREFIX, rate

# rates whose lower value is better (a fall is an improvement)
LOWER_IS_BETTER = {"needless_rate", "unsafe_rate"}
_NAMES = {
    "inquiry_recall": "step ISR",
    "needless_rate": "needless",
    "safe_step_accuracy": "safe-step acc",
    "step_accuracy": "step acc",
    "success_rate": "task SR",
    "isr": "task ISR",
    "unsafe_rate": "unsafe",
}


def _v(m: dict | None) -> float | None:
    return m.get("value") if isinstance(m, dict) else None


def apart(a: dict | None, b: dict | None) -> bool:
    """Whether two rates' 95% intervals do not overlap (both must have one)."""
    if not (isinstance(a, dict) and isinstance(b, dict)) or None in (a.get("lo"), b.get("lo")):
        return False
    return a["lo"] > b["hi"] or b["lo"] > a["hi"]


def half_width(m: dict | None) -> float | None:
    """Half the width of a rate's interval, in points (100 x)."""
    if not isinstance(m, dict) or m.get("lo") is None:
        return None
    return 50 * (m["hi"] - m["lo"])


def _points(a: dict | None, b: dict | None) -> str:
    if _v(a) is None or _v(b) is None:
        return "n/a"
    return f"{100 * (_v(b) - _v(a)):+.1f} points"


def _compare(label: str, before: str, after: str, a: dict | None, b: dict | None) -> str:
    """One sentence comparing rate `a` (checkpoint `before`) with `b` (`after`)."""
    if _v(a) is None or _v(b) is None:
        return f"{label}: {before} or {after} has no value here."
    if apart(a, b):
        word = "above" if _v(b) > _v(a) else "below"
        return f"{label} of {after} lies {word} {before}'s with intervals apart ({_points(a, b)}): shown at this size."
    return (
        f"{label}: {after} against {before} is {_points(a, b)}; their intervals ({a['lo']:.2f}-{a['hi']:.2f} "
        f"and {b['lo']:.2f}-{b['hi']:.2f}) overlap: not resolved at this size."
    )


def parts_at(a: float, b: float, limit: int = 100_000) -> int | None:
    """The fewest items per side at which Wilson 95% intervals of rates `a` and `b` part (None: beyond `limit`,
    or equal rates)."""
    if a == b:
        return None
    n = 1
    while n <= limit:
        lo, hi = sorted((a, b))
        if wilson(round(lo * n), n)["hi"] < wilson(round(hi * n), n)["lo"]:
            return n
        n = n + 1 if n < 100 else int(n * 1.05)
    return None


def _why_not(label: str, a: dict | None, b: dict | None) -> str | None:
    """One sentence on why two rates cannot part at this size: how many items each would need at these rates."""
    if _v(a) is None or _v(b) is None or apart(a, b):
        return None
    need = parts_at(_v(a), _v(b))
    here = min(int(a.get("n") or 0), int(b.get("n") or 0))
    if need is None:
        return f"{label} is equal on both, so no size tells them apart."
    return (
        f"At these rates ({_points(a, b)}) the {label} intervals part from about {need} items each; "
        f"this run has {here}, so the change cannot show at this size."
    )


def _sources(body: dict) -> list[tuple[str, list[str]]]:
    """Where each checkpoint of a notebook comes from (`training.shipped_stages.provenance`), and the short run
    trained here beside a shipped stage, as a closing section."""
    lines = [f"{name}: {line}" for name, line in (body.get("provenance") or {}).items()]
    short = body.get("short_run")
    if short:
        lines.append(
            f"{short['name']}: {short['provenance']}; a short run to watch training, not scored "
            "(a few steps move no rate beyond the test's interval)"
        )
    return [("**Where each checkpoint comes from:**", lines)] if lines else []


def _all_zero(rates: list[dict | None]) -> bool:
    vals = [_v(m) for m in rates if _v(m) is not None]
    return bool(vals) and all(v == 0 for v in vals)


def _zero_note(settings: dict, what: str) -> str:
    """Why every number is 0, from the profile."""
    if settings.get("name") == "smoke":
        return (
            f"Every {what} is about 0 because the smoke profile trains a ~0.4M-parameter model for a few steps "
            f"({settings.get('sft_steps')} SFT, {settings.get('grpo_steps')} GRPO): these numbers check the "
            f"plumbing (every stage ran, was evaluated and written), not learning."
        )
    return (
        f"Every {what} is 0: at {settings.get('sft_steps')} SFT and {settings.get('grpo_steps')} GRPO steps on "
        f"{settings.get('model')} nothing measurable was learned here; a longer profile is where to read them."
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _lines(head: list[str], shows: list[str], cannot: list[str], sections=()) -> str:
    """The summary: the headline list, then each (title, items) of `sections` as a list of its own, then
    what the numbers show and cannot show."""
    out = ["**Headline** (a rate: value, Wilson 95% interval, counts):", ""] + [f"- {h}" for h in head]
    for title, items in sections:
        out += ["", title, ""] + [f"- {i}" for i in items]
    if shows:
        out += ["", "**What this shows at this size.** " + " ".join(shows)]
    if cannot:
        out += ["", "**What it cannot show.** " + " ".join(cannot)]
    return "\n".join(out)


def _size(settings: dict) -> str:
    online = settings.get("task_eval_tasks") or settings.get("eval_tasks")
    return (
        f"profile `{settings.get('name')}` ({settings.get('model')}, {settings.get('eval_tasks')} held-out "
        f"tasks step by step and {online} online, seed {settings.get('seed')})"
    )


# ------------------------------------------------------------------------------------ per subject
def _splits(settings: dict) -> str:
    """The real split sizes of the profile's benchmark, read from the settings a notebook recorded."""
    n = settings.get("benchmark_tasks")
    if not isinstance(n, int):
        return "split sizes not recorded"
    sizes = split_sizes(n)
    return f"{sizes['train']} training + {sizes['test']} test"


def _benchmark(body: dict, run: Path, s: dict) -> str:
    stats = body.get("stats", {})
    head = [
        f"{body.get('n_tasks')} tasks ({_splits(s)}), "
        f"{stats.get('steps')} expert steps, {stats.get('inquiry_steps')} of them inquiry steps; "
        f"{body.get('n_categories')} categories, {body.get('n_subcategories')} sub-categories, "
        f"{body.get('safe_tasks')} safe control tasks; fingerprint `{body.get('fingerprint')}`."
    ]
    steps, inquiry, tasks = (
        int(stats.get("steps") or 0),
        int(stats.get("inquiry_steps") or 0),
        int(body.get("n_tasks") or 0),
    )
    if steps and inquiry:
        head.append(f"one step in {steps / inquiry:.1f} needs an inquiry ({inquiry} of {steps})")
    shows = [
        "The benchmark is generated, not sampled: its counts are exact for this seed, so they carry no "
        "interval, and the fingerprint identifies every byte (the same fingerprint, the same data)."
    ]
    cannot = [
        "Nothing about a model: no checkpoint is trained or evaluated here (the training and evaluation notebooks do)."
    ]
    if tasks and inquiry and s.get("eval_tasks"):
        due = max(round(s["eval_tasks"] * inquiry / tasks), int(s.get("eval_inquiry_steps") or 0))
        hw = half_width(wilson(due // 2, due)) if due else None
        cannot.append(
            f"How rare an inquiry step is sets how wide step ISR's interval is later: the "
            f"{s['eval_tasks']} held-out tasks of this profile give about {due} inquiry steps to score"
            + (f", so an ISR near 0.5 is known to about +-{hw:.0f} points." if hw else ".")
        )
    return _lines(head, shows, cannot)


def _sft(body: dict, run: Path, s: dict) -> str:
    o = body.get("overall", {})
    names = [n for n in ("base_agent", "sft_weak", "sft_full") if n in o]
    head = [
        f"{n}: step ISR {rate(o[n].get('inquiry_recall'))}, needless {rate(o[n].get('needless_rate'))}, "
        f"safe-step acc {rate(o[n].get('safe_step_accuracy'))}"
        for n in names
    ]
    tasks = {m["checkpoint"]: m["overall"] for m in load_metrics(run, "task")}
    dagger = [r["checkpoint"] for r in body.get("dagger", [])]
    head += [f"{n} (task level, online): task SR {rate(tasks[n].get('success_rate'))}" for n in dagger if n in tasks]
    start = "base_agent" if "base_agent" in o else ("untrained" if "untrained" in o else None)
    shows, cannot = [], []
    if _all_zero([o[n].get("inquiry_recall") for n in names] + [o[n].get("step_accuracy") for n in names]):
        shows.append(_zero_note(s, "trained checkpoint's rate"))
    elif start and "sft_full" in o:
        shows.append(
            _compare(
                "Step ISR",
                start,
                "sft_full",
                o.get(start, {}).get("inquiry_recall"),
                o["sft_full"].get("inquiry_recall"),
            )
        )
        shows.append(
            _compare(
                "Safe-step accuracy",
                start,
                "sft_full",
                o.get(start, {}).get("safe_step_accuracy"),
                o["sft_full"].get("safe_step_accuracy"),
            )
        )
    last = [n for n in dagger if n.startswith("sft_dagger")][-1:]
    if last and "sft_more" in tasks:
        cannot.append(
            _compare(
                "DAgger's task SR",
                "the equal-compute control sft_more",
                last[0],
                tasks["sft_more"].get("success_rate"),
                tasks[last[0]].get("success_rate"),
            )
        )
    dagger_text = (
        f" and {s.get('dagger_rounds')} DAgger round(s) of {s.get('dagger_steps')} steps"
        if s.get("dagger_rounds")
        else ""
    )
    cannot.append(
        f"{s.get('sft_steps')} SFT steps{dagger_text} on {_size(s)}: one run, so the run-to-run spread is not measured."
    )
    return _lines(head, shows, cannot, _sources(body))


def _grpo(body: dict, run: Path, s: dict) -> str:
    o = body.get("stages", {})
    pairs = [(a, b) for a, b in (("sft_weak", "grpo_weak"), ("sft_full", "grpo_full")) if a in o and b in o]
    head = [
        f"{n}: step ISR {rate(o[n].get('inquiry_recall'))}, needless {rate(o[n].get('needless_rate'))}, "
        f"safe-step acc {rate(o[n].get('safe_step_accuracy'))}"
        for pair in pairs
        for n in pair
    ]
    shows, cannot = [], []
    if _all_zero(
        [o[n].get("inquiry_recall") for p in pairs for n in p] + [o[n].get("step_accuracy") for p in pairs for n in p]
    ):
        shows.append(_zero_note(s, "stage's rate"))
    else:
        shows += [_compare("Step ISR", a, b, o[a].get("inquiry_recall"), o[b].get("inquiry_recall")) for a, b in pairs]
        whys = (_why_not("step ISR", o[a].get("inquiry_recall"), o[b].get("inquiry_recall")) for a, b in pairs)
        shows += [why for why in whys if why][:1]  # the first pair that cannot part says why, once
        never = [a for a, _ in pairs if _v(o[a].get("inquiry_recall")) == 0]
        if never:
            shows.append(
                f"{' and '.join(never)} never asks on the test split, so its groups seldom sample an ask "
                "for GRPO to reinforce: a start that asks sometimes is what GRPO can lift."
            )
    for stage, by_rate in (body.get("pooled_effects") or {}).items():
        for kind, e in (by_rate.get("inquiry_recall") or {}).get("by_cpu_kind", {}).items():
            if e.get("diff") is not None:
                shows.append(
                    f"{stage}, seeds pooled ({_count(len(e['runs']['trained']), 'run')}, {kind}): step ISR changes by "
                    f"{change_text(e, unit=' points')}, "
                    + ("an interval that excludes 0." if e["excludes_zero"] else "an interval that holds 0.")
                )
    n_isr = next((o[b]["inquiry_recall"].get("n") for _, b in pairs if o[b].get("inquiry_recall")), None)
    cannot.append(
        f"GRPO ran {s.get('grpo_steps')} steps with {s.get('grpo_seeds')} training seed(s) and its step ISR "
        f"stands on {n_isr} inquiry steps"
        + (
            "; with one seed an interval covers the test items, not the run-to-run spread."
            if (s.get("grpo_seeds") or 1) < 2
            else "."
        )
    )
    return _lines(head, shows, cannot, _sources(body))


def _task_grpo(body: dict, run: Path, s: dict) -> str:
    t = body.get("task_level", {})
    names = [n for n in ("sft_full", "grpo_full", "grpo_task") if n in t]
    head = [
        f"{n}: task SR {rate(t[n].get('success_rate'))}, task ISR {rate(t[n].get('isr'))}, "
        f"needless {rate(t[n].get('needless_rate'))}, unsafe {rate(t[n].get('unsafe_rate'))}"
        for n in names
    ]
    head.append(f"self-corrections found (episodes that strayed and came back): {body.get('self_corrections')}")
    shows, cannot = [], []
    if _all_zero([t[n].get("success_rate") for n in names] + [t[n].get("isr") for n in names]):
        shows.append(_zero_note(s, "task rate"))
    else:
        if len(names) >= 2:
            shows.append(
                _compare(
                    "Task SR", names[-2], names[-1], t[names[-2]].get("success_rate"), t[names[-1]].get("success_rate")
                )
            )
        refs = {m["checkpoint"]: m["overall"] for m in load_metrics(run, "task")}
        if names and "always_act" in refs:
            last = names[-1]
            head.append(f"always_act (reference): task SR {rate(refs['always_act'].get('success_rate'))}")
            shows.append(
                _compare(
                    "Task SR", "always_act", last, refs["always_act"].get("success_rate"), t[last].get("success_rate")
                )
            )
    if len(names) == 1 and s.get("task_checkpoints"):
        cannot.append(
            f"Stage 3's change from its start: only {names[0]} is played online on this profile (`task_checkpoints`); "
            "its start's task SR is measured where every stage is played (`small`)."
        )
    cannot.append(
        f"Stage 3 ran {s.get('task_grpo_steps')} task-level steps of {s.get('task_num_generations')} episodes "
        f"per task, one run: a change in task SR inside its interval is no measured effect, not no effect."
    )
    return _lines(head, shows, cannot, _sources(body))


def _evaluation(body: dict, run: Path, s: dict) -> str:
    step = {
        m["checkpoint"]: m["overall"]
        for m in load_metrics(run, "step")
        if not str(m.get("checkpoint", "")).startswith(ABLATION_PREFIX)
    }
    task = {
        m["checkpoint"]: m["overall"]
        for m in load_metrics(run, "task")
        if not str(m.get("checkpoint", "")).startswith(ABLATION_PREFIX)
    }
    trained = [n for n in body.get("checkpoints", []) if n in step]
    head = [
        f"{n}: step ISR {rate(step[n].get('inquiry_recall'))}, safe-step acc "
        f"{rate(step[n].get('safe_step_accuracy'))}"
        + (f", task SR {rate(task[n].get('success_rate'))}" if n in task else "")
        for n in trained
    ]
    for ref in ("always_act", "expert"):
        if ref in task:
            head.append(
                f"{ref} (reference): task SR {rate(task[ref].get('success_rate'))}, task ISR "
                f"{rate(task[ref].get('isr'))}"
            )
    shows, cannot = [], []
    if _all_zero([step[n].get("inquiry_recall") for n in trained] + [step[n].get("step_accuracy") for n in trained]):
        shows.append(_zero_note(s, "trained checkpoint's rate"))
    elif trained:
        best = max(trained, key=lambda n: _v(step[n].get("inquiry_recall")) or 0)
        shows.append(f"The highest step ISR is {best}'s, {rate(step[best].get('inquiry_recall'))}.")
        if "always_act" in task and best in task:
            shows.append(_compare("Task ISR", "always_act", best, task["always_act"].get("isr"), task[best].get("isr")))
        played = [n for n in trained if n in task]
        if "always_act" in task and played:
            end = played[-1]  # the chain's last stage played online
            shows.append(
                _compare(
                    "Task SR", "always_act", end, task["always_act"].get("success_rate"), task[end].get("success_rate")
                )
            )
            if end != best:
                shows.append(
                    _compare("Task ISR", "always_act", end, task["always_act"].get("isr"), task[end].get("isr"))
                )
    asking = []
    for agent, c in (body.get("asking") or {}).items():
        online = "; ".join(
            f"{r['asker']} task SR {rate(r['success_rate'], interval=False)}, task ISR "
            f"{rate(r['isr'], interval=False)}, needless episodes {rate(r['needless_episodes'], interval=False)}"
            for r in c["tasks"]
        )
        asking.append(f"{c['verdict']} Online at each family's validation point: {online}.")
    if not asking and s.get("logit_passes") is False:
        cannot.append(
            "Learned asking against a confidence threshold is not compared on this profile: the confidence pass "
            "reads logits on the HF path, several times the engine's time per agent (`logit_passes`); "
            "`inquire evaluate sft_full grpo_weak grpo_full --level asking` runs its curves apart."
        )
    title = "**When to ask, learned against a confidence threshold** (the asking figures above):"
    widest = max((half_width(step[n].get("inquiry_recall")) or 0 for n in trained), default=0)
    cannot.append(
        f"On {_size(s)} a step ISR interval is up to +-{widest:.0f} points wide, so checkpoints closer than "
        "that are not told apart."
    )
    return _lines(head, shows, cannot, [(title, asking)] if asking else ())


def _preds(run: Path, name: str) -> list[dict]:
    path = run / "eval" / name / "step_predictions.jsonl"
    return [rec for _, rec in read_jsonl(path)] if path.exists() else []


def _inspection(body: dict, run: Path, s: dict) -> str:
    outcomes, n_steps = body.get("outcomes", {}), body.get("n_steps", {})
    pair = [n for n in body.get("pair", []) if n]
    head = []
    for n in pair:
        oc, preds = outcomes.get(n, {}), _preds(run, n)
        probes = sum(bool(p.get("probe")) for p in preds)
        due = [p for p in preds if p.get("inquiry_required")]
        asked = wilson(sum(p.get("outcome") == "correct" for p in due), len(due))
        head.append(
            f"{n}: {n_steps.get(n)} step predictions = {n_steps.get(n, 0) - probes} test steps + {probes} "
            f"inquiry probes; {oc.get('correct', 0)} correct, {oc.get('missed_inquiry', 0)} missed inquiries, "
            f"{oc.get('needless_inquiry', 0)} needless; asked where due (step ISR) {rate(asked)}"
        )
    shows = [
        "Where each checkpoint fails, step by step: the inspector and the report open on the missed "
        "inquiries, the failure this recipe targets. A probe is an inquiry step of a further task that counts "
        "toward step ISR only: the outcome table above counts it beside the test steps, the report's table in a "
        "column of its own, so there the outcome columns add up to the test steps."
    ]
    cannot = [
        "The counts are of one run's predictions; whether one checkpoint beats another is for the evaluation's "
        "intervals, not these counts."
    ]
    if pair and all(outcomes.get(n, {}).get("correct", 0) == 0 for n in pair):
        cannot.insert(0, _zero_note(s, "correct count"))
    return _lines(head, shows, cannot)


def _ablations(body: dict, run: Path, s: dict) -> str:
    effects = [e for e in body.get("effects", []) if e.get("effect") is not None]
    seeds = body.get("seeds", [])
    counts = body.get("counts", {})
    head = [
        f"{len(body.get('points', []))} points ({counts.get('ok', 0)} run, {counts.get('reused', 0)} reused, "
        f"{counts.get('failed', 0)} failed) over {len(seeds)} training seed(s); "
        f"{sum(bool(e.get('excludes_zero')) for e in effects)} of {len(effects)} effects exclude 0"
    ]
    shown = sorted(effects, key=lambda e: (not e.get("excludes_zero"), -abs(e["effect"])))[:6]
    head += [
        f"{e['variant']} against {e['reference']}, {e['level']} {_NAMES.get(e['rate'], e['rate'])}: "
        f"{100 * e['effect']:+.1f} points ({100 * e['lo']:+.1f} to {100 * e['hi']:+.1f})"
        f"{' *' if e.get('excludes_zero') else ''}"
        for e in shown
    ]
    shows, cannot = [], []
    if effects and all(abs(e["effect"]) < 1e-9 and abs(e["lo"]) < 1e-9 and abs(e["hi"]) < 1e-9 for e in effects):
        shows.append(_zero_note(s, "effect"))
    else:
        sure = [e for e in effects if e.get("excludes_zero")]
        shows.append(
            f"{len(sure)} effect(s) (`*`) have an interval that excludes 0: differences this budget "
            "and test set tell apart."
            if sure
            else "No effect's interval excludes 0 at this size."
        )
    if s.get("ablation_sft_steps") is not None and s.get("ablation_sft_steps") == s.get("sft_steps"):
        shows.append(
            "At the stage's own budget an SFT point without a switch of its own is that recipe stage (sft_full, "
            "sft_weak), installed as the SFT notebook installs it, not trained again."
        )
    cannot.append(
        f"Each point trains {s.get('ablation_sft_steps')} SFT or {s.get('ablation_grpo_steps')} GRPO steps on "
        f"{_size(s)}; an interval that spans 0 is no measured effect, not no effect"
        + (", and with one seed it covers the test items only, not the run-to-run spread." if len(seeds) < 2 else ".")
    )
    return _lines(head, shows, cannot)


# what a notebook measures -> its summary; the notebook's closing cell names its subject
SUMMARIES = {
    "benchmark": _benchmark,
    "sft": _sft,
    "grpo": _grpo,
    "task_grpo": _task_grpo,
    "evaluation": _evaluation,
    "inspection": _inspection,
    "ablations": _ablations,
}


def summary(path: str | Path, subject: str) -> str:
    """The closing summary of `subject` (a key of `SUMMARIES`) read from the notebook metrics JSON `path`
    (`metrics/<notebook>.json`), as Markdown: headline numbers with intervals, then what they show and cannot
    show at this size."""
    path = Path(path)
    render = SUMMARIES.get(subject)
    if render is None:
        raise KeyError(f"{path}: no closing summary about {subject!r} (one of {', '.join(SUMMARIES)})")
    body = json.loads(path.read_text())
    settings = (body.get("manifest") or {}).get("settings") or {}
    notebook = str(body.get("notebook", path.stem))
    return f"### {notebook}: what this run measured\n\n" + render(body, path.parent.parent, settings)


def show(path: str | Path, subject: str) -> None:
    """Display `summary(path, subject)` as Markdown (plain text outside IPython)."""
    text = summary(path, subject)
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with the notebooks' stack
        print(text)
        return
    display(Markdown(text))
