"""Layer truncation of the small profile's language model (`pretrained_layers`), measured: what the first N of
SmolLM2-135M's 30 layers still know, and what they cost.

For each N, the untrained graft (`training.pretrained`, as `load_model_and_processor` gives it for the
small profile) keeps its first N language-model layers, exactly what `--set pretrained_layers=N` builds,
and is measured in one process, one after the other:
- the copy probe (`evaluation.copying.induction`: random strings written twice, at gaps 0 and 200): the
  share of the second copy predicted, which is what lets an agent type a value it read;
- the time of a text forward of `--batch` x `--tokens` tokens (a prefill of evaluation's size, no cache)
  in the dtype evaluation would use here, best of `--repeats`, and the tokens a second that makes.
The full model (N = 30) is the reference. The CPU kind and model are in the manifest.

    python benchmarks/layer_truncation.py [--layers 30 24 18 12 6] [--threads 1]

Writes benchmarks/results/layer_truncation.json.
"""

from __future__ import annotations

import argparse
import time

from _common import RESULTS, bench_profile, finish

OUT = RESULTS / "layer_truncation.json"


def truncated(model, n: int):
    """`model` with only its first `n` language-model layers (the same modules, not copies)."""
    lm = model.model.language_model
    lm.layers = lm.layers[:n]
    model.config.text_config.num_hidden_layers = n
    if getattr(model.config.text_config, "layer_types", None):
        model.config.text_config.layer_types = model.config.text_config.layer_types[:n]
    return model


def forward_seconds(model, batch: int, tokens: int, repeats: int, dtype) -> float:
    import torch

    ids = torch.randint(100, 40_000, (batch, tokens), generator=torch.Generator().manual_seed(0))
    best = float("inf")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(input_ids=ids, use_cache=False)
            best = min(best, time.perf_counter() - t0)
    return best


def run(layers: list[int], threads: int, batch: int, tokens: int, repeats: int, strings: int) -> dict:
    import torch

    from inquire_lib.evaluation.copying import induction, ordinary_tokens
    from inquire_lib.runs.hardware import cpu_kind, eval_uses_bf16
    from inquire_lib.training.models import load_model_and_processor

    profile = bench_profile("small", (), threads)
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if eval_uses_bf16(profile) else torch.float32
    model, processor = load_model_and_processor(profile)
    vocab = ordinary_tokens(processor.tokenizer)
    rows = []
    for n in sorted(layers, reverse=True):  # each truncation keeps a prefix of the one before
        model = truncated(model, n)
        probe = {gap: induction(model, vocab, n=strings, gap=gap) for gap in (0, 200)}
        seconds = forward_seconds(model, batch, tokens, repeats, dtype)
        rows.append(
            {
                "layers": n,
                "parameters": sum(p.numel() for p in model.model.language_model.parameters()),
                "copied_gap0": round(probe[0]["copied"], 4),
                "copied_gap200": round(probe[200]["copied"], 4),
                "loss_first_second_gap0": [round(probe[0]["first_loss"], 3), round(probe[0]["second_loss"], 3)],
                "forward_seconds": round(seconds, 3),
                "tokens_per_s": round(batch * tokens / seconds, 1),
            }
        )
        print(rows[-1], flush=True)
    full = rows[0]
    for r in rows:
        r["speedup"] = round(full["forward_seconds"] / r["forward_seconds"], 3)
    return {
        "benchmark": "layer_truncation",
        "profile": profile.name,
        "threads": threads,
        "cpu_kind": cpu_kind(),
        "dtype": str(dtype),
        "forward": {"batch": batch, "tokens": tokens, "repeats": repeats},
        "probe_strings": strings,
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[30, 24, 18, 12, 6], help="layers kept, each run")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 leaves a core to others)")
    ap.add_argument("--batch", type=int, default=8, help="rows of the timed forward")
    ap.add_argument("--tokens", type=int, default=400, help="tokens a row of the timed forward")
    ap.add_argument("--repeats", type=int, default=2, help="timed forwards, the best one kept")
    ap.add_argument("--strings", type=int, default=16, help="random strings of the copy probe")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    from inquire_lib.profiles import get_profile

    result = run(args.layers, args.threads, args.batch, args.tokens, args.repeats, args.strings)
    finish(result, get_profile("small"), None if args.out == "-" else __import__("pathlib").Path(args.out))


if __name__ == "__main__":
    main()
