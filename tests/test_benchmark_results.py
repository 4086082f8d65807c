"""The committed benchmark results say what they measured (git sha, profile and its settings) and
their deterministic fields still hold: recomputed here from the library, they must match."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from inquire_lib.profiles import apply_overrides, get_profile

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = sorted((BENCH / "results").glob("*.json"))
sys.path.insert(0, str(BENCH))


def load(name: str) -> dict:
    return json.loads((BENCH / "results" / f"{name}.json").read_text())


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_every_result_is_stamped(path):
    result = json.loads(path.read_text())
    manifest = result["manifest"]
    assert isinstance(manifest["git_sha"], str) and len(manifest["git_sha"]) == 40
    assert manifest["profile"] == manifest["settings"]["name"]
    assert {"transformers", "trl", "torch"} <= set(manifest["packages"])
    # a result that depends on the machine is kept per machine: <benchmark>.<machine>.json
    assert result["benchmark"] == path.stem.split(".")[0]


def test_reward_throughput_recomputes():
    import reward_throughput as bench

    result = load("reward_throughput")
    settings = result["manifest"]["settings"]
    profile = get_profile(result["manifest"]["profile"])
    # stale when the profile's penalties moved on since the file was written
    assert (settings["missed_penalty"], settings["needless_penalty"]) == (
        profile.missed_penalty,
        profile.needless_penalty,
    )
    means = bench.mean_rewards(result["n_completions"], result["seed"], profile.name)
    assert {k: v["mean_reward"] for k, v in result["rewards"].items() if "mean_reward" in v} == means
    assert bench.format_ok_fraction(result["n_completions"], result["seed"]) == result["format_ok_fraction"]


@pytest.mark.parametrize(
    "name, fields",
    [
        (
            "grpo_step",
            {
                "prompts_per_step": "grpo_prompts_per_step",
                "num_generations": "num_generations",
                "max_completion_length": "max_completion_length",
                "beta": "beta",
                "top_entropy_quantile": "top_entropy_quantile",
                "num_iterations": "grpo_iterations",
                "lora": "lora",
                "load_in_4bit": "load_in_4bit",
                "model": "model",
            },
        ),
        ("sft_throughput", {"batch": "sft_batch", "lora": "lora", "load_in_4bit": "load_in_4bit", "model": "model"}),
    ],
)
def test_trainer_benchmarks_match_their_profile(name, fields):
    """The settings a trainer benchmark reports are its stamped profile's, and still the profile's today."""
    result = load(name)
    settings = result["manifest"]["settings"]
    profile = apply_overrides(get_profile(result["profile"]), result.get("overrides") or {}).replace(
        torch_threads=result["torch_threads"]
    )
    assert result["profile"] == result["manifest"]["profile"]
    for reported, field in fields.items():
        assert result[reported] == settings[field] == getattr(profile, field), (reported, field)
    runs = result["runs"]
    assert [r["who"] for r in runs] == ["ours", "bare"] * result["repeats"]
    key = "seconds_per_step" if name == "grpo_step" else "examples_per_s"
    med = lambda who: sorted(r[key] for r in runs if r["who"] == who)  # noqa: E731
    ours, bare = med("ours"), med("bare")
    mid = len(ours) // 2
    median = lambda xs: xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2  # noqa: E731
    assert result["ratio"] == pytest.approx(median(ours) / median(bare), abs=2e-4)
    op = (lambda r, q: r <= q) if name == "grpo_step" else (lambda r, q: r >= q)
    assert result["meets_requirement"] == op(result["ratio"], result["required_ratio"])


def test_cpu_efficiency_recomputes_its_ratios_and_measured_what_it_names():
    import cpu_efficiency as bench

    result = load("cpu_efficiency")
    run, skipped = bench.settings(result["native_bf16"])
    assert [r["setting"] for r in result["sft"]] == [r["setting"] for r in result["grpo"]] == [s[0] for s in run]
    assert result["skipped"] == skipped
    base_sft = next(r for r in result["sft"] if r["setting"] == "1 thread fp32")
    base_grpo = next(r for r in result["grpo"] if r["setting"] == "1 thread fp32")
    for row, (name, procs, threads, bf16) in zip(result["sft"], run):
        assert (row["processes"], row["threads_per_process"]) == (procs, threads)
        assert row["precision"] == ("bf16" if bf16 and result["native_bf16"] else "fp32")
        assert row["examples_per_s"] == pytest.approx(row["steps"] * row["batch"] / row["train_runtime_s"], rel=1e-2)
        assert row["speedup"] == pytest.approx(row["examples_per_s"] / base_sft["examples_per_s"], abs=2e-3)
        assert len(row["loss"]) == row["steps"]
        if "mfu" in row:  # one process: tokens/s known, MFU against the peak of the same precision and threads
            peak = result["matmul_peak_gflop_s"][f"{row['precision']}_{procs * threads}t"]
            assert row["mfu"] == pytest.approx(6 * result["params"] * row["tokens_per_s"] / 1e9 / peak, rel=1e-2)
    for row in result["grpo"]:
        assert row["time_ratio"] == pytest.approx(row["seconds_per_step"] / base_grpo["seconds_per_step"], abs=2e-3)
    best = max(result["sft"], key=lambda r: r["examples_per_s"])
    assert result["best_sft"] == {"setting": best["setting"], "speedup": best["speedup"], "required": 3.0}
    # the same seed and batches: every fp32 setting follows the same loss curve
    fp32 = [r["loss"] for r in result["sft"] if r["precision"] == "fp32"]
    for curve in fp32[1:]:
        assert bench.loss_agreement(fp32[0], curve)["sound"]


def test_a_benchmark_writes_neither_checkpoints_nor_tracker_logs_into_the_users_folders(monkeypatch, tmp_path):
    from _common import private_artifacts

    from inquire_lib.profiles import get_profile as profile_of
    from inquire_lib.runs import paths, tracking

    monkeypatch.setenv("INQUIRE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path / "artifacts"))
    with private_artifacts("inquire-test-bench-") as artifacts:
        assert paths.root("artifacts") == artifacts and artifacts.is_dir()
        logged = tracking.log_dir(profile_of("smoke"), "bench_sft_0")
        assert tmp_path not in logged.parents
        scratch = [artifacts, paths.root("runs")]
    assert all(not p.exists() for p in scratch)
    assert paths.root("runs") == tmp_path / "runs" and paths.root("artifacts") == tmp_path / "artifacts"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "artifacts").exists()


def test_a_trainer_benchmark_measures_the_profile_with_its_overrides():
    from _common import bench_profile

    prof = bench_profile("cpu", ["reward_funcs=format,action,inquiry,consistency", "grpo_inquiry_share=0.5"], threads=1)
    assert tuple(prof.reward_funcs) == ("format", "action", "inquiry", "consistency")
    assert prof.grpo_inquiry_share == 0.5 and prof.torch_threads == 1
    assert dict(prof.overrides) == {
        "reward_funcs": ("format", "action", "inquiry", "consistency"),
        "grpo_inquiry_share": 0.5,
    }
    with pytest.raises(Exception, match="grpo_lrr"):
        bench_profile("cpu", ["grpo_lrr=1"])
