"""The rule that chooses a GRPO checkpoint on the validation split."""

from __future__ import annotations

import pytest

from inquire_lib.training.selection import choose, choose_online, ranked


def row(step, isr, safe, needless=0.0):
    return {
        "step": step,
        "inquiry_recall": isr,
        "safe_step_accuracy": safe,
        "needless_rate": needless,
        "step_accuracy": safe,
        "format": 1.0,
    }


START = row(0, 0.05, 0.57)


def test_highest_isr_that_keeps_safe_accuracy_and_few_needless_inquiries():
    rows = [row(25, 0.20, 0.57), row(50, 0.55, 0.54), row(75, 0.45, 0.56), row(100, 0.60, 0.57, needless=0.12)]
    chosen, met = choose(START, rows, max_needless=0.10, max_safe_drop=0.02)
    # step 50 drops 3 points, step 100 asks needlessly too often
    assert (chosen["step"], met) == (75, True)


def test_the_floor_is_inclusive_and_relative_to_the_start():
    rows = [row(10, 0.30, 0.55), row(20, 0.40, 0.549)]
    chosen, met = choose(START, rows, max_needless=0.10, max_safe_drop=0.02)
    assert (chosen["step"], met) == (10, True)
    chosen, _ = choose(START, rows, max_needless=0.10, max_safe_drop=0.03)
    assert chosen["step"] == 20


def test_ties_go_to_safer_then_earlier():
    rows = [row(10, 0.40, 0.56), row(20, 0.40, 0.58), row(30, 0.40, 0.58)]
    assert choose(START, rows, 0.10, 0.02)[0]["step"] == 20


def test_none_qualifies_keeps_the_last_and_says_so():
    rows = [row(10, 0.30, 0.40), row(20, 0.50, 0.45)]
    chosen, met = choose(START, rows, 0.10, 0.02)
    assert (chosen["step"], met) == (20, False)


def test_undefined_rates_count_as_zero():
    start = row(0, None, None)
    rows = [row(10, None, 0.5, needless=None), row(20, 0.1, 0.5)]
    assert choose(start, rows, 0.10, 0.02)[0]["step"] == 20


def test_no_rows_is_an_error():
    with pytest.raises(ValueError, match="no checkpoints"):
        choose(START, [], 0.10, 0.02)


def test_ranked_lists_the_qualifying_rows_best_first():
    rows = [row(25, 0.20, 0.57), row(50, 0.55, 0.54), row(75, 0.45, 0.56), row(100, 0.45, 0.57)]
    assert [r["step"] for r in ranked(START, rows, 0.10, 0.02)] == [100, 75, 25]


def test_online_takes_the_best_that_keeps_needless_episodes_down_and_plays_no_further():
    candidates = [row(100, 0.6, 0.57), row(75, 0.5, 0.57), row(25, 0.2, 0.57)]
    shares = {100: 0.15, 75: 0.10, 25: 0.0}
    played = []

    def share(r):
        played.append(r["step"])
        return shares[r["step"]]

    chosen, met, seen = choose_online(candidates, share, 0.10)
    assert (chosen["step"], met) == (75, True) and played == [100, 75]  # bound inclusive; 25 never played
    assert seen == [{"step": 100, "needless_episodes": 0.15}, {"step": 75, "needless_episodes": 0.10}]


def test_online_keeps_the_lowest_share_when_none_meets_the_bound():
    candidates = [row(100, 0.6, 0.57), row(75, 0.5, 0.57), row(25, 0.2, 0.57)]
    shares = {100: 0.30, 75: 0.125, 25: 0.125}
    chosen, met, seen = choose_online(candidates, lambda r: shares[r["step"]], 0.10)
    assert (chosen["step"], met, len(seen)) == (75, False, 3)  # the tie goes to the better candidate
    with pytest.raises(ValueError, match="no checkpoints"):
        choose_online([], lambda r: 0.0, 0.10)


# ---------------------------------------------------------------- the chosen checkpoint's ask bias
def _selected_run(tmp_path, meta: dict):
    """A run folder whose `selected/` holds a stand-in model file and the run's record, with its marker."""
    import json

    from inquire_lib.runs.integrity import write_marker

    selected = tmp_path / "grpo_full" / "selected"
    selected.mkdir(parents=True)
    (selected / "model.safetensors").write_bytes(b"weights")
    (selected / "inquire_train.json").write_text(json.dumps(meta))
    write_marker(selected)
    return selected.parent


