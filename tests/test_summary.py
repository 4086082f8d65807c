"""`inquire summary`: a run's Markdown tables are read from its metrics and manifest, numbers intact."""

from __future__ import annotations

import json
import subprocess
import sys

from inquire_lib.runs.summary import rate, summary


def _rate(k, n, lo=0.1, hi=0.9):
    return {"value": k / n if n else None, "lo": lo if n else None, "hi": hi if n else None, "k": k, "n": n}


def _write_run(root):
    (root / "metrics").mkdir(parents=True)
    step = {
        "checkpoint": "sft_full",
        "overall": {
            "n": 425,
            "format": _rate(408, 425),
            "step_accuracy": _rate(217, 425),
            "click_in_bbox": _rate(106, 190),
            "inquiry_recall": _rate(18, 40, 0.31, 0.6),
            "needless_rate": _rate(6, 385),
            "safe_step_accuracy": _rate(199, 385),
            "by_gold_action": {"open": _rate(16, 80), "type": _rate(0, 35), "click": _rate(106, 190)},
        },
    }
    (root / "metrics" / "step_sft_full.json").write_text(json.dumps(step))
    (root / "metrics" / "step_base_agent.json").write_text(
        json.dumps({"checkpoint": "base_agent", "overall": {"n": 10, "inquiry_recall": _rate(0, 0)}})
    )
    task = {
        "checkpoint": "sft_full",
        "overall": {
            "n": 160,
            "success_rate": _rate(5, 160, 0.01, 0.07),
            "detour_success_rate": _rate(0, 0),
            "asks_answered": _rate(58, 72, 0.70, 0.88),
            "uiq": {"value": 0.382, "lo": 0.338, "hi": 0.418, "n": 160},
        },
    }
    (root / "metrics" / "task_sft_full.json").write_text(json.dumps(task))
    (root / "metrics" / "step_abl_sft_no_think_s0.json").write_text(
        json.dumps({"checkpoint": "abl_sft_no_think_s0", "overall": {"n": 3}})
    )
    (root / "manifest.json").write_text(
        json.dumps(
            {
                "run": "r1",
                "profile": "cpu",
                "git_sha": "abcdef0123456789" * 2,
                "git_dirty": False,
                "finished": "T",
                "notebooks": [
                    {"name": "02_sft_qlora", "status": "ok", "duration_s": 600.0},
                    {"name": "03_grpo_action_level", "status": "failed", "duration_s": 90.0},
                ],
            }
        )
    )


def test_rate_prints_value_interval_and_counts_or_a_dash():
    assert rate(_rate(18, 40, 0.31, 0.6)) == "0.45 (0.31-0.60) 18/40"
    assert rate(_rate(18, 40), interval=False) == "18/40"
    assert rate(_rate(0, 0)) == "-" and rate(None) == "-"


def test_summary_tables_carry_every_checkpoint_in_training_order(tmp_path):
    _write_run(tmp_path)
    text = summary(tmp_path)
    lines = text.splitlines()
    assert lines[0] == "Run `r1`, profile `cpu`, git abcdef012345, finished T"
    rows = [line for line in lines if line.startswith("| ")]
    step_rows = [r for r in rows if r.startswith("| base_agent |") or r.startswith("| sft_full | 425")]
    assert [r.split(" | ")[0] for r in step_rows] == ["| base_agent", "| sft_full"]  # ORDER, not alphabetical
    sft = step_rows[1].strip("| ").split(" | ")
    assert sft[5] == "0.45 (0.31-0.60) 18/40"  # step ISR
    assert sft[-4:] == ["16/80", "106/190", "0/35", "-"]  # open, click, type, terminate
    assert step_rows[0].strip("| ").split(" | ")[5] == "-"  # no inquiry steps: no rate
    task = next(r for r in rows if r.startswith("| sft_full | 160"))
    assert "0.03 (0.01-0.07) 5/160" in task and task.count(" - ") == 6
    # question quality: asks answered with its counts, UIQ (a pooled ratio, no counts) with its episodes
    assert task.strip("| ").split(" | ")[-2:] == ["0.81 (0.70-0.88) 58/72", "0.38 (0.34-0.42) n=160"]
    assert "| 02_sft_qlora | ok | 10.0 |" in text and "| 03_grpo_action_level | failed | 1.5 |" in text
    assert "| total |  | 11.5 |" in text
    assert "abl_sft_no_think_s0 |" not in text and "(1 ablation points not shown" in text
    assert "| abl_sft_no_think_s0 | 3 |" in summary(tmp_path, ablations=True)


def test_the_command_prints_the_tables_and_refuses_a_folder_that_is_no_run(tmp_path):
    _write_run(tmp_path / "run")
    ok = subprocess.run(
        [sys.executable, "-m", "inquire_lib.cli", "summary", str(tmp_path / "run")], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "| sft_full | 425 |" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "inquire_lib.cli", "summary", str(tmp_path)], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"inquire summary: {tmp_path}: not a run folder (no metrics/ and no manifest.json)"
    ]


def test_a_folder_only_tools_wrote_to_is_headed_by_the_manifest_its_newest_report_carries(tmp_path):
    import os

    _write_run(tmp_path)
    (tmp_path / "manifest.json").unlink()
    metrics = tmp_path / "metrics"
    (metrics / "base_agent_steps.json").write_text(
        json.dumps({"part": "steps", "manifest": {"run": "default", "profile": "small", "git_sha": "1" * 40}})
    )
    (metrics / "base_agent_tasks.json").write_text(
        json.dumps({"part": "tasks", "manifest": {"run": "default", "profile": "small", "git_sha": "2" * 40}})
    )
    (metrics / "broken.json").write_text("{")
    os.utime(metrics / "base_agent_steps.json", (1, 1))  # the tasks report is the newer
    os.utime(metrics / "broken.json", (2**31, 2**31))  # the newest file is not JSON: passed over
    assert summary(tmp_path).splitlines()[0] == "Run `default`, profile `small`, git 222222222222, finished ?"


def test_a_truncated_metrics_file_is_one_line_that_names_it(tmp_path):
    _write_run(tmp_path / "run")
    metrics = sorted((tmp_path / "run" / "metrics").glob("step_*.json"))[0]
    metrics.write_text(metrics.read_text()[:40])  # cut short, as by a kill mid-write of a copy
    bad = subprocess.run(
        [sys.executable, "-m", "inquire_lib.cli", "summary", str(tmp_path / "run")], capture_output=True, text=True
    )
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 1 and len(lines) == 1 and "Traceback" not in bad.stderr
    assert lines[0].startswith(f"inquire summary: {metrics}: not valid JSON (")
