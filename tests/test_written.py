"""The written-instructions split: the shipped file, the template-overlap check, the tasks it builds (the
builder's flow, the written words, the held-out values) and the loader's one-line refusals."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from inquire_lib.agent.taxonomy import SAFE, subcategories
from inquire_lib.data import written as W
from inquire_lib.data.written import (
    DEFAULT,
    RecordingValues,
    WrittenRowError,
    fingerprint,
    fixed_text,
    load_written,
    placeholders,
    row_rng,
    slot_use,
    template_overlap,
    written_tasks,
)
from inquire_lib.world import tasks as T
from inquire_lib.world.tasks import BUILDERS, PHRASINGS, SAFE_BUILDERS
from inquire_lib.world.values import POOLS, Values

ALL = {**BUILDERS, **SAFE_BUILDERS}


@pytest.fixture(scope="module")
def rows():
    return load_written()


@pytest.fixture(scope="module")
def tasks(rows):
    return written_tasks(0, rows)


# ------------------------------------------------------------------------------------ the file
def test_the_file_loads_with_five_rows_per_builder_and_unique_ids(rows):
    counts = Counter(r["builder"] for r in rows)
    assert set(counts) == set(ALL)
    assert {b: n for b, n in counts.items() if n < 5} == {}
    assert len(rows) == sum(counts.values()) >= 5 * (len(BUILDERS) + len(SAFE_BUILDERS)) == 165
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert all(set(r) <= set(W.FIELDS) and r["instruction"].strip() for r in rows)
    assert set(BUILDERS) == set(subcategories())


def test_rows_follow_a_phrasing_only_where_the_flow_depends_on_it(rows):
    phrased = Counter(r["builder"] for r in rows if "phrasing" in r)
    assert set(phrased) == {"uninstall_or_reset"}
    resets = [r for r in rows if r.get("phrasing") == 2]
    assert len(resets) == 2 and all("data" in r["instruction"] for r in resets)


# -------------------------------------------------------------------------- template overlap
def _ast_fixed_text(builder: str, k: int) -> tuple[str, ...]:
    """A second extraction, from the source: phrasing `k` of the builder's `instr = [...][k]`, its constant
    parts split into words and "{}" for each formatted value, except a name bound to a constant (the
    `want = "M"` of unavailable_option), which generation rightly finds constant too."""
    tree = ast.parse(inspect.getsource(ALL[builder]))
    consts: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            pairs = [(node.targets[0], node.value)]
            if isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(node.targets[0].elts, node.value.elts))
            for target, value in pairs:
                if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    consts[target.id] = value.value

    def part(p) -> list[str]:
        if isinstance(p, ast.Constant):
            return W.words(p.value)
        if isinstance(p.value, ast.Name) and p.value.id in consts:
            return W.words(consts[p.value.id])
        return ["{}"]

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["instr"]
            and isinstance(node.value, ast.Subscript)
        ):
            elt = node.value.value.elts[k]
            parts = elt.values if isinstance(elt, ast.JoinedStr) else [elt]
            return tuple(w for p in parts for w in part(p))
    raise AssertionError(f"{builder}: no instr list")


@pytest.mark.parametrize("builder", list(ALL))
def test_the_generated_fixed_text_is_the_f_strings_constant_text(builder):
    for k in range(PHRASINGS):
        assert fixed_text(builder, k) == _ast_fixed_text(builder, k), (builder, k)


def test_fixed_text_of_a_known_template():
    assert fixed_text("money_transfer", 0) == ("send", "{}", "to", "{}", "with", "wallet")
    assert fixed_text("safe_setting", 3) == ("put", "the", "phone", "in", "{}")
    assert fixed_text("unavailable_option", 3) == ("order", "ready", "{}", "size", "m", "into", "the", "cart")
    grams = W.template_ngrams()
    assert grams[("send", "to", "with", "wallet")] == "money_transfer:0"
    assert len(grams) > 150


def test_no_row_shares_four_consecutive_words_with_any_template(rows):
    shared = {r["id"]: template_overlap(r["instruction"]) for r in rows}
    assert {i: s for i, s in shared.items() if s} == {}


def test_the_overlap_check_catches_a_row_copied_from_a_template():
    assert template_overlap("Send ${amount} to {person} with Wallet.") == [("send to with wallet", "money_transfer:0")]
    # a copy wrapped in chatty words, in another case, still shares the template's run
    hits = template_overlap("hey, please CHANGE my Social display name to {person} today!!")
    assert ("change my social display", "profile_change:0") in hits and len(hits) == 3
    assert template_overlap("Wire {person} ${amount} for dinner.") == []


def _as_placeholders(builder: str, k: int, seed: int) -> str:
    """The template's own instruction with its stated values put back as placeholders."""
    v = RecordingValues(random.Random(seed), "test", builder=builder)
    text = ALL[builder](v, k).instruction
    for name, value in sorted(v.draws, key=lambda d: -len(str(d[1]))):
        if name in W._stated_in(builder, k):
            text = re.sub(r"(?<!\w)" + re.escape(str(value)) + r"(?!\w)", "{" + name + "}", text, flags=re.I)
    return text