def test_ask_bias_takes_the_first_bias_under_the_bound_and_plays_no_further(tmp_path, monkeypatch):
    import json

    from inquire_lib.profiles import get_profile
    from inquire_lib.runs.integrity import verify
    from inquire_lib.training import selection
    from inquire_lib.training.checkpoints import ask_bias_of

    run = _selected_run(tmp_path, {"base": "b", "selected_step": 150, "constraints_met": True})
    shares = {0.0: 0.0875, -2.0: 0.0625, -4.0: 0.05, -6.0: 0.0}
    played = []

    def share(profile, path, tasks, base=None, ask_bias=0.0):
        played.append(ask_bias)
        assert path == str(run / "selected") and base == "b" and tasks == ["t"]
        return shares[ask_bias]

    monkeypatch.setattr(selection, "needless_episode_share", share)
    monkeypatch.setattr(selection, "validation_tasks", lambda profile: ["t"])
    profile = get_profile("smoke", select_ask_biases=(0.0, -2.0, -4.0, -6.0), select_bias_max_needless_episodes=0.05)
    record = selection.select_ask_bias(profile, "grpo_full", run, out_root=tmp_path / "runs", known={0.0: 0.0875})
    assert played == [-2.0, -4.0]  # bias 0 already known; -6 never played
    assert (record["ask_bias"], record["ask_bias_met"]) == (-4.0, True)
    assert record["ask_biases"] == [
        {"ask_bias": 0.0, "needless_episodes": 0.0875},
        {"ask_bias": -2.0, "needless_episodes": 0.0625},
        {"ask_bias": -4.0, "needless_episodes": 0.05},
    ]
    meta = json.loads((run / "selected" / "inquire_train.json").read_text())
    assert meta == {"base": "b", "selected_step": 150, "constraints_met": True, "ask_bias": -4.0, "ask_bias_met": True}
    assert ask_bias_of(str(run / "selected")) == -4.0
    assert verify(run / "selected") is None and (run / "selected" / "model.safetensors").read_bytes() == b"weights"
    stored = json.loads((tmp_path / "runs" / "smoke" / "default" / "metrics" / "selection_grpo_full.json").read_text())
    assert stored["ask_bias"] == -4.0 and stored["bias_max_needless_episodes"] == 0.05


def test_ask_bias_keeps_the_lowest_share_when_none_meets_the_bound(tmp_path, monkeypatch):
    from inquire_lib.profiles import get_profile
    from inquire_lib.training import selection

    run = _selected_run(tmp_path, {"base": None})
    shares = {0.0: 0.2, -2.0: 0.1, -4.0: 0.1}
    monkeypatch.setattr(
        selection, "needless_episode_share", lambda p, path, t, base=None, ask_bias=0.0: shares[ask_bias]
    )
    monkeypatch.setattr(selection, "validation_tasks", lambda profile: [])
    profile = get_profile("smoke", select_ask_biases=(0.0, -2.0, -4.0), select_bias_max_needless_episodes=0.05)
    record = selection.select_ask_bias(profile, "grpo_full", run, out_root=tmp_path / "runs")
    assert (record["ask_bias"], record["ask_bias_met"], len(record["ask_biases"])) == (
        -2.0,
        False,
        3,
    )  # tie: nearer zero


def test_a_checkpoints_ask_bias_is_read_from_its_record_and_checked(tmp_path):
    from inquire_lib.training.checkpoints import ask_bias_of

    assert ask_bias_of(None) == 0.0 and ask_bias_of(str(tmp_path)) == 0.0  # the untrained model; no record
    (tmp_path / "inquire_train.json").write_text('{"selected_step": 25}')
    assert ask_bias_of(str(tmp_path)) == 0.0
    (tmp_path / "inquire_train.json").write_text('{"ask_bias": -3}')
    assert ask_bias_of(str(tmp_path)) == -3.0
    for bad in ('{"ask_bias": "low"}', '{"ask_bias": true}', "[1]"):
        (tmp_path / "inquire_train.json").write_text(bad)
        with pytest.raises(ValueError, match=r"inquire_train\.json: "):
            ask_bias_of(str(tmp_path))


def test_the_same_weights_at_another_ask_bias_are_another_evaluation(tmp_path):
    """An evaluation read back must have played the same operating point: the read-back key's model part
    holds the checkpoint's ask bias, and is the bare weights' digest without one."""
    from inquire_lib.stages import played_digest
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.grpo import model_digest

    smoke = get_profile("smoke")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    bare = played_digest(str(tmp_path), smoke)
    assert bare == model_digest(str(tmp_path), smoke)
    (tmp_path / "inquire_train.json").write_text('{"ask_bias": -4.0}')
    assert played_digest(str(tmp_path), smoke) == bare + "+ask_bias=-4.0"


@pytest.mark.parametrize(
    "engine, bias, used", [("openvino", 0.0, "openvino"), ("openvino", 0.5, "hf"), ("hf", 0.0, "hf")]
)
def test_validation_plays_on_the_engine_the_test_evaluation_plays_on(monkeypatch, engine, bias, used):
    from inquire_lib.profiles import get_profile
    from inquire_lib.training import selection

    calls = []

    def loader(kind):
        def load(profile, path, base=None):
            calls.append((kind, path, base))
            return "held"

        return load

    monkeypatch.setattr(selection, "loaded", loader("hf"))
    monkeypatch.setattr(selection, "engine_loaded", loader("openvino"))
    assert (
        selection.on_engine(get_profile("smoke").replace(eval_engine=engine), "/run/checkpoint-10", "/base", bias)
        == "held"
    )
    assert calls == [(used, "/run/checkpoint-10", "/base")]


def test_a_trainers_checkpoint_takes_the_base_it_is_given(tmp_path):
    import json

    from inquire_lib.profiles import get_profile
    from inquire_lib.training.models import base_of

    smoke = get_profile("smoke")
    adapter, full = tmp_path / "checkpoint-10", tmp_path / "full"
    adapter.mkdir()
    full.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert base_of(str(adapter), smoke, "/merged") == "/merged"
    assert base_of(str(full), smoke, "/merged") == str(full)  # a full model is its own base
    (adapter / "inquire_train.json").write_text(json.dumps({"base": "/recorded"}))
    assert base_of(str(adapter), smoke) == "/recorded"
