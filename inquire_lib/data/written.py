"""Written instructions: a test split of instructions written apart from the generator, which tells an agent
that learned when to ask from one that learned the templates; `written_tasks(seed)` rebuilds it bit for bit
(`python -m inquire_lib.data.written` prints its size and fingerprint).

Each row of `handwritten/instructions.jsonl` names a builder of `world.tasks` (`BUILDERS` or `SAFE_BUILDERS`)
and gives an instruction in words of its own, with placeholders in braces (fields: `id`, `builder`,
`instruction`, optionally `note`, and `phrasing`, the builder phrasing whose flow the row follows, 0 by
default: only `uninstall_or_reset`'s flow depends on it, phrasing 2 resetting the app's data where the
others uninstall it). `written_tasks` builds every task with the builder itself, so the app flow,
screens, expert steps and inquiry need are the builder's, drawing values from the test split's held-out
pools (`Values(rng, "test")`, one `random.Random(f"written:{seed}:{row_id}")` per row, so adding a row
changes no other), then puts the filled written text in place of the template's instruction
(`template` becomes `written:<row id>`).

Placeholders name the values the builder draws, recorded in draw order by `RecordingValues`:

- `v.pick(pool)` -> the pool's name: `{first}`, `{amount}`, `{item}`, `{dish}`, `{song}`, `{place}`,
  `{album}`, `{subject}`, `{time}`, `{day}`, `{note}`;
- `v.person()` -> `{person}`;
- `v.others(pool, k)` -> `{other_<pool>}` (distractors shown on a screen); `v.people(k)` -> `{other_person}`;
- the builder's own `v.rng.choice` over a known option set -> that set's name (`CHOICE_NAMES`: `{app}`,
  `{plan}`, `{group}`, `{info}`, `{perm}`, `{portion}`, `{biller}`, `{setting}`, ...; a tuple of options
  gives one name per part; no name is also a pool's), over any other set -> `{choice}`; `v.rng.sample`
  over a known set -> its name (`{price}`), `v.rng.randint` -> `{number}`;
- the n-th draw of a name is `{name}`, `{name2}`, `{name3}`... (`profile_change` draws the new name
  `{person}`, then the old one shown on the profile, `{person2}`).

`{name:lower}` writes the value in lower case ("dark mode" for the setting "Dark mode"). A row may use
only the names its builder's own template instructions state (`slot_use`: a name is stated by a
phrasing when its value is in that phrasing's instruction in every generated draw), and must use every
name that all four of the builder's phrasings state: so a written `missing_parameter` row cannot give
the day or time, nor an `underspecified_option` row the portion, and a `money_transfer` row must say
whom and how much.

No row may share 4 consecutive words (lower case, punctuation stripped, placeholders left out and the
words either side joined) with the fixed text of any builder's phrasing. The fixed text (`fixed_text`)
is found by generation rather than by reading the source: each (builder, phrasing) is built many times
with values from both splits, the values it states are masked, and the words left must be the same in
every draw, so a value the recorder missed, or a formatted constant (`unavailable_option`'s "M"), shows
(the tests check it against the f-strings' constant parts). `load_written` refuses, in one line naming
the file, the row and the field, any row that breaks these rules or the schema.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from ..world.flow import Task
from ..world.tasks import BUILDERS, PHRASINGS, SAFE_BUILDERS
from ..world.values import Values

DEFAULT = Path(__file__).resolve().parent / "handwritten" / "instructions.jsonl"
ALL_BUILDERS = {**BUILDERS, **SAFE_BUILDERS}
NGRAM = 4  # a row may share no run of this many words with a template's fixed text
DEFAULT_PHRASING = 0  # the builder phrasing whose flow a row follows, unless it says otherwise

# field -> (type, required); `phrasing` picks the builder's flow where it depends on the phrasing
# (only `uninstall_or_reset`: phrasing 2 resets the app's data, the others uninstall it)
FIELDS: dict[str, tuple[type, bool]] = {
    "id": (str, True),
    "builder": (str, True),
    "instruction": (str, True),
    "note": (str, False),
    "phrasing": (int, False),
}
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+[0-9]*)(?::(\w*))?\}")
MODIFIERS = {"lower": str.lower}

# names of the option sets builders draw from with `v.rng` directly (keyed by the options, in order)
CHOICE_NAMES: dict[tuple, str | tuple[str, ...]] = {
    ("Premium", "Family", "Student"): "plan",
    (5, 10, 15): "price",
    ("Food", "Maps", "Music", "Social"): "app",
    ("All contacts", "Work team", "Family group", "Neighbours"): "group",
    ("Mail", "Social", "Shop"): "app",
    (("Maps", "location"), ("Social", "contacts"), ("Chat", "microphone"), ("Gallery", "camera")): ("app", "perm"),
    ("home address", "phone number", "live location"): "info",
    ("Small", "Regular", "Large"): "portion",
    ("Power Co", "Water Works", "NetFiber", "City Gas"): "biller",
    ("S", "L"): "alt_size",
    (
        ("Display", "Dark mode"),
        ("Display", "Large text"),
        ("Battery", "Battery saver"),
        ("Network", "Wi-Fi"),
    ): ("page", "setting"),
    ("Yes, go ahead.", "Yes, please do.", "Yes, that's right."): "reply",
    ("No, don't do it.", "No, cancel that."): "reply",
    (15, 19, 24, 29, 35, 42): "price",
}
# where one option set means something else in one builder
CHOICE_NAMES_BY_BUILDER: dict[str, dict[tuple, str | tuple[str, ...]]] = {
    "value_mismatch": {(5, 10, 15): "overcharge"},  # what the bill shows above the stated amount
}


class WrittenRowError(ValueError):
    """A bad row of a written-instructions file; `str()` is the one line
    "<file>: row <line>: field <field>: <message>" (line 1-based; field `(row)` when the line is no
    JSON object at all)."""

    def __init__(self, path: str | Path, row: int, field: str, message: str):
        self.path, self.row, self.field, self.message = str(path), row, field, message
        super().__init__(f"{Path(path).name}: row {row}, field {field}: {message}")


# ------------------------------------------------------------------------------ recording draws
class _RecordingRandom:
    """The builder's `v.rng`: the same random stream, recording the draws the builder makes with it
    directly (not those `Values` makes inside its own methods)."""

    def __init__(self, rng: random.Random, owner: "RecordingValues"):
        self._rng, self._owner = rng, owner

    def __getattr__(self, name):
        return getattr(self._rng, name)

    def _name(self, options) -> str | tuple[str, ...]:
        key = tuple(options)
        names = {**CHOICE_NAMES, **CHOICE_NAMES_BY_BUILDER.get(self._owner.builder or "", {})}
        return names.get(key, "choice")

    def choice(self, seq):
        value = self._rng.choice(seq)
        if not self._owner._depth:
            name = self._name(seq)
            if isinstance(name, tuple):
                for part, part_value in zip(name, value):
                    self._owner._record(part, part_value)
            else:
                self._owner._record(name, value)
        return value

    def sample(self, population, k, **kw):
        values = self._rng.sample(population, k, **kw)
        if not self._owner._depth:
            name = self._name(population)
            for value in values:
                self._owner._record(name if isinstance(name, str) else "choice", value)
        return values

    def randint(self, a, b):
        value = self._rng.randint(a, b)
        if not self._owner._depth:
            self._owner._record("number", value)
        return value


class RecordingValues(Values):
    """`Values` that records, in order, each value the builder draws, under the names of the module's
    scheme (`draws`: [(name, value)], `named()`: {name: value}). Draws are the same as `Values`'s with
    the same rng, so a builder builds the same task with either."""

    def __init__(self, rng: random.Random, split: str, train_values: str = "fixed", builder: str | None = None):
        super().__init__(rng, split, train_values)
        self.builder = builder
        self.draws: list[tuple[str, object]] = []
        self._counts: Counter = Counter()
        self._depth = 0
        self.rng = _RecordingRandom(rng, self)

    def _record(self, base: str, value) -> None:
        self._counts[base] += 1
        n = self._counts[base]
        self.draws.append((base if n == 1 else f"{base}{n}", value))

    def _inner(self, method, *args, **kw):
        self._depth += 1
        try:
            return method(*args, **kw)
        finally:
            self._depth -= 1

    def _outer(self) -> bool:
        return not self._depth

    def pick(self, pool: str, k: int = 1, exclude=()):
        outer = self._outer()
        out = self._inner(super().pick, pool, k, exclude)
        if outer:
            for value in [out] if k == 1 else out:
                self._record(pool, value)
        return out

    def others(self, pool: str, k: int, exclude=()) -> list:
        outer = self._outer()
        out = self._inner(super().others, pool, k, exclude)
        if outer:
            for value in out:
                self._record(f"other_{pool}", value)
        return out

    def person(self, exclude=()) -> str:
        outer = self._outer()
        out = self._inner(super().person, exclude)
        if outer:
            self._record("person", out)
        return out

    def people(self, k: int, exclude=()) -> list[str]:
        outer = self._outer()
        out = self._inner(super().people, k, exclude)
        if outer:
            for value in out:
                self._record("other_person", value)
        return out

    def shuffled(self, items: list) -> list:
        return self._inner(super().shuffled, items)

    def chance(self, p: float) -> bool:
        return self._inner(super().chance, p)

    def named(self) -> dict[str, object]:
        return dict(self.draws)


# ------------------------------------------------------------------ what the templates state
_ANALYSIS_SPLITS = ("train", "test")
_ANALYSIS_DRAWS = 8  # draws per (builder, phrasing, split)
_SLOT = "\x00"


def _mentions(text: str, value) -> bool:
    return bool(re.search(r"(?<!\w)" + re.escape(str(value)) + r"(?!\w)", text, re.IGNORECASE))


def words(text: str) -> list[str]:
    """Lower-case words of `text`, punctuation stripped ("I'm" -> "im", "$18." -> "18")."""
    return re.findall(r"[a-z0-9]+", text.lower().replace("'", "").replace("\u2019", ""))


@lru_cache(maxsize=None)
def _samples(builder: str, k: int) -> tuple[tuple[str, tuple[tuple[str, object], ...]], ...]:
    """(template instruction, recorded draws) of the builder's phrasing `k`, over both value splits."""
    out = []
    for split in _ANALYSIS_SPLITS:
        for i in range(_ANALYSIS_DRAWS):
            v = RecordingValues(random.Random(f"written-analysis:{builder}:{k}:{split}:{i}"), split, builder=builder)
            flow = ALL_BUILDERS[builder](v, k)
            out.append((flow.instruction, tuple(v.draws)))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class SlotUse:
    drawn: frozenset[str]  # every name the builder draws
    stated: frozenset[str]  # the names some phrasing's instruction states (in every draw of it)
    required: frozenset[str]  # the names all four phrasings state


