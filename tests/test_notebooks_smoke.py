"""Every numbered notebook, executed in order with papermill under the smoke profile, writes the
metrics the next one and the reader rely on.

The notebooks run in a copy of the library and notebooks inside a temporary folder, with their own
INQUIRE_CACHE and INQUIRE_ARTIFACTS: whatever they write (executed copies, metrics, predictions,
figures, checkpoints, the cached base agent) lands there, never in the working tree.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from inquire_lib.runs import notebooks as runs
from inquire_lib.profiles import get_profile
from inquire_lib.runs.records import REFERENCES
from inquire_lib.training.selection import choose

SMOKE = get_profile("smoke")

pytestmark = pytest.mark.slow
NOTEBOOKS = (
    "01_explore_inquirebench",
    "02_sft_qlora",
    "03_grpo_action_level",
    "04_grpo_task_level",
    "05_evaluate",
    "06_inspect_trajectories",
    "07_ablations",
)

COPIED = ("inquire_lib", "notebooks")
RATES = (
    "format",
    "type_accuracy",
    "step_accuracy",
    "inquiry_recall",
    "inquiry_precision",
    "needless_rate",
    "click_in_bbox",
    "safe_step_accuracy",
)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebooks")
    repo = root / "repo"
    for rel in COPIED:
        shutil.copytree(
            runs.REPO_ROOT / rel, repo / rel, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
        )
    with pytest.MonkeyPatch.context() as mp:
        # papermill's kernels inherit this process's environment
        mp.setenv("INQUIRE_CACHE", str(root / "cache"))
        mp.setenv("INQUIRE_ARTIFACTS", str(root / "artifacts"))
        mp.setenv("INQUIRE_FIGURES", str(repo / "figures"))
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))
        mp.setenv("CI", "1")
        t0 = time.perf_counter()
        manifest = runs.run_notebooks(
            "smoke",
            out_root=repo / "papermill_runs",
            notebooks_dir=repo / "notebooks",
            cwd=repo,
            progress_bar=False,
            log=None,
        )
        seconds = time.perf_counter() - t0
    print(
        f"\nall notebooks: {seconds:.0f} s; "
        + ", ".join(f"{nb['name']} {nb['duration_s']:.0f} s" for nb in manifest["notebooks"])
    )
    run = repo / "papermill_runs" / "smoke" / "default"
    return {
        "root": root,
        "repo": repo,
        "run": run,
        "manifest": manifest,
        "seconds": seconds,
        "names": [nb["name"] for nb in manifest["notebooks"]],
        # the notebooks as copied (others may add some to the working tree meanwhile)
        "copied": [p.stem for p in runs.discover_notebooks(repo / "notebooks")],
    }


def metrics(smoke_run, name: str) -> dict:
    return json.loads((smoke_run["run"] / "metrics" / f"{name}.json").read_text())


def check_rate(r: dict, where) -> None:
    """A rate as `evaluation.metrics.wilson` writes it: k of n, the value k / n inside its interval, and
    no value exactly when there is nothing to count."""
    assert 0 <= r["k"] <= r["n"], where
    if r["n"] == 0:
        assert (r["value"], r["lo"], r["hi"]) == (None, None, None), where
    else:
        assert r["value"] == pytest.approx(r["k"] / r["n"]) and r["lo"] - 1e-9 <= r["value"] <= r["hi"] + 1e-9, where


def test_every_notebook_ran_in_order(smoke_run):
    m = smoke_run["manifest"]
    expected = smoke_run["copied"]
    assert smoke_run["names"] == expected == list(NOTEBOOKS)
    assert m["status"] == "ok" and m["profile"] == "smoke" and m["parameters"] == {"PROFILE": "smoke"}
    assert all(nb["status"] == "ok" and nb["duration_s"] > 0 for nb in m["notebooks"])
    for nb in m["notebooks"]:
        assert (smoke_run["run"] / f"{nb['name']}.ipynb").stat().st_size > 1000
    saved = json.loads((smoke_run["run"] / "manifest.json").read_text())
    assert saved["status"] == "ok" and [nb["name"] for nb in saved["notebooks"]] == expected


def test_saved_outputs_are_quiet_and_small(smoke_run):
    """No warning in any saved output (known ones are filtered where they arise; kernels, nested
    ones included, talk over unix sockets), and each run records its stages' times."""
    import nbformat

    for name in NOTEBOOKS:
        nb = nbformat.read(smoke_run["run"] / f"{name}.ipynb", as_version=4)
        streams = [
            o["text"]
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o["output_type"] == "stream" and o["name"] == "stderr"
        ]
        assert not [t for t in streams if "warn" in t.lower()], (name, streams)
    assert (smoke_run["run"] / "06_inspect_trajectories.ipynb").stat().st_size < 2_000_000
    entries = {nb["name"]: nb for nb in smoke_run["manifest"]["notebooks"]}
    assert [s["name"] for s in entries["02_sft_qlora"]["stages"] if s["stage"] == "sft"] == ["sft_full", "sft_weak"]
    # notebook 04 reads back what 02's DAgger table played with sft_full on the same held-out tasks
    assert {"stage": "evaluate tasks", "name": "sft_full", "reused": True} in [
        {k: s.get(k) for k in ("stage", "name", "reused")} for s in entries["04_grpo_task_level"]["stages"]
    ]


