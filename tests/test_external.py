"""Tests for inquire_lib.data.external against the real-format InquireMobile samples."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from inquire_lib.data.external import (
    FRAMES,
    SAMPLES_DIR,
    RecordError,
    detect_frame,
    load_inquiremobile_grpo,
    load_inquiremobile_tasks,
    validate_file,
    validate_main,
)

FIX = SAMPLES_DIR
TASKS = FIX / "tasks_en.sample.jsonl"
GRPO = FIX / "interactive_grpo.sample.jsonl"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _edit(path: Path, idx: int, fn) -> list[str]:
    """The fixture's lines with line idx (0-based) replaced by fn(record) dumped as JSON."""
    lines = _lines(path)
    rec = json.loads(lines[idx])
    fn(rec)
    lines[idx] = json.dumps(rec, ensure_ascii=False)
    return lines


# ----------------------------------------------------------------------------- fixtures load


def test_tasks_fixture_loads_with_exact_counts():
    ds = load_inquiremobile_tasks(TASKS)
    assert ds.num_rows == 10
    assert ds["line"] == list(range(1, 11))
    assert Counter(ds["category"]) == {"privacy": 2, "combination": 2, "uncertainty": 2, "intension": 2, "risk": 2}
    assert Counter(ds["category_norm"]) == {"privacy": 2, "combination": 2, "uncertainty": 2, "intent": 2, "risk": 2}
    row = ds[6]
    assert row["instruction"] == "One of my socks is torn."
    assert row["apps"] == ["taobao", "jd", "pinduoduo", "xhs", "douyin"]
    assert row["category"] == "intension" and row["category_norm"] == "intent"
    assert row["intension"] == "Open Taobao and search for socks."
    assert row["language"] == "en" and row["need_login"] is False
    assert ds["need_login"].count(True) == 2
    assert ds[5]["apps"] == ["phone", "contacts"]


def test_grpo_fixture_loads_with_frames():
    ds = load_inquiremobile_grpo(GRPO)
    assert ds.num_rows == 4
    assert [a["type"] for a in ds["action"]] == ["click", "type", "terminate", "click"]
    assert ds["frame"] == ["original", "none", "none", "inconsistent"]
    assert ds["bbox_consistent"] == [True, True, True, False]
    r0 = ds[0]
    assert r0["action"]["coordinate"] == [85, 537]
    assert r0["point"] == [85, 537]
    assert r0["bbox"] == [52, 497, 125, 567]
    assert (r0["width"], r0["height"], r0["resized_width"], r0["resized_height"]) == (720, 1280, 448, 840)
    assert json.loads(r0["action_raw"]) == {
        "name": "mobile_use",
        "arguments": {"action": "click", "coordinate": [85, 537]},
    }
    assert r0["image_paths"] == [None]
    assert ds[1]["action"]["text"] == "manus" and ds[1]["point"] is None
    assert ds[1]["bbox"] == [-1, -1, -1, -1]
    assert len(ds[1]["img_list"]) == 2 and ds[1]["image_paths"] == [None, None]
    assert ds[2]["action"]["status"] == "success"
    assert ds[3]["point"] == [101, 693] and (ds[3]["width"], ds[3]["height"]) == (1440, 3200)
    assert ds[0]["system"].startswith("You are a mobile GUI agent.")
    assert "<image>" in ds[0]["query"]


def test_detect_frame_all_four_outcomes():
    size, rsize = (720, 1280), (448, 840)
    assert detect_frame([85, 537], [52, 497, 125, 567], size, rsize)[0] == "original"
    # (50, 340) is outside the original box but inside it scaled by (448/720, 840/1280).
    frame, tried = detect_frame([50, 340], [52, 497, 125, 567], size, rsize)
    assert frame == "resized"
    assert tried["resized"]["bbox"] == [32.4, 326.2, 77.8, 372.1]
    assert detect_frame([500, 10], [52, 497, 125, 567], size, rsize)[0] == "inconsistent"
    assert detect_frame([85, 537], [-1, -1, -1, -1], size, rsize) == ("none", {})
    assert detect_frame(None, [52, 497, 125, 567], size, rsize) == ("none", {})
    # Edges count as inside.
    assert detect_frame([52, 567], [52, 497, 125, 567], size, rsize)[0] == "original"


