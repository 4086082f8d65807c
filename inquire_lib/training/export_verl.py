"""Export the GRPO prompts for verl / EasyR1, and the reward adapter they call.

`export_verl(profile, out)` writes `<out>/<split>.parquet` in the layout of verl's RL dataset
(`RLHFDataset`), one row per GRPO prompt of the profile (the same rows, in the same order, as
`train.grpo_records`):

| column         | content                                                                           |
|----------------|-----------------------------------------------------------------------------------|
| `data_source`  | `"inquirebench"`: verl routes a row's reward by it                                |
| `prompt`       | chat messages (system, user); each screenshot is an `<image>` in the user's text  |
| `images`       | the screenshots, `{"bytes": PNG, "path": None}` in the order of the `<image>`s    |
| `ability`      | `"gui_inquiry"`                                                                   |
| `reward_model` | `{"style": "rule", "ground_truth": JSON of the gold action (model frame), its bbox, whether an inquiry is required}` |
| `extra_info`   | split, index, step id, category, sub-category, model frame, penalties, reward weights |
| `problem`, `answer` | the user text and the ground truth again, under EasyR1's default keys        |

It lives under training/ because the rows are `grpo.grpo_records`.
`compute_score(data_source, solution_str, ground_truth, extra_info)` (verl's custom reward
signature; this file is what `custom_reward_function.path` points at) scores a completion with the
very reward functions GRPO trains on (`agent/rewards.py`: format, action, inquiry), weighted by the
profile's `reward_weights`, with the profile's missed/needless penalties carried in `extra_info`.
"""

from __future__ import annotations

from ..profiles import GRPOSettings
import json
from pathlib import Path

DATA_SOURCE = "inquirebench"
ABILITY = "gui_inquiry"
IMAGE = "<image>"
REWARD_NAMES = ("format", "action", "inquiry")  # extra_info's reward_weights are in this order


def _flatten(message: dict) -> str:
    """A message whose content is a list of text and image parts -> one string, `<image>` per image."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(IMAGE if part.get("type") == "image" else (part.get("text") or "") for part in content)


def _png(image) -> bytes:
    if isinstance(image, dict) and image.get("bytes"):
        return image["bytes"]
    from ..data.benchmark import png_bytes

    return png_bytes(image)


def verl_rows(records, profile: GRPOSettings, split: str) -> list[dict]:
    """TRL prompt records (`train.training_records`) -> verl rows (see the module docstring)."""
    from .configs import reward_weights

    rows = []
    for i, rec in enumerate(records):
        messages = [{"role": m["role"], "content": _flatten(m)} for m in rec["prompt"]]
        n_images = sum(m["content"].count(IMAGE) for m in messages)
        if n_images != len(rec["images"]):
            raise ValueError(f"{rec['id']}: {n_images} <image> placeholders for {len(rec['images'])} images")
        truth = json.dumps(
            {
                "action": json.loads(rec["gold_action"]),
                "bbox": rec["gold_bbox"],
                "inquiry_required": bool(rec["inquiry_required"]),
            },
            sort_keys=True,
        )
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": messages,
                "images": [{"bytes": _png(img), "path": None} for img in rec["images"]],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {
                    "split": split,
                    "index": i,
                    "id": rec["id"],
                    "category": rec["category"],
                    "subcategory": rec["subcategory"],
                    "inquiry_required": bool(rec["inquiry_required"]),
                    "frame_w": int(rec["frame_w"]),
                    "frame_h": int(rec["frame_h"]),
                    "require_think": bool(profile.use_think),
                    "missed_penalty": float(profile.missed_penalty),
                    "needless_penalty": float(profile.needless_penalty),
                    "reward_weights": reward_weights(profile, REWARD_NAMES),
                },
                "problem": messages[-1]["content"],
                "answer": truth,
            }
        )
    return rows


def split_records(profile: GRPOSettings, split: str):
    """The prompt records of a split: `train` is exactly the GRPO prompt set; `validation` and
    `test` are every step of those splits."""
    from ..data.benchmark import benchmark, load_or_build_validation
    from .grpo import grpo_records
    from .sft import training_records

    if split == "train":
        return grpo_records(profile)
    if split == "validation":
        return training_records(load_or_build_validation(profile.seed, profile.val_tasks), profile, 1.0)
    if split == "test":
        return training_records(benchmark(profile)["test"], profile, 1.0)
    raise ValueError(f"unknown split {split!r}")


def export_verl(profile: GRPOSettings, out: str | Path, splits=("train", "validation")) -> dict:
    """Write `<out>/<split>.parquet` for each split, plus `<out>/README.txt` with the verl options
    that read it; returns {split: row count, "out": folder, "reward": path of `compute_score`}."""
    import datasets

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    info: dict = {"out": str(out), "reward": str(Path(__file__).resolve())}
    for split in splits:
        records = split_records(profile, split)
        rows = verl_rows(records.cast_column("images", datasets.List(datasets.Image(decode=False))), profile, split)
        ds = datasets.Dataset.from_list(rows)
        ds = ds.cast_column("images", datasets.List(datasets.Image()))
        ds.to_parquet(str(out / f"{split}.parquet"))
        info[split] = len(rows)
    (out / "README.txt").write_text(
        f"InquireBench GRPO prompts of profile {profile.name!r} for verl (RLHFDataset):\n"
        f"  data.train_files={out / 'train.parquet'} data.val_files={out / 'validation.parquet'}\n"
        f"  data.prompt_key=prompt data.image_key=images\n"
        f"  custom_reward_function.path={info['reward']} custom_reward_function.name=compute_score\n"
        f"EasyR1: data.prompt_key=problem data.answer_key=answer data.image_key=images (the system prompt\n"
        f"goes in data.format_prompt); rows: {json.dumps({s: info[s] for s in splits})}\n"
    )
    return info


# ------------------------------------------------------------------------------ reward adapter
def score_parts(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> dict:
    """The format, action and inquiry rewards of one completion against a row's ground truth."""
    from ..agent.rewards import action_reward, make_format_reward, make_inquiry_reward

    extra = extra_info or {}
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth)
    gold, bbox = json.dumps(truth["action"]), truth.get("bbox")
    required = bool(truth["inquiry_required"])
    fmt = make_format_reward(bool(extra.get("require_think", True)))([solution_str])[0]
    act = action_reward(
        [solution_str],
        gold_action=[gold],
        gold_bbox=[bbox],
        frame_w=[extra.get("frame_w")],
        frame_h=[extra.get("frame_h")],
    )[0]
    inq = make_inquiry_reward(float(extra.get("missed_penalty", 0.5)), float(extra.get("needless_penalty", 0.5)))(
        [solution_str], inquiry_required=[required]
    )[0]
    return {"format": fmt, "action": act, "inquiry": inq}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl's custom reward: {"score": weighted sum, "format", "action", "inquiry"} for one
    completion (verl takes "score" as the reward and logs the other keys)."""
    if data_source != DATA_SOURCE:
        raise ValueError(f"compute_score scores {DATA_SOURCE!r} rows, not {data_source!r}")
    parts = score_parts(solution_str, ground_truth, extra_info)
    weights = list((extra_info or {}).get("reward_weights") or (1.0, 1.0, 1.0))
    score = sum(w * parts[k] for w, k in zip(weights, REWARD_NAMES))
    return {"score": float(score), **parts}


MAX_SCORE_PARTS = {"format": 1.0, "action": 2.0, "inquiry": 0.0}  # the best each reward can give