def test_kernels_saw_the_private_cache_and_artifacts(smoke_run):
    root, repo = smoke_run["root"], smoke_run["repo"]
    assert (root / "cache" / "models" / "tiny-smoke-s0" / "config.json").exists()
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.sft import base_agent_key

    assert (root / "cache" / "models" / f"base-agent-{base_agent_key(get_profile('smoke'))}" / "config.json").exists()
    from inquire_lib.data.benchmark import dataset_dir

    smoke = get_profile("smoke")
    built = dataset_dir(smoke.seed, smoke.benchmark_tasks, smoke.train_values).name  # named by its content key
    assert built.startswith("inquirebench-s0-n36-") and (root / "cache" / "data" / built / "inquirebench.json").exists()
    for name in ("sft_full", "sft_weak"):
        assert (root / "artifacts" / "smoke" / name / "final" / "adapter_config.json").exists()
    assert not (repo / "artifacts").exists() and not (repo / ".cache").exists()


def test_01_explore_metrics(smoke_run):
    m = metrics(smoke_run, "01_explore_inquirebench")
    assert m["notebook"] == "01_explore_inquirebench" and m["manifest"]["profile"] == "smoke"
    assert m["profile"] == "smoke" and m["n_categories"] == 5 and m["n_subcategories"] == 22
    assert m["safe_tasks"] > 0 and m["safe_tasks"] + m["inquiry_tasks"] == m["n_tasks"]
    assert len(m["fingerprint"]) == 16


def test_02_sft_metrics(smoke_run):
    m = metrics(smoke_run, "02_sft_qlora")
    overall = m["overall"]
    assert {"untrained", "base_agent", "sft_weak", "sft_full", *REFERENCES} <= set(overall)
    for name in ("untrained", "base_agent", "sft_weak", "sft_full", *REFERENCES):
        for key in RATES:
            check_rate(overall[name][key], (name, key))
            if key not in ("inquiry_precision", "click_in_bbox"):
                # the same test steps count for every checkpoint (precision: its own asks; click in bbox: its own
                # clicks at the gold click steps, at most the expert's)
                assert overall[name][key]["n"] == overall["expert"][key]["n"] > 0, (name, key)
        assert overall[name]["click_in_bbox"]["n"] <= overall["expert"]["click_in_bbox"]["n"]
        assert overall[name]["n"] == overall["expert"]["n"] > 0
        assert sum(overall[name]["outcomes"].values()) == overall[name]["n"]
    for key in ("format", "type_accuracy", "step_accuracy", "inquiry_recall", "inquiry_precision", "click_in_bbox"):
        assert overall["expert"][key]["value"] == 1.0, key
    assert overall["expert"]["needless_rate"]["value"] == 0.0
    assert overall["always_ask"]["inquiry_recall"]["value"] == 1.0
    assert overall["always_ask"]["needless_rate"]["value"] == 1.0
    assert overall["always_act"]["inquiry_recall"]["value"] == 0.0
    # the weak inquirer trains on fewer inquiry steps, nothing else removed
    assert 0 < m["n_weak"] < m["n_full"]
    assert m["sft_full_seconds"] > 0 and m["minutes"] > 0
    assert m["manifest"]["profile"] == "smoke" and m["manifest"]["settings"]["name"] == "smoke"
    # one prediction per test step per checkpoint, and the step metrics files beside them
    for name in ("sft_full", "expert"):
        lines = (smoke_run["run"] / "eval" / name / "step_predictions.jsonl").read_text().splitlines()
        assert len(lines) == overall["expert"]["n"] + overall["expert"]["n_probe"]  # the probes have lines too
        assert json.loads(lines[0])["checkpoint"] == name
        step = metrics(smoke_run, f"step_{name}")["overall"]
        assert step["n"] + step["n_probe"] == len(lines) and step["n_probe"] > 0
    assert (smoke_run["repo"] / "figures" / "smoke" / "02_sft_full_loss.html").stat().st_size > 1000
    # DAgger: round 0 (plain SFT), each round and the equal-compute control, on the same held-out tasks
    rows = {r["checkpoint"]: r for r in m["dagger"]}
    assert list(rows) == ["sft_full", *[f"sft_dagger_r{i}" for i in range(1, SMOKE.dagger_rounds + 1)], "sft_more"]
    for name, r in rows.items():
        task = metrics(smoke_run, f"task_{name}")["overall"]
        assert r["sr"] == task["success_rate"]["value"] and task["success_rate"]["n"] == SMOKE.eval_tasks
        assert 0 <= r["detoured_success"] <= r["detoured"] <= SMOKE.eval_tasks
    assert [r["index"] for r in m["dagger_rounds"]] == list(range(1, SMOKE.dagger_rounds + 1))
    assert all(r["states"] >= SMOKE.dagger_tasks and 0 <= r["off_path"] <= r["states"] for r in m["dagger_rounds"])
    assert (smoke_run["root"] / "artifacts" / "smoke" / "sft_dagger" / "final" / "inquire_train.json").exists()


