"""`tools/rekey_shipped.py`: shipped results renamed to today's content keys after fields were removed, and
refused in one line when a removed field shaped them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import rekey_shipped  # noqa: E402

from inquire_lib.profiles import get_profile  # noqa: E402
from inquire_lib.training import shipped  # noqa: E402
from inquire_lib.training.sft import base_agent_dir, base_agent_key  # noqa: E402


def _cpu_manifest() -> dict:
    return json.loads((shipped.SHIPPED_ROOT / base_agent_dir(get_profile("cpu")).name / "manifest.json").read_text())


def test_every_shipped_result_already_has_todays_key(capsys):
    assert rekey_shipped.main([]) == 0
    assert capsys.readouterr().out.strip().endswith("0 shipped result(s) to move (--apply moves them)")


def test_a_removed_field_at_the_kept_value_gives_todays_key():
    old = _cpu_manifest()
    old = {**old, "key": "000000000000", "settings": {**old["settings"], "task_last": False, "copy_warmup_gap": 7}}
    key, new = rekey_shipped.plan_base_agent(old, Path("m.json"), {})
    assert key == base_agent_key(get_profile("cpu")) and new["name"] == f"base-agent-{key}"
    assert "task_last" not in new["settings"] and "copy_warmup_gap" not in new["settings"]


def test_an_added_field_at_the_value_the_code_ran_gives_todays_key(monkeypatch):
    """A manifest written before a field existed gets it at the value the code behaved as (`ADDED`); at another
    value the key is another one, so the result is not served for it."""
    old = _cpu_manifest()
    field = "recovery_drill_slips"
    value = old["settings"].pop(field)
    old["key"] = "000000000000"
    monkeypatch.setattr(rekey_shipped, "ADDED", {field: value})
    key, new = rekey_shipped.plan_base_agent(old, Path("m.json"), {})
    assert key == base_agent_key(get_profile("cpu")) and new["settings"][field] == value
    monkeypatch.setattr(rekey_shipped, "ADDED", {field: value + 1})
    with pytest.raises(rekey_shipped.RekeyError, match=f"today's settings differ: {field} {value + 1} -> {value}"):
        rekey_shipped.plan_base_agent(old, Path("m.json"), {})


def test_a_result_a_removed_field_shaped_is_refused_in_one_line():
    old = _cpu_manifest()
    old = {**old, "settings": {**old["settings"], "copy_warmup_steps": 300}}
    with pytest.raises(rekey_shipped.RekeyError) as info:
        rekey_shipped.plan_base_agent(old, Path("assets/x/manifest.json"), {})
    assert str(info.value) == "assets/x/manifest.json: copy_warmup_steps=300 shaped it; the code now always runs 0"


def test_a_result_whose_other_settings_differ_is_refused():
    old = _cpu_manifest()
    old = {**old, "settings": {**old["settings"], "base_agent_steps": 1}}
    with pytest.raises(rekey_shipped.RekeyError, match=r"today's settings differ: base_agent_steps 1 -> \d+"):
        rekey_shipped.plan_base_agent(old, Path("m.json"), {})


def test_a_move_keeps_every_file_and_writes_the_manifest_last(tmp_path):
    old = tmp_path / "base-agent-aaa"
    old.mkdir()
    (old / "model.safetensors").write_bytes(b"weights")
    (old / "manifest.json").write_text("{}")
    rekey_shipped.move(old, tmp_path / "base-agent-bbb", {"key": "bbb"}, apply=True)
    assert not old.exists()
    assert (tmp_path / "base-agent-bbb" / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((tmp_path / "base-agent-bbb" / "manifest.json").read_text()) == {"key": "bbb"}


def test_a_field_a_stage_key_no_longer_reads_is_dropped_whatever_its_value():
    from inquire_lib.training import shipped_stages
    from inquire_lib.training.sft import run_key

    [path] = sorted(shipped_stages.STAGES_ROOT.glob("sft_full-*/manifest.json"))
    old = json.loads(path.read_text())
    old = {**old, "key": "000000000000", "settings": {**old["settings"], "eval_tasks": 7, "eval_inquiry_steps": 9}}
    key, new = rekey_shipped.plan_stage(old, path, {})
    assert key == run_key(get_profile("small"), "sft_full", old["settings"]["steps"], 1.0) == new["key"]
    assert "eval_tasks" not in new["settings"] and "eval_inquiry_steps" not in new["settings"]
    assert new["name"] == f"sft_full-{key}" and new["parent"] == old["parent"]
