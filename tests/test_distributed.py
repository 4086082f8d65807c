"""The smoke profile's SFT and GRPO under two CPU processes (torchrun, DDP over gloo) against the
same stage in one process, both through `inquire train` (tests/ddp_probe.py records what each rank
trained on).

Tolerance of the loss comparison: 1e-5 relative. Both runs compute the same sums in fp32 over the
same examples; only the order of the additions differs (each rank's partial sum, then the all-reduce
of gradients and token counts), which moves a loss of ~6.7 (SFT) by a few 1e-7 (measured: 5e-7 at
most over 3 steps) and a GRPO loss of ~0.06 by ~1e-8. A wrong split would be far outside it: averaging
per-rank means instead of tokens moved the first SFT loss by 4.5e-3 (7e-4 relative), a different
batch by more still.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inquire_lib.profiles import get_profile

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "ddp_probe.py"
PROFILE = get_profile("smoke")
REL_TOL = 1e-5


def commands(start: str, suffix: str) -> list[list[str]]:
    common = ["--profile", "smoke", "--start-from", start]
    return [
        ["train", "sft", *common, "--name", f"sft_{suffix}", "--max-steps", "3"],
        ["train", "grpo", *common, "--name", f"grpo_{suffix}", "--max-steps", "2"],
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{stage: [one process's record]} and {stage: [rank 0's, rank 1's]}: the single-process runs in
    this process, the two-process runs under torchrun, both through `inquire train`."""
    root = tmp_path_factory.mktemp("ddp")
    environ = {
        "INQUIRE_CACHE": str(root / "cache"),
        "INQUIRE_ARTIFACTS": str(root / "artifacts"),
        "CI": "1",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    sys.path.insert(0, str(PROBE.parent))
    import ddp_probe

    with pytest.MonkeyPatch.context() as mp:
        for k, v in environ.items():
            mp.setenv(k, v)
        from inquire_lib.training.grpo import grpo_records
        from inquire_lib.training.models import model_path

        start = model_path(PROFILE)  # the data and the tiny model, built before any rank starts
        grpo_records(PROFILE)
        threads = torch.get_num_threads()
        one = ddp_probe.run_stages(commands(start, "1p"), mp)
        torch.set_num_threads(threads)
    sys.path.remove(str(PROBE.parent))
    out = root / "probe" / "two.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(29400 + os.getpid() % 500),
        str(PROBE),
        str(out),
        *commands(start, "2p")[0],
        "+",
        *commands(start, "2p")[1],
    ]
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        cmd,
        env={**os.environ, **environ, "PYTHONPATH": pythonpath},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads(out.with_name(f"two.rank{r}.json").read_text()) for r in range(2)]
    two = {stage: [r[stage] for r in ranks] for stage in ("sft", "grpo")}
    for stage in two:
        assert [r["world_size"] for r in two[stage]] == [2, 2] and [r["rank"] for r in two[stage]] == [0, 1]
    return {stage: [rec] for stage, rec in one.items()}, two


def steps_of(record: dict) -> dict[int, list[str]]:
    """step -> the examples this rank trained on in that optimizer step."""
    out: dict[int, list[str]] = {}
    for s in record["seen"]:
        out.setdefault(s["step"], []).extend(s["examples"])
    return out


def losses(record: dict) -> list[float]:
    return [h["loss"] for h in record["log"]]


def check_split(one: list[dict], two: list[dict], per_step: int) -> None:
    single = steps_of(one[0])
    ranks = [steps_of(r) for r in two]
    assert set(single) == set(ranks[0]) == set(ranks[1]) and len(single) >= 2
    for step, examples in single.items():
        a, b = ranks[0][step], ranks[1][step]
        assert len(examples) == per_step and len(a) == len(b) == per_step // 2
        assert sorted(a + b) == sorted(examples)  # the global batch is the single process's batch
        assert a != b  # and the two ranks trained on different halves of it


@pytest.mark.slow
def test_sft_on_two_processes_matches_one(runs):
    one, two = runs[0]["sft"], runs[1]["sft"]
    assert one[0]["per_device_train_batch_size"] == PROFILE.sft_batch
    assert [r["per_device_train_batch_size"] for r in two] == [PROFILE.sft_batch // 2] * 2
    check_split(one, two, PROFILE.sft_batch)
    for step in steps_of(one[0]):  # different sequences, so different token counts per rank
        assert (
            len(
                {fp for s in two[0]["seen"] if s["step"] == step for fp in s["examples"]}
                & {fp for s in two[1]["seen"] if s["step"] == step for fp in s["examples"]}
            )
            == 0
        )
    assert len(losses(one[0])) == len(losses(two[0])) == 3
    assert losses(two[0]) == losses(two[1])  # the logged loss is the gathered one
    assert losses(two[0]) == pytest.approx(losses(one[0]), rel=REL_TOL)


@pytest.mark.slow
def test_grpo_on_two_processes_matches_one(runs):
    one, two = runs[0]["grpo"], runs[1]["grpo"]
    completions = PROFILE.grpo_prompts_per_step * PROFILE.num_generations
    assert one[0]["per_device_train_batch_size"] == completions
    assert [r["per_device_train_batch_size"] for r in two] == [completions // 2] * 2
    check_split(one, two, completions)
    for rank in two:  # each rank holds whole groups: the advantages are those of one process
        for examples in steps_of(rank).values():
            assert len(set(examples)) * PROFILE.num_generations == len(examples)
    assert len(losses(one[0])) == len(losses(two[0])) == 2
    assert all(abs(x) > 1e-3 for x in losses(one[0]))  # a real policy-gradient loss, not a zero
    assert losses(two[0]) == pytest.approx(losses(one[0]), rel=REL_TOL)
    rewards_one = [h["reward"] for h in one[0]["log"]]
    assert [h["reward"] for h in two[0]["log"]] == pytest.approx(rewards_one, rel=1e-6)
