"""A profile's stage-0 base agent on the held-out split, as the base agent's checks read it.

    python tools/base_agent_report.py --profile small --part steps   # acting steps by gold action
    python tools/base_agent_report.py --profile small --part tasks   # the held-out tasks played online
    python tools/base_agent_report.py --profile small --part copy    # the copy probe beside the cpu agent
    python tools/base_agent_report.py --part steps --first --set base_agent_init=... --name link3  # a link

- steps: every held-out step whose gold action is not an inquiry (a base agent never asks), greedy; step
  accuracy per gold action (`type`, `click`, `open`, ...) with Wilson 95% intervals;
- tasks: the held-out tasks played in PhoneEnv (`evaluation.episodes`); SR of the safe tasks (those that
  need no inquiry: the ones a never-asking agent can finish), and of the episodes that entered a detour
  the share that still succeeded;
- copy: `evaluation.copying.induction` on repeated random token strings (gaps 0 and 200) for this
  profile's base agent and the cpu profile's.
The parts run apart (two of them at once use both cores); each prints its table and writes
`<run>/metrics/base_agent_<part>.json` through the stages' evaluations, read back when nothing changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NAME = "base_agent"


def _rate(r: dict) -> str:
    return f"{r['k']}/{r['n']} = {r['value']:.3f} ({r['lo']:.3f}-{r['hi']:.3f})" if r["n"] else "n/a"


def steps(profile, limit: int = 0, name: str = NAME) -> dict:
    from inquire_lib.data.benchmark import test_records
    from inquire_lib.stages.evaluate import evaluate_checkpoint
    from inquire_lib.training.sft import base_agent

    records = [r for r in test_records(profile) if json.loads(r["gold_action"])["action"] != "call_user"]
    records = records[:limit] if limit else records  # the first held-out tasks' steps
    metrics = evaluate_checkpoint(profile, name, records=records, path=base_agent(profile))
    overall = metrics["overall"]
    for action, rate in overall["by_gold_action"].items():
        print(f"{action:>10}: {_rate(rate)}")
    print(f"{'all':>10}: {_rate(overall['step_accuracy'])}   format {_rate(overall['format'])}")
    return {
        "by_gold_action": overall["by_gold_action"],
        "step_accuracy": overall["step_accuracy"],
        "format": overall["format"],
        "n": overall["n"],
    }


def tasks(profile, limit: int = 0, name: str = NAME) -> dict:
    from inquire_lib.data.benchmark import held_out_tasks
    from inquire_lib.evaluation.metrics import wilson
    from inquire_lib.evaluation.episodes import load_trajectories
    from inquire_lib.stages.evaluate import evaluate_checkpoint_tasks
    from inquire_lib.training.sft import base_agent

    held = held_out_tasks(profile)
    held = held[:limit] if limit else held
    metrics = evaluate_checkpoint_tasks(profile, name, held, path=base_agent(profile), progress=True)
    episodes = load_trajectories(profile, name)
    safe = [e for e in episodes if not e["inquiry_required"]]
    out = {
        "success_rate": metrics["overall"]["success_rate"],
        "safe_success_rate": wilson(sum(e["success"] for e in safe), len(safe)),
        "detour_success_rate": metrics["overall"]["detour_success_rate"],
        "detour_rate": metrics["overall"]["detour_rate"],
        "unsafe_rate": metrics["overall"]["unsafe_rate"],
        "n": len(episodes),
    }
    for key, rate in out.items():
        if key != "n":
            print(f"{key:>20}: {_rate(rate)}")
    return out


def copy(profile, limit: int = 0, name: str = NAME) -> dict:
    from inquire_lib.evaluation.copying import induction, ordinary_tokens
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.models import loaded
    from inquire_lib.training.sft import base_agent

    out = {}
    for other in (profile, get_profile("cpu")):
        with loaded(other, base_agent(other)) as m:
            vocab = ordinary_tokens(m.processor.tokenizer)
            for gap in (0, 200):
                r = induction(m.model.float(), vocab, n=16, length=20, gap=gap, seed=0)
                out[f"{other.name} gap {gap}"] = r
                print(
                    f"{other.name:>6} gap {gap:>3}: copied {r['copied']:.3f}, loss {r['first_loss']:.2f} -> "
                    f"{r['second_loss']:.2f}"
                )
    return out


PARTS = {"steps": steps, "tasks": tasks, "copy": copy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="small", help="a profile that trains its own stage 0")
    ap.add_argument("--part", choices=sorted(PARTS), required=True, help="which check to run")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--limit", type=int, default=0, help="the first N acting steps or tasks (0: all)")
    ap.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="override a profile field (repeatable)"
    )
    ap.add_argument("--name", default=NAME, help="the evaluation's name in the run (and of its metrics file)")
    args = ap.parse_args()
    import torch

    from inquire_lib.profiles import OverrideError, apply_overrides, parse_overrides
    from inquire_lib.runs.hardware import cpu_kind
    from inquire_lib.runs.notebooks import run_manifest
    from inquire_lib.runs.paths import metrics_dir, write_json_atomic

    torch.set_num_threads(args.threads)
    try:
        profile = apply_overrides(args.profile, parse_overrides(args.set))
    except (OverrideError, KeyError) as exc:
        sys.exit(f"base_agent_report: {exc}")
    t0 = time.time()
    result = PARTS[args.part](profile, args.limit, args.name)
    seconds = round(time.time() - t0, 1)
    print(f"{args.part}: {seconds} s on {cpu_kind()}")
    write_json_atomic(
        metrics_dir(profile) / f"{args.name}_{args.part}.json",
        {
            "part": args.part,
            "limit": args.limit,
            "seconds": seconds,
            "result": result,
            "manifest": run_manifest(profile),
        },
    )


if __name__ == "__main__":
    main()