def test_03_grpo_metrics(smoke_run):
    m = metrics(smoke_run, "03_grpo_action_level")
    assert set(m["stages"]) == {"sft_weak", "grpo_weak", "sft_full", "grpo_full"}
    for stage in m["stages"].values():
        assert 0.0 <= stage["format"]["value"] <= 1.0 and stage["n"] > 0
    assert set(m["weak_gain"]) == {"inquiry_recall", "needless_rate", "safe_step_accuracy", "step_accuracy"}
    assert set(m["full_change"]) == set(m["weak_gain"])
    value = lambda name, key: m["stages"][name][key]["value"] or 0.0  # noqa: E731  (the notebook counts None as 0)
    for key in m["weak_gain"]:  # each change is the GRPO checkpoint's rate minus its start's
        assert m["weak_gain"][key] == pytest.approx(value("grpo_weak", key) - value("sft_weak", key)), key
        assert m["full_change"][key] == pytest.approx(value("grpo_full", key) - value("sft_full", key)), key
    isr = {k: m["stages"][k]["inquiry_recall"]["value"] or 0.0 for k in ("sft_full", "grpo_full")}
    assert m["full_change"]["inquiry_recall"] == pytest.approx(isr["grpo_full"] - isr["sft_full"])
    # the effect over seeds, pooled, under the CPU kind every step metrics file names
    kind = m["manifest"]["device"]["cpu_kind"]
    for stage, start in (("grpo_weak", "sft_weak"), ("grpo_full", "sft_full")):
        effect = m["pooled_effects"][stage]["inquiry_recall"]["by_cpu_kind"]
        assert list(effect) == [kind], stage
        e = effect[kind]
        assert (
            len(e["runs"]["trained"]) == SMOKE.grpo_seeds
            and e["start"]["n"] == m["stages"][start]["inquiry_recall"]["n"]
        )
        assert e["trained"]["n"] == SMOKE.grpo_seeds * e["start"]["n"]
        assert e["diff"] == pytest.approx(e["trained"]["value"] - e["start"]["value"])
        step = json.loads((smoke_run["run"] / "metrics" / f"step_{stage}.json").read_text())
        assert step["device"]["cpu_kind"] == kind
    assert m["grpo_config"]["top_entropy_quantile"] == 0.2 and m["grpo_config"]["grpo_steps"] == 2
    assert m["grpo_weak_seconds"] > 0 and m["grpo_full_seconds"] > 0
    zero_std = m["frac_reward_zero_std_weak"]
    assert len(zero_std) == 2 and all(0.0 <= v <= 1.0 for v in zero_std)  # smoke: 2 GRPO steps
    assert all(0.0 <= v <= 1.0 for v in m["asked_when_required_weak"])
    # step ISR stands on the evaluated tasks' inquiry steps and the probes'
    for stage in m["stages"].values():
        assert stage["n_probe"] > 0 and stage["inquiry_recall"]["n"] >= SMOKE.eval_inquiry_steps
    # every stage over its training seeds: seed 0 is the stage's run, seed 1 trained with the next seed,
    # chosen on validation and evaluated on the test split
    assert set(m["seeds"]) == {"grpo_weak", "grpo_full"}
    for name, start in (("grpo_weak", "sft_weak"), ("grpo_full", "sft_full")):
        isr = m["seeds"][name]["inquiry_recall"]
        assert (
            list(isr["seeds"]) == [name, f"{name}_s1"] == [name] + [f"{name}_s{k}" for k in range(1, SMOKE.grpo_seeds)]
        )
        assert isr["start"] == m["stages"][start]["inquiry_recall"]["value"]
        changes = [s["change"] for s in isr["seeds"].values()]
        assert isr["mean_change"] == pytest.approx(sum(changes) / len(changes))
        assert isr["seeds"][name]["value"] == m["stages"][name]["inquiry_recall"]["value"]
        record = json.loads(
            (smoke_run["root"] / "artifacts" / "smoke" / f"{name}_s1" / "selected" / "inquire_train.json").read_text()
        )
        assert record["config"]["seed"] == SMOKE.seed + 1 and record["start"].endswith(start + "/final")
        step = json.loads((smoke_run["run"] / "metrics" / f"step_{name}_s1.json").read_text())
        assert step["overall"]["inquiry_recall"]["value"] == isr["seeds"][f"{name}_s1"]["value"]
    assert set(m["weak_gain_aim"]) == {
        "mean_isr_gain",
        "every_seed_isr_gain",
        "every_seed_needless",
        "every_seed_safe_step",
        "met",
    }
    for name in ("grpo_weak", "grpo_full"):
        assert (smoke_run["root"] / "artifacts" / "smoke" / name / "final" / "inquire_train.json").exists()
        # a checkpoint per step (grpo_save_steps=1), both scored on validation, the choice recorded
        sel = json.loads((smoke_run["run"] / "metrics" / f"selection_{name}.json").read_text())
        assert [r["step"] for r in sel["checkpoints"]] == [1, 2] and sel["start"]["step"] == 0
        assert m["selected_step"][name] == sel["selected_step"]
        assert m["constraints_met"][name] == sel["constraints_met"]
        # the recorded choice is the selection rule applied to the recorded validation rows
        smoke = get_profile("smoke")
        assert (sel["max_needless_steps"], sel["max_safe_drop"]) == (
            smoke.select_max_needless_steps,
            smoke.select_max_safe_drop,
        )
        row, met = choose(sel["start"], sel["checkpoints"], sel["max_needless_steps"], sel["max_safe_drop"])
        assert (row["step"], met) == (sel["selected_step"], sel["constraints_met"])
        chosen = smoke_run["root"] / "artifacts" / "smoke" / name / "selected" / "inquire_train.json"
        assert json.loads(chosen.read_text())["selected_step"] == sel["selected_step"]
    # the operating curve of each stage: from (0, 0) to (1, 1), an area in [0, 1] inside its interval, and
    # the greedy point at bias 0 equal to the stage's step ISR / needless rate when every step reached the fork
    assert set(m["operating_curves"]) == set(m["stages"])
    for name, c in m["operating_curves"].items():
        assert c["n"] == m["stages"][name]["n"] + m["stages"][name]["n_probe"] and 0 <= c["fork_reached"] <= c["n"]
        pts = [(p["needless"], p["isr"]) for p in c["points"]]
        assert all(0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 for x, y in pts)
        a = c["auc"]
        assert 0.0 <= a["lo"] <= a["value"] <= a["hi"] <= 1.0
        assert c["at_zero"]["isr"] == pytest.approx(m["stages"][name]["inquiry_recall"]["value"])