def test_validate_reports_fixture_counts():
    rep = validate_file(TASKS)
    assert (rep.format, rep.n_rows, rep.n_ok, rep.bad_rows) == ("tasks", 10, 10, [])
    assert rep.category_counts == {"privacy": 2, "combination": 2, "uncertainty": 2, "intension": 2, "risk": 2}
    rep = validate_file(GRPO)
    assert (rep.format, rep.n_rows, rep.n_ok) == ("grpo", 4, 4)
    assert rep.frame_counts == {"original": 1, "resized": 0, "none": 2, "inconsistent": 1}
    assert list(rep.frame_counts) == list(FRAMES)
    assert rep.action_counts == {"click": 2, "type": 1, "terminate": 1}
    assert len(rep.inconsistent) == 1
    inc = rep.inconsistent[0]
    assert inc["line"] == 4 and inc["point"] == [101, 693] and inc["bbox"] == [106, 1609, 318, 1821]
    assert set(inc["frames_tried"]) == {"original", "resized"}
    assert inc["frames_tried"]["resized"]["size"] == (392, 924)
    assert inc["frames_tried"]["resized"]["bbox"] == [28.9, 464.6, 86.6, 525.8]
    assert rep.n_images == 6 and rep.missing_images is None
    text = rep.to_text()
    assert "4 rows, 4 ok" in text
    assert "original 1, resized 0, none 2, inconsistent 1" in text
    assert "line 4: point (101, 693)" in text
    assert "not checked" in text


# ----------------------------------------------------------------------------- corrupted copies


def test_truncated_json_line(tmp_path):
    lines = _lines(TASKS)
    lines[2] = lines[2][:40]
    p = _write(tmp_path, "tasks.jsonl", lines)
    with pytest.raises(RecordError) as ei:
        load_inquiremobile_tasks(p)
    assert ei.value.line == 3 and ei.value.field is None
    assert str(ei.value).startswith(f"{p}:3: invalid JSON")


def test_missing_field(tmp_path):
    p = _write(tmp_path, "tasks.jsonl", _edit(TASKS, 4, lambda r: r.pop("language")))
    with pytest.raises(RecordError) as ei:
        validate_file(p)
    assert (ei.value.line, ei.value.field) == (5, "language")
    assert str(ei.value) == f"{p}:5: field 'language': missing"


def test_wrong_type(tmp_path):
    p = _write(tmp_path, "tasks.jsonl", _edit(TASKS, 1, lambda r: r.update(need_login="yes")))
    with pytest.raises(RecordError) as ei:
        load_inquiremobile_tasks(p)
    assert (ei.value.line, ei.value.field) == (2, "need_login")
    assert "tasks.jsonl:2: field 'need_login': expected true or false, got str 'yes'" in str(ei.value)

    p = _write(tmp_path, "steps.jsonl", _edit(GRPO, 2, lambda r: r.update(width="720")))
    with pytest.raises(RecordError) as ei:
        load_inquiremobile_grpo(p)
    assert (ei.value.line, ei.value.field) == (3, "width")
    assert "steps.jsonl:3: field 'width': expected a positive integer" in str(ei.value)


def test_bad_category(tmp_path):
    p = _write(tmp_path, "tasks.jsonl", _edit(TASKS, 2, lambda r: r.update(category="foo")))
    with pytest.raises(RecordError) as ei:
        validate_file(p)
    assert str(ei.value) == (
        f"{p}:3: field 'category': expected one of "
        "['risk', 'privacy', 'intension', 'uncertainty', 'combination'], got 'foo'"
    )


def test_bbox_with_three_numbers(tmp_path):
    p = _write(tmp_path, "steps.jsonl", _edit(GRPO, 3, lambda r: r.update(bbox=[106, 1609, 318])))
    with pytest.raises(RecordError) as ei:
        validate_file(p)
    assert (ei.value.line, ei.value.field) == (4, "bbox")
    assert "steps.jsonl:4: field 'bbox': expected 4 numbers" in str(ei.value)


@pytest.mark.parametrize(
    "action",
    [
        '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [85, 537]}',  # truncated
        '{"name": "mobile_use", "arguments": {"action": "fly"}}',  # unknown action type
        '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [85]}}',  # bad argument
        '{"name": "other_tool", "arguments": {"action": "wait"}}',  # wrong tool
    ],
)
def test_invalid_action_json(tmp_path, action):
    p = _write(tmp_path, "steps.jsonl", _edit(GRPO, 1, lambda r: r.update(action=action)))
    with pytest.raises(RecordError) as ei:
        load_inquiremobile_grpo(p)
    assert (ei.value.line, ei.value.field) == (2, "action")
    assert str(ei.value).startswith(f"{p}:2: field 'action': ")


def test_invalid_action_message_names_reason(tmp_path):
    bad = '{"name": "mobile_use", "arguments": {"action": "fly"}}'
    p = _write(tmp_path, "steps.jsonl", _edit(GRPO, 0, lambda r: r.update(action=bad)))
    with pytest.raises(RecordError) as ei:
        validate_file(p)
    assert str(ei.value) == f"{p}:1: field 'action': invalid 'fly' action: unknown_action"


