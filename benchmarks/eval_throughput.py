"""Evaluation throughput (held-out steps a second): naive `generate`, the HF path and the OpenVINO engine.

Both decode the same held-out step records greedily with the same generation config
(`eval_generation_config`: the profile's token budget, stopping at the end of the answer), in the
same process, one after the other:
- naive: the checkpoint as `load_checkpoint` gives it (fp32, an adapter unmerged), the records in
  their order, `--naive-batch` at a time, plain `model.generate` (what evaluation did before);
- ours: the checkpoint as evaluation runs it (`training.models.loaded`: bf16 with the adapter merged
  where the CPU has native bf16 and the profile's `eval_bf16` says so), `evaluation.steps.generate`
  (batches of similar length), `--batch` at a time.
Reports steps/s of each, their ratio, how many answers are identical and how many parse, and the
CPU kind (the ratio depends on it: bf16 is native with AVX-512 BF16 or AMX and emulated elsewhere).
Also where ours spends its time: the same batches with one new token (prefill) against the whole answer.
Then, in the same run on the same records, the OpenVINO engine (`eval_engine openvino`, `evaluation.engine`):
the checkpoint's export (`training.openvino`, made when absent: its time and size are recorded), every
record in one call to the continuous-batching pipeline, `--threads` threads; its steps/s against naive and
ours, and how many of its answers equal each's (`--no-openvino` leaves it out).

`--engine int8` measures a candidate instead of ours: the language model's linear layers quantised to int8
(`torch.ao.quantization.quantize_dynamic`: per-channel weights, activations scaled per tensor at run time,
VNNI kernels), the same batching. It is measured, not used: evaluation adopts an engine only when its
answers are those of fp32.

    python benchmarks/eval_throughput.py [--profile small] [--steps 64] [--checkpoint PATH] [--threads 1]

The checkpoint defaults to the profile's base agent (`training.sft.base_agent`: the shipped one is installed).

Writes benchmarks/results/eval_throughput.<machine>[.int8][.openvino].json, the machine named by its CPU's vendor
and line and its kind (`machine_tag`): the same code measures differently on each, so each keeps its own result.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from _common import RESULTS, bench_profile, finish


def machine_tag() -> str:
    """e.g. "intel-xeon-avx512_bf16" or "amd-epyc-avx512_bf16": the CPU model's first two words and the kind."""
    import re

    from inquire_lib.runs.hardware import cpu_kind, cpu_model

    words = re.sub(r"\(.*?\)", " ", cpu_model()).lower().split()
    return "-".join(words[:2] + [cpu_kind()])


OUT = RESULTS / f"eval_throughput.{machine_tag()}.json"
REQUIRED_RATIO = 3.0  # ours / naive steps per second
# the OpenVINO engine against the HF path and against naive generate, and its answers equal to fp32 HF's
ENGINE_REQUIRED = {"vs_ours": 2.5, "vs_naive": 5.0, "identical_share": 47 / 48}


def naive_generate(model, processor, records, profile, batch: int) -> list[str]:
    """Greedy answers the plain way: records in order, fp32 as loaded, `model.generate` per batch."""
    import torch

    from inquire_lib.agent.prompts import frame_for, images_of, prompt_messages
    from inquire_lib.evaluation.steps import eval_generation_config

    config, frame, outs = eval_generation_config(profile, processor), frame_for(profile), []
    processor.tokenizer.padding_side = "left"
    with torch.no_grad():
        for i in range(0, len(records), batch):
            chunk = records[i : i + batch]
            texts = [
                processor.apply_chat_template(
                    prompt_messages(r, profile, frame), tokenize=False, add_generation_prompt=True
                )
                for r in chunk
            ]
            images = [img for r in chunk for img in images_of(r, profile)]
            enc = processor(text=texts, images=images, padding=True, return_tensors="pt")
            gen = model.generate(**enc, generation_config=config)
            outs += processor.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return outs