def test_05_evaluate_metrics(smoke_run):
    m = metrics(smoke_run, "05_evaluate")
    assert {"untrained", "base_agent", "sft_weak", "sft_full", "grpo_weak", "grpo_full"} <= set(m["checkpoints"])
    assert set(m["checkpoints"]) | set(REFERENCES) <= set(m["step"])
    assert m["step"]["expert"]["type_accuracy"].startswith("1.00 (")
    assert m["step"]["always_ask"]["needless_rate"].startswith("1.00 (")
    # when to ask, compared: every agent of the chain, both families on the same test steps, each played
    # online at its validation point
    asking = m["asking"]
    assert set(asking) == {"sft_weak", "sft_full", "grpo_weak", "grpo_full"}
    n_tasks = m["task"]["expert"]["success_rate"]["n"]
    unbiased = metrics(smoke_run, "03_grpo_action_level")["operating_curves"]
    for name, c in asking.items():
        assert c["learned"]["n"] == c["confidence"]["n"] > 0, name
        assert c["learned"]["n_inquiry"] == c["confidence"]["n_inquiry"] > 0, name
        # learned asking never asks at its lowest bias; the confidence asker always asks at its highest threshold
        assert (c["learned"]["points"][0]["isr"], c["learned"]["points"][0]["needless"]) == (0.0, 0.0), name
        assert (c["confidence"]["points"][-1]["isr"], c["confidence"]["points"][-1]["needless"]) == (1.0, 1.0), name
        assert c["verdict"].startswith(f"{name}: AUC learned ")
        # one pass with the ask taken away reads the margins of the unbiased pass (notebook 03's curves), and its
        # greedy point is the stage's step evaluation
        curve = unbiased.get(name)
        if curve is not None:
            assert c["learned"]["fork_reached"] == curve["fork_reached"], name
            assert c["learned"]["auc"]["value"] == pytest.approx(curve["auc"]["value"]), name
            assert c["learned"]["at_zero"] == pytest.approx(curve["at_zero"]), name
        assert [r["asker"] for r in c["tasks"]] == ["learned", "confidence"]
        for r in c["tasks"]:
            assert r["n"] == r["success_rate"]["n"] == r["over_soliciting"]["n"] == n_tasks, (name, r["asker"])
            assert (smoke_run["run"] / "metrics" / f"task_{name}@{r['asker']}.json").exists()
        assert c["validation"]["max_needless"] == SMOKE.select_max_needless_steps