def test_call_user_content_is_read_as_text(tmp_path):
    ask = json.dumps({"name": "mobile_use", "arguments": {"action": "call_user", "content": "Which Wang Fang?"}})
    p = _write(tmp_path, "steps.jsonl", _edit(GRPO, 2, lambda r: r.update(action=ask)))
    ds = load_inquiremobile_grpo(p)
    assert ds[2]["action"]["type"] == "call_user" and ds[2]["action"]["text"] == "Which Wang Fang?"
    assert ds[2]["frame"] == "none" and ds[2]["action_raw"] == ask


def test_wrong_loader_names_the_format(tmp_path):
    with pytest.raises(RecordError) as ei:
        load_inquiremobile_tasks(GRPO)
    assert ei.value.line == 1 and "looks like InquireMobile GRPO step records" in str(ei.value)


def test_unknown_format(tmp_path):
    p = _write(tmp_path, "x.jsonl", ['{"a": 1}'])
    with pytest.raises(RecordError) as ei:
        validate_file(p)
    assert ei.value.line == 1 and "unknown record format" in str(ei.value)


# ----------------------------------------------------------------------------- skip_bad


def test_skip_bad_counts_rows(tmp_path):
    lines = _edit(TASKS, 2, lambda r: r.update(category="foo"))
    lines[5] = lines[5][:30]
    lines.insert(7, "")  # a blank line is not a row, but shifts the later line numbers
    lines = [lines[i] if i != 8 else json.dumps({**json.loads(lines[8]), "apps": "wechat"}) for i in range(len(lines))]
    p = _write(tmp_path, "tasks.jsonl", lines)
    rep = validate_file(p, skip_bad=True)
    assert rep.n_rows == 10 and rep.n_ok == 7
    assert [(ln, fld) for ln, fld, _ in rep.bad_rows] == [(3, "category"), (6, None), (9, "apps")]
    assert sum(rep.category_counts.values()) == 7
    assert "10 rows, 7 ok, 3 skipped as bad" in rep.to_text()
    assert "bad line 3 field 'category'" in rep.to_text()
    ds = load_inquiremobile_tasks(p, skip_bad=True)
    assert ds.num_rows == 7 and 3 not in ds["line"] and ds["line"][-1] == 11


def test_skip_bad_grpo_keeps_frame_counts_of_good_rows(tmp_path):
    lines = _edit(GRPO, 0, lambda r: r.update(bbox=[1, 2, 3]))
    p = _write(tmp_path, "steps.jsonl", lines)
    rep = validate_file(p, skip_bad=True)
    assert (rep.n_rows, rep.n_ok) == (4, 3)
    assert rep.frame_counts == {"original": 0, "resized": 0, "none": 2, "inconsistent": 1}
    assert load_inquiremobile_grpo(p, skip_bad=True)["line"] == [2, 3, 4]


# ----------------------------------------------------------------------------- images


def test_image_root_resolves_basenames(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    found = root / "c90146a6-52a1-426f-a6da-df925c5f14da.png"
    found.write_bytes(b"\x89PNG\r\n\x1a\n")
    ds = load_inquiremobile_grpo(GRPO, image_root=str(root))
    assert ds[1]["image_paths"] == [None, str(found)]
    assert sum(p is not None for ps in ds["image_paths"] for p in ps) == 1
    rep = validate_file(GRPO, image_root=str(root))
    assert rep.n_images == 6 and rep.missing_images == 5
    assert f"images: 6 referenced, 5 missing under {root}" in rep.to_text()


# ----------------------------------------------------------------------------- validate_main


def test_validate_main_ok(capsys):
    assert validate_main(str(TASKS)) == 0
    out = capsys.readouterr()
    assert "10 rows, 10 ok" in out.out and "intension 2 (= intent)" in out.out and out.err == ""
    assert validate_main(str(GRPO)) == 0
    assert "inconsistent 1" in capsys.readouterr().out


def test_validate_main_bad_rows(tmp_path, capsys):
    p = _write(tmp_path, "tasks.jsonl", _edit(TASKS, 2, lambda r: r.update(category="foo")))
    assert validate_main(str(p)) == 1
    out = capsys.readouterr()
    assert out.out == "" and f"{p}:3: field 'category'" in out.err
    assert validate_main(str(p), skip_bad=True) == 0
    assert "1 skipped as bad" in capsys.readouterr().out


def test_validate_main_unreadable(tmp_path, capsys):
    assert validate_main(str(tmp_path / "absent.jsonl")) == 2
    assert "cannot read" in capsys.readouterr().err
    assert validate_main(str(tmp_path)) == 2  # a directory
    assert validate_main(str(GRPO), image_root=str(tmp_path / "nope")) == 2
    assert "image root" in capsys.readouterr().err


def test_validate_main_invalid_utf8_names_line(tmp_path, capsys):
    p = tmp_path / "tasks.jsonl"
    p.write_bytes(TASKS.read_bytes().splitlines(keepends=True)[0] + b'{"instruction": "\xff"}\n')
    assert validate_main(str(p)) == 1
    assert f"{p}:2: not valid UTF-8" in capsys.readouterr().err
