"""Step-level (offline) evaluation: every gold step of the test split is one query.

Batched greedy generation, scoring of each raw output into a step-prediction record
(`runs.records.STEP_FIELDS`), and the metrics of `evaluation.metrics`. Predictions are written one
JSON object per step for the inspector and the report (`viz/`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..agent.actions import Action, Frame, action_match, format_completion, parse_completion, random_action
from ..profiles import EvalSettings, ModelSettings, Profile
from ..agent.prompts import frame_for, images_of, model_frame_columns, prompt_messages
from ..agent.questions import answerable
from ..data.benchmark import inquiry_need, test_records
from .metrics import step_metrics
from .fork import ask_bias_processor
from .engine import is_engine
from ..runs.paths import run_dir, write_json_atomic, write_jsonl_atomic
from ..runs.hardware import device_stamp
from ..runs.tracking import log_metrics


# ------------------------------------------------------------------------------ generation
def eval_generation_config(profile: EvalSettings, processor, max_new_tokens: int | None = None):
    """The complete generation config of evaluation: greedy, the profile's token budget and
    repetition penalty, nothing inherited from the checkpoint's own `generation_config.json`
    (Qwen2.5-VL ships sampling with temperature 0.1, top_p 0.001 and repetition_penalty 1.05;
    the tiny model none), so a tiny and a hub model are scored under the same decoding."""
    from transformers import GenerationConfig

    tok = processor.tokenizer
    return GenerationConfig(
        do_sample=False,
        num_beams=1,
        max_new_tokens=max_new_tokens or profile.eval_max_new_tokens,
        repetition_penalty=profile.eval_repetition_penalty,
        temperature=None,
        top_p=None,
        top_k=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


@torch.no_grad()
def generate(
    model,
    processor,
    records: list[dict],
    profile: EvalSettings,
    batch_size: int | None = None,
    max_new_tokens: int | None = None,
    progress: bool = True,
    logits_processor=None,
    ask_bias: float = 0.0,
    order: list[int] | None = None,
) -> list[str]:
    """Greedy completions for step records, batched with left padding. `logits_processor`: a factory
    called once per batch that returns a `LogitsProcessor` (e.g. the operating curve's fork bias);
    `ask_bias`: added to the tool call's `call_user` logit (`evaluation.fork.ask_bias_processor`).
    `order`: a list to fill with the record indices in the order they were generated (batches run by
    prompt length), so what the processors saw, batch after batch and row after row, maps back to the
    records.

    `model` may be an engine's (`evaluation.engine`, `Profile.eval_engine`): then every prompt goes to it in
    one call (its scheduler batches them), and a pass that needs logits (`logits_processor`, `ask_bias`) is
    refused: those run on HF."""
    if is_engine(model) and (logits_processor is not None or ask_bias):
        raise ValueError(f"eval_engine {model.engine}: a pass that reads or biases logits runs on HF (eval_engine hf)")
    batch_size = batch_size or profile.eval_batch
    config = eval_generation_config(profile, processor, max_new_tokens)
    frame = frame_for(profile)
    processor.tokenizer.padding_side = "left"
    prompts = [
        processor.apply_chat_template(prompt_messages(r, profile, frame), tokenize=False, add_generation_prompt=True)
        for r in records
    ]
    if is_engine(model):
        if order is not None:
            order[:] = range(len(records))
        images = [images_of(r, profile) for r in records]
        return model.generate(prompts, images, config.max_new_tokens, config.repetition_penalty)
    device = next(model.parameters()).device
    biased = ask_bias_processor(processor.tokenizer, ask_bias) if ask_bias else None
    # batches of similar length: left padding then costs little, and the answers go back in the records' order
    by_length = sorted(range(len(records)), key=lambda k: len(prompts[k]))
    if order is not None:
        order[:] = by_length
    outs: list[str] = [""] * len(records)
    for i in tqdm(range(0, len(records), batch_size), desc="generate", disable=not progress):
        picked = by_length[i : i + batch_size]
        texts = [prompts[k] for k in picked]
        images = [img for k in picked for img in images_of(records[k], profile)]
        enc = processor(text=texts, images=images, padding=True, return_tensors="pt").to(device)
        extra = {}
        processors = [make() for make in (logits_processor, biased) if make is not None]
        if processors:
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList(processors)
        gen = model.generate(**enc, generation_config=config, **extra)
        new = gen[:, enc["input_ids"].shape[1] :]
        for k, text in zip(picked, processor.batch_decode(new, skip_special_tokens=True)):
            outs[k] = text
    return outs


# ----------------------------------------------------------------------- reference policies
# what the reference policies write, at step level here and in episodes (`evaluation.episodes`)
ACT_THINK = "Acting directly. Inquiry check: not needed, because the instruction says what to do."
ASK_THINK = "Inquiry check: needed, because I want to be sure."
RANDOM_THINK = "Inquiry check: not needed, because random."
ASK_TEXT = "Should I go ahead with this step?"


def reference_outputs(policy: str, records: list[dict], profile: ModelSettings, seed: int = 0) -> list[str]:
    """Raw outputs of a reference policy, in the model's frame:
    - expert: the gold completions; - always_act: the expert, but where asking is required it does
      the next step's action instead; - always_ask: `call_user` at every step; - random: a random
      action type with random arguments."""
    frame = frame_for(profile)
    rng = random.Random(seed)
    by_task: dict[str, dict[int, dict]] = {}
    for r in records:
        by_task.setdefault(r["task_id"], {})[r["step"]] = r
    outs = []
    for r in records:
        gold = frame.action_to_model(Action.from_arguments(json.loads(r["gold_action"])))
        think = r["gold_think"] if profile.use_think else None
        if policy == "expert":
            outs.append(format_completion(think, gold))
        elif policy == "always_act":
            if r["inquiry_required"]:
                nxt = by_task[r["task_id"]].get(r["step"] + 1)
                act = (
                    frame.action_to_model(Action.from_arguments(json.loads(nxt["gold_action"])))
                    if nxt
                    else Action("terminate", status="success")
                )
                think = ACT_THINK if profile.use_think else None
                outs.append(format_completion(think, act))
            else:
                outs.append(format_completion(think, gold))
        elif policy == "always_ask":
            outs.append(format_completion(ASK_THINK if profile.use_think else None, Action("call_user", text=ASK_TEXT)))
        elif policy == "random":
            outs.append(
                format_completion(
                    RANDOM_THINK if profile.use_think else None,
                    random_action(rng, frame.model_w, frame.model_h, **RANDOM_POLICY),
                )
            )
        else:
            raise ValueError(f"unknown reference policy {policy!r}")
    return outs


# the random reference policy's actions (`agent.actions.random_action`, in the model's frame): clicks three
# times as likely as any other kind
RANDOM_POLICY = {
    "kinds": ("click", "click", "click", "type", "open", "system_button", "terminate", "call_user", "swipe"),
    "texts": ("hello", "50", "yes"),
    "apps": ("Wallet", "Chat", "Shop", "Maps"),
    "questions": ("What should I do?",),
    "buttons": ("Back", "Home"),
    "statuses": ("success",),
}


# ---------------------------------------------------------------------------- scoring
def ask_answered(action: Action | None, rec: dict, gold: Action, profile: EvalSettings) -> bool | None:
    """Whether the simulated user would answer the prediction's question (None when it does not ask): only at
    an inquiry step, and with `user_answers="content"` only a question that names what the step misses."""
    if action is None or action.type != "call_user":
        return None
    if not rec["inquiry_required"]:
        return False
    if profile.user_answers == "any":
        return True
    need = inquiry_need(rec["task_id"], gold.text, profile.train_values)
    return answerable(rec["subcategory"], action.text, need)


def score(raw: str, rec: dict, profile: EvalSettings, frame: Frame) -> dict:
    """One prediction record (the schema of `step_predictions.jsonl`, see README)."""
    parsed = parse_completion(raw, require_think=profile.use_think)
    cols = model_frame_columns(rec, frame)
    gold_model = Action.from_arguments(json.loads(cols["gold_action"]))
    bbox = cols["gold_bbox"] if cols["gold_bbox"][0] >= 0 else None
    type_ok, arg_ok = action_match(parsed.action, gold_model, bbox, frame_wh=(frame.model_w, frame.model_h))
    required = bool(rec["inquiry_required"])
    asked = parsed.action is not None and parsed.action.type == "call_user"
    if parsed.action is None:
        outcome = "unparseable"
    elif required and not asked:
        outcome = "missed_inquiry"
    elif asked and not required:
        outcome = "needless_inquiry"
    elif not type_ok:
        outcome = "wrong_type"
    elif not arg_ok:
        outcome = "wrong_argument"
    else:
        outcome = "correct"
    return {
        "id": rec["id"],
        "task_id": rec["task_id"],
        "step": int(rec["step"]),
        "category": rec["category"],
        "subcategory": rec["subcategory"],
        "instruction": rec["instruction"],
        "history": list(rec["history"]),
        "inquiry_required": required,
        "inquiry_reason": rec["inquiry_reason"],
        "gold_action": json.loads(rec["gold_action"]),
        "gold_bbox": list(rec["gold_bbox"]),
        "raw_output": raw,
        "think": parsed.think,
        "parsed_action": frame.action_to_screen(parsed.action).to_arguments() if parsed.action else None,
        "parse_error": parsed.error,
        "format_ok": bool(parsed.format_ok and parsed.action is not None),
        "type_ok": bool(type_ok),
        "arg_ok": bool(type_ok and arg_ok),
        "outcome": outcome,
        "ask_answered": ask_answered(parsed.action, rec, gold_model, profile),
        "screenshot": f"screens/{rec['task_id']}_{rec['step']}.png",
        "frame": {
            "screen_w": frame.screen_w,
            "screen_h": frame.screen_h,
            "model_w": frame.model_w,
            "model_h": frame.model_h,
        },
        **({"probe": True} if rec.get("probe") else {}),
    }


def save_screens(records, out_dir: Path) -> None:
    screens = out_dir / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    for r in records:
        path = screens / f"{r['task_id']}_{r['step']}.png"
        if not path.exists():
            r["screenshot"].save(path)


def evaluate_steps(
    name: str,
    records: list[dict],
    profile: Profile,
    raw_outputs: list[str],
    out_root: str | Path | None = None,
    extra: dict | None = None,
) -> dict:
    """Score raw outputs, write predictions + metrics for checkpoint `name`, return the metrics."""
    frame = frame_for(profile)
    preds = [dict(score(raw, rec, profile, frame), checkpoint=name) for raw, rec in zip(raw_outputs, records)]
    base = run_dir(profile.name, out_root)
    eval_dir = base / "eval"
    save_screens(records, eval_dir)
    write_jsonl_atomic(eval_dir / name / "step_predictions.jsonl", preds)
    metrics = {
        "checkpoint": name,
        "profile": profile.name,
        "device": device_stamp(),
        **(extra or {}),
        **step_metrics(preds),
    }
    write_json_atomic(base / "metrics" / f"step_{name}.json", metrics)
    log_metrics(profile, name, metrics, "step", out_root)  # the run's tracker (`runs/tracking.py`)
    return metrics


def evaluate_model(
    name: str,
    model,
    processor,
    profile: Profile,
    records: list[dict] | None = None,
    out_root: str | Path | None = None,
    progress: bool = True,
    extra: dict | None = None,
    ask_bias: float = 0.0,
) -> dict:
    records = records if records is not None else test_records(profile)
    import time

    start = time.time()
    raw = generate(model, processor, records, profile, progress=progress, ask_bias=ask_bias)
    seconds = time.time() - start
    played = {"ask_bias": ask_bias} if ask_bias else {}
    cut = at_token_cap(processor.tokenizer, raw, profile.eval_max_new_tokens)
    if cut:
        print(
            f"{name}: {cut} of {len(raw)} answers stopped at eval_max_new_tokens={profile.eval_max_new_tokens}, "
            "cut before they ended: raise it"
        )
    capped = {"answers_at_token_cap": {"k": cut, "n": len(raw), "max_new_tokens": profile.eval_max_new_tokens}}
    return evaluate_steps(
        name, records, profile, raw, out_root, extra={**(extra or {}), **played, **capped, "generate_seconds": seconds}
    )


def at_token_cap(tokenizer, answers: list[str], cap: int) -> int:
    """How many decoded `answers` hold `cap` tokens or more: generation stopped them at the cap, not at their end
    of turn (an answer that ended on its own holds fewer, its end-of-turn token being dropped in decoding)."""
    return sum(len(tokenizer(a, add_special_tokens=False)["input_ids"]) >= cap for a in answers)