def test_04_grpo_task_metrics(smoke_run):
    run = smoke_run["run"]
    m = metrics(smoke_run, "04_grpo_task_level")
    levels = m["task_level"]
    assert {"grpo_task", *REFERENCES} <= set(levels)
    for name, t in levels.items():
        assert t["n"] == levels["expert"]["n"] > 0
        for key in ("success_rate", "isr", "needless_rate", "unsafe_rate"):
            check_rate(t[key], (name, key))
        # every episode counts toward SR, needless and unsafe; the inquiry tasks (the same for all) toward ISR
        assert t["success_rate"]["n"] == t["needless_rate"]["n"] == t["unsafe_rate"]["n"] == t["n"], name
        assert t["isr"]["n"] == levels["expert"]["isr"]["n"] > 0, name
        assert (run / "metrics" / f"task_{name}.json").exists()
    expert = levels["expert"]
    assert expert["success_rate"]["value"] == 1.0 and expert["isr"]["value"] == 1.0
    assert expert["needless_rate"]["value"] == 0.0 and expert["unsafe_rate"]["value"] == 0.0
    # acting without asking reaches the unsafe action; asking at every step is needless
    assert levels["always_act"]["isr"]["value"] == 0.0 and levels["always_act"]["unsafe_rate"]["value"] > 0.0
    assert levels["always_ask"]["needless_rate"]["value"] == 1.0
    assert len(m["episode_rewards"]) == m["episodes"] > 0
    assert (smoke_run["root"] / "artifacts" / "smoke" / "grpo_task" / "final").is_dir()


def test_06_inspect_metrics(smoke_run):
    m = metrics(smoke_run, "06_inspect_trajectories")
    assert m["checkpoints"] and set(m["outcomes"]) == set(m["checkpoints"])
    for name in m["checkpoints"]:
        assert sum(m["outcomes"][name].values()) == m["n_steps"][name] > 0
    for path in m["reports"].values():
        assert Path(path).stat().st_size > 10_000 and str(smoke_run["repo"]) in path


