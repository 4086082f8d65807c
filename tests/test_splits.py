"""The splits past the generator: each rebuilt bit for bit, of the size and kind it says, played online by
`inquire evaluate --split` into a run of its own, and set against in distribution in the generalisation table."""

from __future__ import annotations

import json

import pytest

from inquire_lib.data import splits
from inquire_lib.profiles import apply_overrides
from inquire_lib.runs.summary import generalisation_markdown

SMOKE = apply_overrides("smoke", {"eval_tasks": 8})


def test_the_held_out_phrasing_split_holds_only_the_phrasing_training_never_sees():
    tasks = splits.split_tasks(SMOKE, "held_out_phrasing")
    assert len(tasks) == 8 and all(t.template.endswith(":3") for t in tasks)
    assert len({t.task_id for t in tasks}) == 8 and all(t.task_id.startswith("test-0-") for t in tasks)
    assert splits.split_fingerprint(tasks) == splits.split_fingerprint(splits.split_tasks(SMOKE, "held_out_phrasing"))
    other_seed = splits.split_tasks(apply_overrides("smoke", {"eval_tasks": 8, "seed": 1}), "held_out_phrasing")
    assert splits.split_fingerprint(other_seed) != splits.split_fingerprint(tasks)


def test_every_split_says_what_it_is_for_and_an_unknown_one_is_refused():
    assert set(splits.SPLITS) == {"test", "held_out_phrasing", "written"} and all(splits.SPLITS.values())
    assert len(splits.split_tasks(SMOKE, "written")) == 187
    assert [t.task_id for t in splits.split_tasks(SMOKE, "test")] == [f"test-0-{i:05d}" for i in range(8)]
    with pytest.raises(ValueError, match="split 'perturbed'"):
        splits.split_tasks(SMOKE, "perturbed")


def _task_metrics(folder, name, sr, n=10):
    folder.mkdir(parents=True, exist_ok=True)
    rates = {"success_rate": {"value": sr / n, "lo": 0.0, "hi": 1.0, "k": sr, "n": n}}
    rates |= {k: {"value": None, "n": 0} for k in ("isr", "needless_rate", "unsafe_rate")}
    (folder / f"task_{name}.json").write_text(json.dumps({"checkpoint": name, "overall": {"n": n, **rates}}))


def test_the_generalisation_table_sets_each_split_against_in_distribution(tmp_path):
    _task_metrics(tmp_path / "default" / "metrics", "sft_full", 8)
    _task_metrics(tmp_path / "split-written" / "metrics", "sft_full", 5)
    _task_metrics(tmp_path / "split-written" / "metrics", "always_act", 4)
    table = generalisation_markdown(
        tmp_path / "default", {"written": tmp_path / "split-written"}, ["sft_full", "always_act"]
    )
    rows = table.splitlines()[2:]
    assert rows[0].startswith("| sft_full | test | 10 | 0.80 (0.00-1.00) 8/10 |")
    assert rows[1].startswith("| sft_full | written | 10 | 0.50 (0.00-1.00) 5/10 (-30 pts) |")
    assert (
        rows[2].startswith("| always_act | written | 10 | 0.40") and "pts" not in rows[2]
    )  # nothing to set it against
    assert len(rows) == 3


@pytest.mark.slow
def test_inquire_evaluate_plays_a_split_into_its_own_run(tmp_path, capsys, monkeypatch):
    from inquire_lib import cli

    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("INQUIRE_RUN_NAME", "")
    smoke = ["--profile", "smoke", "--set", "eval_tasks=2", "--set", "max_episode_steps=3"]
    assert cli.main(["evaluate", "untrained", *smoke, "--level", "task", "--run", "content"]) == 0
    assert cli.main(["evaluate", "untrained", *smoke, "--split", "held_out_phrasing", "--run", "content"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "runs" / "smoke"
    played = json.loads((run / "split-held_out_phrasing" / "metrics" / "task_untrained.json").read_text())
    assert (
        played["overall"]["n"] == 2 and (run / "split-held_out_phrasing" / "metrics" / "task_always_act.json").is_file()
    )
    assert "split held_out_phrasing: 2 tasks, fingerprint " in out
    assert "| untrained | test | 2 |" in out and "| untrained | held_out_phrasing | 2 |" in out