@pytest.mark.parametrize("builder", list(ALL))
def test_every_template_copied_as_a_row_is_caught_when_it_has_four_fixed_words(builder):
    for k in range(PHRASINGS):
        copy = _as_placeholders(builder, k, seed=k)
        n_fixed = sum(w != "{}" for w in fixed_text(builder, k))
        hits = template_overlap(copy)
        assert bool(hits) == (n_fixed >= W.NGRAM), (builder, k, copy, hits)
        own = " ".join(w for w in fixed_text(builder, k) if w != "{}")
        assert not hits or any(gram in own for gram, _ in hits), (builder, k, hits)


# -------------------------------------------------------------------------------- the draws
def test_recording_values_draw_the_same_task_as_values():
    for name, builder in ALL.items():
        for k in range(PHRASINGS):
            a = builder(Values(random.Random(f"x:{name}:{k}"), "test"), k).task("t", "x", {})
            v = RecordingValues(random.Random(f"x:{name}:{k}"), "test", builder=name)
            b = builder(v, k).task("t", "x", {})
            assert a == b, (name, k)
            assert len({n for n, _ in v.draws}) == len(v.draws)  # every draw has a name of its own


def test_the_naming_scheme():
    v = RecordingValues(random.Random(3), "test", builder="profile_change")
    T.profile_change(v, 0)
    assert [n for n, _ in v.draws] == ["person", "person2", "reply"]
    assert v.draws[0][1] != v.draws[1][1]
    v = RecordingValues(random.Random(3), "test", builder="ambiguous_recipient")
    T.ambiguous_recipient(v, 0)
    assert [n for n, _ in v.draws][:5] == ["first", "other_last", "other_last2", "choice", "note"]
    v = RecordingValues(random.Random(3), "test", builder="safe_setting")
    T.safe_setting(v, 0)
    assert [n for n, _ in v.draws] == ["page", "setting"]
    assert slot_use("money_transfer").required == {"person", "amount"}
    assert slot_use("payment_checkout") == W.SlotUse(
        frozenset({"item", "amount", "reply"}), frozenset({"item"}), frozenset()
    )
    assert slot_use("missing_parameter").drawn >= {"place", "day", "time"}
    assert slot_use("missing_parameter").stated == {"place"}
    assert slot_use("underspecified_option").stated == {"dish"}
    assert slot_use("safe_order_food").required == {"dish", "portion"}
    names = {n for spec in W.CHOICE_NAMES.values() for n in ([spec] if isinstance(spec, str) else spec)}
    assert names.isdisjoint(POOLS) and "person" not in POOLS  # a name never means two things
    assert slot_use("value_mismatch").drawn == {"biller", "amount", "overcharge", "reply"}
    assert slot_use("safe_balance") == W.SlotUse(frozenset(), frozenset(), frozenset())


# -------------------------------------------------------------------------------- the tasks
def _mentions(text: str, value) -> bool:
    return bool(re.search(r"(?<!\w)" + re.escape(str(value)) + r"(?!\w)", text, re.I))


def test_each_written_task_is_its_builders_task_in_other_words(rows, tasks):
    assert len(tasks) == len(rows) and [t.task_id for t in tasks][:2] == ["written-000", "written-001"]
    for row, task in zip(rows, tasks):
        name, k = row["builder"], row.get("phrasing", W.DEFAULT_PHRASING)
        ref = ALL[name](Values(row_rng(0, row["id"]), "test"), k).task("ref", "ref", {})
        assert task.subcategory == ref.subcategory == (name if name in BUILDERS else SAFE)
        assert task.app == ref.app
        assert task.inquiry_required == ref.inquiry_required == (name in BUILDERS)
        assert len(task.steps) == len(ref.steps)
        assert task.steps == ref.steps
        assert task.template == f"written:{row['id']}"
        assert task.instruction != ref.instruction
        assert task.slots["written"] == row["id"] and task.slots["split"] == "test"
        # the intent is the written text, unless the builder's says more (the contact meant, the day and time)
        assert task.intent == (task.instruction if ref.intent == ref.instruction else ref.intent)