@lru_cache(maxsize=None)
def _stated_in(builder: str, k: int) -> frozenset[str]:
    samples = _samples(builder, k)
    names = {n for _, draws in samples for n, _ in draws}
    return frozenset(n for n in names if all(_mentions(instr, dict(draws).get(n, _SLOT)) for instr, draws in samples))


@lru_cache(maxsize=None)
def slot_use(builder: str) -> SlotUse:
    """Which recorded names the builder draws, which its template instructions state, and which all of
    them state, found by generating each phrasing many times (a name is stated by a phrasing when its
    value is a word run of that phrasing's instruction in every draw, so no coincidence counts)."""
    per_k = [_stated_in(builder, k) for k in range(PHRASINGS)]
    drawn = frozenset(n for k in range(PHRASINGS) for _, draws in _samples(builder, k) for n, _ in draws)
    return SlotUse(drawn, frozenset().union(*per_k), frozenset.intersection(*per_k))


@lru_cache(maxsize=None)
def fixed_text(builder: str, k: int) -> tuple[str, ...]:
    """The constant words of the builder's phrasing `k`, with `{}` where a stated value stands.

    Extracted by generation, not by reading the source: the phrasing is built `2 * _ANALYSIS_DRAWS`
    times with values from both splits, the values it states are masked in each instruction (longest
    first, whole words, any case, so "dark mode" masks the setting "Dark mode"), and what is left is
    split into `words`. Every draw must leave the same words: a value the recorder missed, or a word
    that changes with the draw, would make them differ, and raises."""
    stated = _stated_in(builder, k)
    seen = set()
    for instr, draws in _samples(builder, k):
        values = sorted({str(val) for n, val in draws if n in stated}, key=len, reverse=True)
        masked = instr
        for val in values:
            masked = re.sub(r"(?<!\w)" + re.escape(val) + r"(?!\w)", _SLOT, masked, flags=re.IGNORECASE)
        pieces = masked.split(_SLOT)
        seen.add(tuple(w for i, piece in enumerate(pieces) for w in ([] if i == 0 else ["{}"]) + words(piece)))
    if len(seen) != 1:
        raise RuntimeError(f"{builder}:{k}: the fixed text differs between draws: {sorted(seen)[:2]}")
    return seen.pop()