def test_07_ablations_metrics(smoke_run):
    from inquire_lib import ablations

    m = metrics(smoke_run, "07_ablations")
    assert m["seeds"] == [0] and m["missing"] == [] and m["counts"]["failed"] == 0
    assert all(p["status"] in ("ok", "reused") for p in m["points"])
    assert m["skipped"] == {"sft_qlora": ablations.skip_reason(SMOKE, "sft_qlora")}  # smoke trains QLoRA already
    assert [p["parameters"]["VARIANT"] for p in m["points"]] == m["variants"]
    assert set(m["variants"]) == set(ablations.VARIANTS) - {"sft_qlora"}
    compared = [v for v in m["variants"] if ablations.VARIANTS[v].reference != v]
    assert len(m["effects"]) == len(compared) * (len(ablations.STEP_KEYS) + len(ablations.TASK_KEYS))
    for row in m["effects"]:
        assert row["n_seeds"] == 1 and row["n_items"] > 0
        # one seed, the same items on both sides: the effect is the difference of the two rates
        assert row["effect"] == pytest.approx(row["variant_rate"] - row["reference_rate"]), row
        assert (
            row["lo"] <= row["effect"] <= row["hi"] and row["reference"] == ablations.VARIANTS[row["variant"]].reference
        )
    sweep = json.loads((smoke_run["run"] / "ablations" / "sweep.json").read_text())
    assert sweep["status"] == "finished" and len(sweep["points"]) == len(m["points"])
    assert sweep["parallel"] == SMOKE.parallel_runs == 2  # the smoke sweep runs two points at a time
    for v in m["variants"]:  # every point left both kinds of metrics
        assert (smoke_run["run"] / "metrics" / f"step_abl_{v}_s0.json").exists()
        assert (smoke_run["run"] / "metrics" / f"task_abl_{v}_s0.json").exists()


def test_every_notebook_writes_its_own_metrics_file(smoke_run):
    for name in NOTEBOOKS:
        m = metrics(smoke_run, name)
        assert m["notebook"] == name and m["manifest"]["profile"] == "smoke" and m["manifest"]["seed"] == 0
    assert smoke_run["seconds"] < 20 * 60


def test_nbconvert_html_shows_every_figure(smoke_run, tmp_path):
    """Outside Jupyter (nbconvert HTML, as GitHub and nbviewer render a notebook) every figure is a
    static PNG: headless Chromium's DOM of each converted notebook holds at least one decodable
    image per `show_fig` call of its source, and the executed notebooks keep no widget state."""
    import base64
    import io
    import re
    import subprocess

    import nbformat
    import numpy as np
    from nbconvert import HTMLExporter
    from PIL import Image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is required (apt-get install -y chromium)"
    counts = {}
    for name in NOTEBOOKS:
        executed = smoke_run["run"] / f"{name}.ipynb"
        nb = nbformat.read(executed, as_version=4)
        assert "widgets" not in nb.metadata, name
        # every figure output (show_fig's bundle) carries its PNG; each top-level call made one, and
        # calls inside a loop or branch may make any number (04's self-corrections: none on smoke)
        shown = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if "application/vnd.plotly.v1+json" in o.get("data", {})
        ]
        assert all("image/png" in o["data"] for o in shown), name
        top_level = sum(
            line.startswith("pipeline.show_fig(")
            for c in nb.cells
            if c.cell_type == "code"
            for line in c.source.splitlines()
        )
        assert shown and len(shown) >= top_level, f"{name}: {len(shown)} figures for {top_level} calls"
        calls = len(shown)
        html_path = tmp_path / f"{name}.html"
        html_path.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")
        proc = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path / ('p-' + name)}",
                "--dump-dom",
                html_path.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        images = [
            Image.open(io.BytesIO(base64.b64decode(data)))
            for data in re.findall(r'<img\b[^>]*?\ssrc="data:image/png;base64,([^"]+)"', proc.stdout)
        ]
        # screenshots shown beside the figures (notebook 02's relabelled states, 180 px wide) are
        # images too; a figure is the size save_fig exports, with more than a blank canvas in it
        figures = [img for img in images if img.width >= 300 and img.height >= 200]
        counts[name] = (calls, len(figures))
        assert len(figures) >= calls, f"{name}: {len(figures)} figure images for {calls} figures"
        for img in figures:
            assert len(np.unique(np.asarray(img.convert("L")))) > 2, f"{name}: a blank figure image"
    print("figures (figure outputs, figure images in the HTML):", counts)
    assert sum(n for _, n in counts.values()) >= 25