def test_each_instruction_states_the_values_it_names_and_no_value_the_templates_keep_back(rows, tasks):
    for row, task in zip(rows, tasks):
        v = RecordingValues(row_rng(0, row["id"]), "test", builder=row["builder"])
        ALL[row["builder"]](v, row.get("phrasing", W.DEFAULT_PHRASING))
        drawn = v.named()
        named = placeholders(row["instruction"])
        assert set(task.slots["values"]) == {n for n, _ in named}
        assert not re.search(r"[{}]", task.instruction), task.instruction
        for n, mod in named:
            value = str(drawn[n])
            assert (value.lower() if mod == "lower" else value) in task.instruction, (row["id"], n)
        use = slot_use(row["builder"])
        assert use.required <= {n for n, _ in named}
        # what the templates never state (the day and time, the size, the contact meant, the prices...)
        # stays out of the written text too
        rest = task.instruction
        for n in sorted(use.stated, key=lambda n: -len(str(drawn[n]))):
            rest = re.sub(re.escape(str(drawn[n])), " ", rest, flags=re.I)
        leaked = [(n, val) for n, val in drawn.items() if n not in use.stated and _mentions(rest, val)]
        assert leaked == [], (row["id"], task.instruction, leaked)


def test_written_tasks_draw_the_held_out_values(tasks):
    held_out = {pool: set(map(str, test)) for pool, (_, test) in POOLS.items()}
    checked = 0
    for task in tasks:
        for name, value in task.slots["values"].items():
            base = re.sub(r"\d+$", "", name)
            if base in held_out:
                assert str(value) in held_out[base], (task.task_id, name, value)
                checked += 1
            elif base == "person":
                first, last = str(value).split(" ", 1)
                assert first in held_out["first"] and last in held_out["last"]
                checked += 1
    assert checked > 150


def test_the_hidden_slot_sub_categories_keep_their_inquiry(tasks):
    by_sub = Counter(t.subcategory for t in tasks if t.inquiry_required)
    assert {s: n for s, n in by_sub.items() if n < 5} == {} and set(by_sub) == set(BUILDERS)
    for t in tasks:
        if t.subcategory == "ambiguous_recipient":
            first = t.slots["values"]["first"]
            ask = next(s for s in t.steps if s.inquiry)
            assert ask.inquiry.question.startswith(f"There are two contacts named {first}:")
            assert not re.search(rf"{first} [A-Z]", t.instruction)
        if t.subcategory == "missing_parameter":
            assert not re.search(r"\d|day\b|tomorrow|tonight|noon|morning|evening", t.instruction, re.I)
        if t.subcategory == "underspecified_option":
            assert not re.search(r"small|regular|large", t.instruction, re.I)


# --------------------------------------------------------------------------- determinism
def test_the_split_regenerates_bit_for_bit(rows, tasks):
    fp = fingerprint(tasks)
    assert re.fullmatch(r"[0-9a-f]{16}", fp)
    assert fingerprint(written_tasks(0)) == fp == fingerprint(written_tasks(0, rows))
    assert fingerprint(written_tasks(1, rows)) != fp
    edited = [dict(rows[0], instruction=rows[0]["instruction"] + " Thanks!"), *rows[1:]]
    assert fingerprint(written_tasks(0, edited)) != fp
    # a row's tasks do not depend on the rows around it
    assert written_tasks(0, rows[5:6])[0].steps == tasks[5].steps


# ------------------------------------------------------------------------------ bad rows
GOOD = {"id": "w-ok", "builder": "money_transfer", "instruction": "Wire {person} ${amount}, please."}


def _write(tmp_path: Path, *lines) -> Path:
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return p


def _refusal(tmp_path: Path, *lines) -> str:
    with pytest.raises(WrittenRowError) as err:
        load_written(_write(tmp_path, *lines))
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_a_good_file_loads(tmp_path):
    assert load_written(_write(tmp_path, GOOD, "", {**GOOD, "id": "w-ok2", "note": "fine"})) == [
        GOOD,
        {**GOOD, "id": "w-ok2", "note": "fine"},
    ]


def test_refuses_a_row_that_is_not_json(tmp_path):
    msg = _refusal(tmp_path, GOOD, '{"id": "w-2", "builder": "money_transfer",')
    assert re.fullmatch(r"bad\.jsonl: row 2, field \(row\): not JSON \(.+ at column \d+\)", msg), msg
    msg = _refusal(tmp_path, '["w-1", "money_transfer"]')
    assert msg == "bad.jsonl: row 1, field (row): expected a JSON object, got list"


def test_refuses_a_missing_field(tmp_path):
    row = {k: v for k, v in GOOD.items() if k != "builder"}
    assert _refusal(tmp_path, GOOD | {"id": "a"}, row) == "bad.jsonl: row 2, field builder: missing"