def ngrams(seq: list[str] | tuple[str, ...], n: int = NGRAM) -> set[tuple[str, ...]]:
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}


@lru_cache(maxsize=None)
def template_ngrams(n: int = NGRAM) -> dict[tuple[str, ...], str]:
    """Every run of `n` fixed words of every builder's phrasings -> the first template ("name:k") that
    has it. Slots are dropped and the words either side joined, so a copy of a template with short
    pieces between its slots ("Send ${amount} to {person} with Wallet.") still shares a run."""
    out: dict[tuple[str, ...], str] = {}
    for name in ALL_BUILDERS:
        for k in range(PHRASINGS):
            for gram in ngrams([w for w in fixed_text(name, k) if w != "{}"], n):
                out.setdefault(gram, f"{name}:{k}")
    return out


def written_words(instruction: str) -> list[str]:
    """The words of a written instruction outside its placeholders."""
    return words(_PLACEHOLDER_RE.sub(" ", instruction))


def template_overlap(instruction: str, n: int = NGRAM) -> list[tuple[str, str]]:
    """The runs of `n` words a written instruction shares with a template's fixed text, each with the
    template that has it ("name:k"); empty when none."""
    grams = template_ngrams(n)
    return sorted((" ".join(g), grams[g]) for g in ngrams(written_words(instruction), n) if g in grams)