def int8_dynamic(model):
    """The model with its language model's linear layers (not the vision tower's) swapped in place for
    dynamic int8 ones (in place: the fp32 model is not needed after, and a copy would double the memory)."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    spec = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and "visual" not in name
    }
    return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True), len(spec)


def openvino_engine(
    profile,
    checkpoint,
    records,
    naive: list[str],
    ours: list[str],
    threads: int,
    precision: str = "f32",
    prefix_caching: bool = False,
) -> dict:
    """The OpenVINO engine computing in `precision` on `records` (with or without prefix caching), compared with
    the answers naive generate and ours gave."""
    from inquire_lib.evaluation.engine import open_engine
    from inquire_lib.evaluation.steps import generate
    from inquire_lib.training.models import load_processor, model_path
    from inquire_lib.training.openvino import export_openvino

    export, export_s = timed(partial(export_openvino, profile, checkpoint))
    processor = load_processor(model_path(profile), profile)
    engine, open_s = timed(
        partial(
            open_engine,
            export["folder"],
            export["key"],
            processor.tokenizer.eos_token_id,
            threads,
            precision,
            prefix_caching,
        )
    )
    outs, seconds = timed(partial(generate, engine, processor, records, profile, progress=False))
    from inquire_lib.agent.actions import parse_completion

    return {
        "seconds": round(seconds, 2),
        "steps_per_s": round(len(records) / seconds, 4),
        "weights": "fp32",
        "precision": engine.precision,
        "kv_cache_precision": engine.kv_cache_precision,
        "prefix_caching": engine.prefix_caching,
        "threads": threads,
        "parsed": sum(parse_completion(o).action is not None for o in outs),
        "identical_to_naive": sum(a == b for a, b in zip(outs, naive)),
        "identical_to_ours": sum(a == b for a, b in zip(outs, ours)),
        "export": {
            "folder": export["folder"],
            "built": export["built"],
            "seconds": round(export_s, 1),
            "bytes": export["bytes"],
        },
        "open_seconds": round(open_s, 2),
    }


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run(
    profile_name: str,
    steps: int,
    checkpoint: str | None,
    threads: int,
    batch: int | None,
    naive_batch: int | None,
    overrides=(),
    engine: str = "ours",
    openvino: bool = True,
    precisions=("f32",),
    prefix_caching=(False,),
) -> dict:
    import torch

    from inquire_lib.agent.actions import parse_completion
    from inquire_lib.data.benchmark import test_records
    from inquire_lib.evaluation.steps import generate
    from inquire_lib.runs.hardware import cpu_kind, eval_uses_bf16
    from inquire_lib.training.models import load_checkpoint, loaded

    profile = bench_profile(profile_name, overrides, threads)
    if checkpoint is None:  # the agent evaluation runs on: the untrained graft answers nothing that parses
        from inquire_lib.training.sft import base_agent

        checkpoint = base_agent(profile)
    torch.set_num_threads(threads)
    records = test_records(profile)[:steps]
    batch, naive_batch = batch or profile.eval_batch, naive_batch or profile.eval_batch
    model, processor = load_checkpoint(profile, checkpoint)
    naive, naive_s = timed(partial(naive_generate, model, processor, records, profile, naive_batch))
    model = processor = None  # freed before ours loads
    with loaded(profile, checkpoint) as m:
        model, quantised = (m.model, 0) if engine == "ours" else int8_dynamic(m.model)
        decode = partial(generate, model, m.processor, records, profile, batch_size=batch, progress=False)
        ours, ours_s = timed(decode)
        _, prefill_s = timed(partial(decode, max_new_tokens=1))
        dtype = "int8 (dynamic)" if quantised else str(next(m.model.parameters()).dtype)
        lengths = [len(m.processor.tokenizer(o)["input_ids"]) for o in ours]
    parses = lambda outs: sum(parse_completion(o).action is not None for o in outs)  # noqa: E731
    result = {
        "benchmark": "eval_throughput",
        "profile": profile.name,
        "checkpoint": checkpoint or "base model",
        "steps": len(records),
        "threads": threads,
        "cpu_kind": cpu_kind(),
        "eval_bf16": eval_uses_bf16(profile),
        "naive": {
            "seconds": round(naive_s, 2),
            "steps_per_s": round(len(records) / naive_s, 4),
            "batch": naive_batch,
            "dtype": "torch.float32",
            "parsed": parses(naive),
        },
        "ours": {
            "seconds": round(ours_s, 2),
            "steps_per_s": round(len(records) / ours_s, 4),
            "batch": batch,
            "dtype": dtype,
            "engine": engine,
            "quantised_linear_layers": quantised,
            "parsed": parses(ours),
            "prefill_seconds": round(prefill_s, 2),
            "decode_share": round(1 - prefill_s / ours_s, 3),
            "answer_tokens_mean": round(sum(lengths) / len(lengths), 1),
        },
        "ratio": round(naive_s / ours_s, 3),
        "required_ratio": REQUIRED_RATIO,
        "identical_answers": sum(a == b for a, b in zip(naive, ours)),
    }
    variants = [(p, c) for p in precisions for c in prefix_caching] if openvino else []
    for precision, caching in variants:
        # the first variant asked for is the run's engine; each other one is kept beside it
        name = "openvino" if (precision, caching) == variants[0] else f"openvino_{precision}" + "_prefix" * caching
        try:
            ov = openvino_engine(profile, checkpoint, records, naive, ours, threads, precision, caching)
        except RuntimeError as exc:  # a precision this CPU's plugin refuses: recorded, the others still measured
            if name == "openvino":
                raise
            result[name] = {"precision": precision, "error": " ".join(str(exc).split())[:300]}
            continue
        ov["vs_naive"] = round(naive_s / ov["seconds"], 3)
        ov["vs_ours"] = round(ours_s / ov["seconds"], 3)
        ov["required"] = ENGINE_REQUIRED
        ov["meets"] = bool(
            ov["vs_naive"] >= ENGINE_REQUIRED["vs_naive"]
            and ov["vs_ours"] >= ENGINE_REQUIRED["vs_ours"]
            and ov["identical_to_naive"] >= ENGINE_REQUIRED["identical_share"] * len(records)
        )
        result[name] = ov
    print(
        f"naive {result['naive']['steps_per_s']} steps/s, ours {result['ours']['steps_per_s']} steps/s: "
        f"x{result['ratio']} on {result['cpu_kind']}; {result['identical_answers']}/{len(records)} identical; "
        f"decode {result['ours']['decode_share']:.0%} of ours"
    )
    for key in [k for k in result if k.startswith("openvino")]:
        ov = result[key]
        if "error" in ov:
            print(f"openvino ({ov['precision']}): {ov['error']}")
            continue
        print(
            f"openvino ({ov['precision']}{', prefix caching' if ov['prefix_caching'] else ''}) {ov['steps_per_s']} steps/s: x{ov['vs_naive']} naive, x{ov['vs_ours']} "
            f"ours; {ov['identical_to_naive']}/{len(records)} identical to naive (fp32), {ov['identical_to_ours']} "
            f"to ours ({result['ours']['dtype']}); export {'built' if ov['export']['built'] else 'reused'} in "
            f"{ov['export']['seconds']} s, {ov['export']['bytes'] / 1e6:.0f} MB"
        )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="small")
    ap.add_argument("--steps", type=int, default=64, help="held-out step records decoded by each")
    ap.add_argument(
        "--checkpoint",
        default=None,
        help="a model or adapter folder (default: the profile's base agent, installed when shipped)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 leaves a core to others)")
    ap.add_argument("--batch", type=int, default=None, help="ours: records a batch (default: eval_batch)")
    ap.add_argument("--naive-batch", type=int, default=None, help="naive: records a batch (default: eval_batch)")
    ap.add_argument(
        "--engine",
        choices=("ours", "int8"),
        default="ours",
        help="what is measured against naive: evaluation as it runs, or the dynamic int8 candidate",
    )
    ap.add_argument(
        "--no-openvino", dest="openvino", action="store_false", help="leave the OpenVINO engine out of the run"
    )
    ap.add_argument(
        "--engine-precision",
        nargs="+",
        default=["f32"],
        choices=("f32", "bf16"),
        help="what the OpenVINO engine computes in, each measured in turn (the first is the run's engine)",
    )
    ap.add_argument(
        "--prefix-caching",
        nargs="+",
        default=["off"],
        choices=("off", "on"),
        help="the engine without and/or with prefix caching, each measured in turn for every precision",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="the result file (default: results/eval_throughput.<machine>[.int8][.openvino].json)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a profile field (repeatable), as `inquire run --set`",
    )
    args = ap.parse_args()
    from inquire_lib.profiles import get_profile

    result = run(
        args.profile,
        args.steps,
        args.checkpoint,
        args.threads,
        args.batch,
        args.naive_batch,
        args.overrides,
        args.engine,
        args.openvino,
        tuple(args.engine_precision),
        tuple(c == "on" for c in args.prefix_caching),
    )
    # a run with the engine keeps a file of its own, beside the HF-only one that docs/lab/small.md cites
    suffix = "".join(f".{e}" for e in ([args.engine] if args.engine != "ours" else []) + ["openvino"] * args.openvino)
    out = args.out or str(OUT.with_suffix(f"{suffix}.json") if suffix else OUT)
    finish(result, get_profile(args.profile), None if out == "-" else __import__("pathlib").Path(out))


if __name__ == "__main__":
    main()