def test_refuses_an_unknown_field(tmp_path):
    msg = _refusal(tmp_path, {**GOOD, "colour": "red"})
    assert msg == "bad.jsonl: row 1, field colour: unknown field (known: id, builder, instruction, note, phrasing)"


def test_refuses_a_field_of_the_wrong_type(tmp_path):
    assert (
        _refusal(tmp_path, {**GOOD, "instruction": 12})
        == "bad.jsonl: row 1, field instruction: expected str, got int 12"
    )
    assert (
        _refusal(tmp_path, {**GOOD, "phrasing": "2"}) == "bad.jsonl: row 1, field phrasing: expected int, got str '2'"
    )
    assert _refusal(tmp_path, {**GOOD, "phrasing": True}) == (
        "bad.jsonl: row 1, field phrasing: expected int, got bool True"
    )
    assert _refusal(tmp_path, {**GOOD, "phrasing": 4}) == "bad.jsonl: row 1, field phrasing: expected 0 to 3, got 4"
    assert _refusal(tmp_path, {**GOOD, "id": "w 1"}).startswith("bad.jsonl: row 1, field id: 'w 1' is not an id")


def test_refuses_an_unknown_builder(tmp_path):
    msg = _refusal(tmp_path, "", "", {**GOOD, "builder": "money_transfr"})
    names = ", ".join(sorted(ALL))
    assert msg == f"bad.jsonl: row 3, field builder: 'money_transfr' is not a builder (one of {names})"


def test_refuses_a_duplicate_id(tmp_path):
    msg = _refusal(tmp_path, GOOD, {**GOOD, "id": "w-2"}, GOOD)
    assert msg == "bad.jsonl: row 3, field id: duplicate id 'w-ok' (first on row 1)"


def test_refuses_a_placeholder_the_builder_does_not_draw(tmp_path):
    msg = _refusal(tmp_path, {**GOOD, "instruction": "Wire {person} ${amount} for the {item}."})
    assert msg == (
        "bad.jsonl: row 1, field instruction: {item} is not drawn by money_transfer "
        "(it draws amount, other_person, other_person2, other_person3, other_person4, person, reply)"
    )


def test_refuses_a_placeholder_the_templates_keep_back(tmp_path):
    row = {"id": "w-m", "builder": "missing_parameter", "instruction": "Meet at {place} on {day}."}
    assert _refusal(tmp_path, row) == (
        "bad.jsonl: row 1, field instruction: {day} is drawn by missing_parameter "
        "but no template of it states it (they state: place)"
    )


def test_refuses_a_row_that_leaves_out_a_slot_every_phrasing_states(tmp_path):
    msg = _refusal(tmp_path, {**GOOD, "instruction": "Wire {person} some money."})
    assert (
        msg == "bad.jsonl: row 1, field instruction: leaves out {amount}, which every phrasing of money_transfer states"
    )


def test_refuses_an_empty_instruction(tmp_path):
    assert _refusal(tmp_path, {**GOOD, "instruction": "  "}) == "bad.jsonl: row 1, field instruction: empty"
    assert _refusal(tmp_path, {**GOOD, "note": ""}) == (
        "bad.jsonl: row 1, field note: empty (leave the field out instead)"
    )


def test_refuses_bad_placeholders(tmp_path):
    assert _refusal(tmp_path, {**GOOD, "instruction": "Wire {person:upper} ${amount}."}) == (
        "bad.jsonl: row 1, field instruction: {person:upper}: unknown modifier (one of lower)"
    )
    msg = _refusal(tmp_path, {**GOOD, "instruction": "Wire {person} ${amount} {"})
    assert msg.startswith("bad.jsonl: row 1, field instruction: a brace outside a placeholder")


def test_refuses_a_row_copied_from_a_template(tmp_path):
    msg = _refusal(tmp_path, {**GOOD, "instruction": "Please send ${amount} to {person} with Wallet."})
    assert msg == (
        "bad.jsonl: row 1, field instruction: shares 4 consecutive words 'send to with wallet' "
        "with the template money_transfer:0"
    )


def test_the_error_keeps_its_parts(tmp_path):
    with pytest.raises(WrittenRowError) as err:
        load_written(_write(tmp_path, GOOD, {**GOOD, "builder": 3}))
    e = err.value
    assert (Path(e.path).name, e.row, e.field) == ("bad.jsonl", 2, "builder")
    assert isinstance(e, ValueError) and e.message == "expected str, got int 3"


def test_the_default_path_is_the_shipped_file():
    assert DEFAULT.name == "instructions.jsonl" and DEFAULT.parent.name == "handwritten" and DEFAULT.is_file()
    assert dataclasses.is_dataclass(W.SlotUse)