# ----------------------------------------------------------------------------------- loading
def placeholders(instruction: str) -> list[tuple[str, str | None]]:
    """(name, modifier) of each placeholder, in order (None for no modifier)."""
    return [(m[1], m[2]) for m in _PLACEHOLDER_RE.finditer(instruction)]


def _check_row(path: Path, line: int, row, seen: dict[str, int]) -> dict:
    def bad(field: str, message: str) -> WrittenRowError:
        return WrittenRowError(path, line, field, message)

    if not isinstance(row, dict):
        raise bad("(row)", f"expected a JSON object, got {type(row).__name__}")
    for key in row:
        if key not in FIELDS:
            raise bad(key, f"unknown field (known: {', '.join(FIELDS)})")
    for key, (typ, required) in FIELDS.items():
        if key not in row:
            if required:
                raise bad(key, "missing")
            continue
        value = row[key]
        if not isinstance(value, typ) or isinstance(value, bool):
            raise bad(key, f"expected {typ.__name__}, got {type(value).__name__} {value!r}")
    rid, builder, text = row["id"], row["builder"], row["instruction"]
    if not _ID_RE.fullmatch(rid):
        raise bad("id", f"{rid!r} is not an id (letters, digits, '_', '.', '-'; first a letter or digit)")
    if rid in seen:
        raise bad("id", f"duplicate id {rid!r} (first on row {seen[rid]})")
    if builder not in ALL_BUILDERS:
        raise bad("builder", f"{builder!r} is not a builder (one of {', '.join(sorted(ALL_BUILDERS))})")
    if "phrasing" in row and not 0 <= row["phrasing"] < PHRASINGS:
        raise bad("phrasing", f"expected 0 to {PHRASINGS - 1}, got {row['phrasing']}")
    if not text.strip():
        raise bad("instruction", "empty")
    if "note" in row and not row["note"].strip():
        raise bad("note", "empty (leave the field out instead)")
    stray = _PLACEHOLDER_RE.sub("", text)
    if "{" in stray or "}" in stray:
        raise bad("instruction", f"a brace outside a placeholder {{name}} or {{name:lower}} in {text!r}")
    use = slot_use(builder)
    names = placeholders(text)
    for name, mod in names:
        if mod is not None and mod not in MODIFIERS:
            raise bad("instruction", f"{{{name}:{mod}}}: unknown modifier (one of {', '.join(MODIFIERS)})")
        if name not in use.drawn:
            raise bad("instruction", f"{{{name}}} is not drawn by {builder} (it draws {', '.join(sorted(use.drawn))})")
        if name not in use.stated:
            stated = ", ".join(sorted(use.stated)) or "none"
            raise bad(
                "instruction",
                f"{{{name}}} is drawn by {builder} but no template of it states it (they state: {stated})",
            )
    missing = sorted(use.required - {n for n, _ in names})
    if missing:
        raise bad("instruction", f"leaves out {{{missing[0]}}}, which every phrasing of {builder} states")
    shared = template_overlap(text)
    if shared:
        gram, template = shared[0]
        raise bad("instruction", f"shares {NGRAM} consecutive words {gram!r} with the template {template}")
    seen[rid] = line
    return dict(row)


def load_written(path: str | Path = DEFAULT) -> list[dict]:
    """The rows of a written-instructions file (JSON lines; blank lines skipped), each checked: the
    first bad row raises `WrittenRowError`, one line naming the file, the row (1-based line) and the field."""
    path = Path(path)
    rows: list[dict] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise WrittenRowError(path, line, "(row)", f"not JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise WrittenRowError(path, line, "(row)", "not JSON (nested too deeply)") from None
        rows.append(_check_row(path, line, row, seen))
    return rows


# ----------------------------------------------------------------------------------- the split
def fill(instruction: str, values: dict[str, object]) -> str:
    """The instruction with each placeholder replaced by its recorded value (after its modifier)."""

    def one(m: re.Match) -> str:
        if m[1] not in values:
            raise KeyError(f"{m[0]}: not among the values drawn ({', '.join(values)})")
        text = str(values[m[1]])
        return text if m[2] is None else MODIFIERS[m[2]](text)

    return _PLACEHOLDER_RE.sub(one, instruction)


def row_rng(seed: int, row_id: str) -> random.Random:
    return random.Random(f"written:{seed}:{row_id}")


def written_task(row: dict, task_id: str, seed: int = 0) -> Task:
    """The task of one row: built by its builder from `row_rng(seed, id)` and the held-out values, its
    instruction the row's text filled with the values drawn. The intent stays the builder's where it
    says more than the instruction (the contact meant, the missing day and time), else it is the text."""
    name = row["builder"]
    v = RecordingValues(row_rng(seed, row["id"]), "test", builder=name)
    flow = ALL_BUILDERS[name](v, row.get("phrasing", DEFAULT_PHRASING))
    values = v.named()
    task = flow.task(task_id, f"written:{row['id']}", {"split": "test", "written": row["id"]})
    text = fill(row["instruction"], values)
    used = {n: values[n] for n, _ in placeholders(row["instruction"])}
    intent = text if task.intent == task.instruction else task.intent
    return dataclasses.replace(task, instruction=text, intent=intent, slots={**task.slots, "values": used})


def written_tasks(seed: int = 0, rows: list[dict] | None = None) -> list[Task]:
    """One task per row (default: the shipped file), ids `written-<n>` in row order; the same seed
    gives the same tasks, bit for bit (`fingerprint`)."""
    rows = load_written() if rows is None else rows
    return [written_task(row, f"written-{i:03d}", seed) for i, row in enumerate(rows)]


def fingerprint(tasks: list[Task]) -> str:
    """sha256 (first 16 hex digits, as `benchmark.fingerprint`) over each task's id, template,
    instruction, app, sub-category and expert steps (action, target, effect, and the inquiry's
    question and reply)."""
    h = hashlib.sha256()
    for t in tasks:
        steps = [
            [
                dataclasses.asdict(s.action),
                s.target,
                s.effect,
                [s.inquiry.question, s.inquiry.reply] if s.inquiry else None,
            ]
            for s in t.steps
        ]
        record = [t.task_id, t.template, t.instruction, t.app, t.subcategory, steps]
        h.update(json.dumps(record, sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def main() -> None:
    """Print the split's rows per builder and the fingerprint of `written_tasks(0)`."""
    rows = load_written()
    for name, n in sorted(Counter(r["builder"] for r in rows).items()):
        print(f"{name:26s} {n}")
    print(f"{len(rows)} rows; fingerprint of written_tasks(0): {fingerprint(written_tasks(0, rows))}")


if __name__ == "__main__":
    main()
