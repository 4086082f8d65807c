"""One builder of chat messages for SFT, GRPO and evaluation alike.

The user turn carries the instruction, the action history (with the user's replies to earlier
questions), the previous and current screenshots (as InquireMobile does) and, behind a profile
switch, the accessibility list: one line per element, its text, its slot id and its centre in the
model's frame. The assistant turn is the pre-action reasoning then one `mobile_use` tool call.
"""

from __future__ import annotations

import json

from .actions import DEFAULT_SCREEN_WH, Action, Frame, format_completion
from ..profiles import ModelSettings

HISTORY_LINES = 6

SYSTEM = (
    "You are a mobile GUI agent. Tool mobile_use: click, long_press, swipe, type, key, system_button, open, "
    "wait, terminate, call_user (ask the user). Coordinates are pixels of the current screenshot. "
    "Reason in <think></think>, ending with an inquiry check, then give one <tool_call></tool_call>."
)


def system_prompt() -> str:
    return SYSTEM


def frame_for(profile: ModelSettings) -> Frame:
    return Frame.for_screen(*DEFAULT_SCREEN_WH, profile.min_pixels, profile.max_pixels)


def a11y_lines(a11y: list[dict], frame: Frame | None, coords: bool = True) -> list[str]:
    out = []
    for el in a11y:
        x0, y0, x1, y1 = el["bbox"]
        cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
        if frame is not None:
            cx, cy = frame.to_model((cx, cy))
        kind = {"text": " info", "input": " field"}.get(el["role"], "")
        detail = f" {el['detail']}" if el.get("detail") else ""
        where = f" [{cx}, {cy}]" if coords else ""
        out.append(f"- {el['text']} <{el['id']}>{kind}{where}{detail}")
    return out


def user_text(rec: dict, use_a11y: bool, n_images: int, frame: Frame | None = None, coords: bool = True) -> str:
    """Task, history and the element list."""
    history = rec["history"][-HISTORY_LINES:]
    parts = [f"Task: {rec['instruction']}", "History: " + ("; ".join(history) if history else "none")]
    if use_a11y:
        parts.append("Elements:\n" + "\n".join(a11y_lines(rec["a11y"], frame, coords)))
    return "\n".join(parts)


def completion_text(think: str | None, action: Action, use_think: bool, frame: Frame | None) -> str:
    """The gold completion; `action` is in the screen frame and is written in the model's frame."""
    if frame is not None:
        action = frame.action_to_model(action)
    return format_completion(think if use_think else None, action)


def images_of(rec: dict, profile: ModelSettings) -> list:
    imgs = []
    if profile.use_prev_screenshot and rec.get("prev_screenshot") is not None:
        imgs.append(rec["prev_screenshot"])
    imgs.append(rec["screenshot"])
    return imgs


def prompt_messages(rec: dict, profile: ModelSettings, frame: Frame | None = None) -> list[dict]:
    """System + user turn for one step record; image placeholders match `images_of(rec)`."""
    frame = frame or frame_for(profile)
    content = []
    n = len(images_of(rec, profile))
    if n == 2:
        content += [{"type": "text", "text": "Previous screen:"}, {"type": "image"}]
    content += [
        {"type": "text", "text": "Current screen:"},
        {"type": "image"},
        {
            "type": "text",
            "text": "\n" + user_text(rec, profile.use_a11y, n, frame, profile.a11y_coords),
        },
    ]
    return [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]}, {"role": "user", "content": content}]


def model_frame_columns(rec: dict, frame: Frame) -> dict:
    """Gold action and bbox in the model's frame: what the rewards compare against."""
    action = frame.action_to_model(Action.from_arguments(json.loads(rec["gold_action"])))
    return {"gold_action": json.dumps(action.to_arguments()), "gold_bbox": frame.bbox_to_model(list(rec["gold_bbox"]))}


def to_training_record(rec: dict, profile: ModelSettings, frame: Frame | None = None) -> dict:
    """A prompt/completion record with images, as TRL's SFTTrainer and GRPOTrainer take it."""
    frame = frame or frame_for(profile)
    gold = Action.from_arguments(json.loads(rec["gold_action"]))
    return {
        "prompt": prompt_messages(rec, profile, frame),
        "completion": [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": completion_text(rec["gold_think"], gold, profile.use_think, frame)}
                ],
            }
        ],
        "images": images_of(rec, profile),
        **model_frame_columns(rec, frame),
        "inquiry_required": rec["inquiry_required"],
        "frame_w": frame.model_w,
        "frame_h": frame.model_h,
        "category": rec["category"],
        "subcategory": rec["subcategory"],
        "id": rec["id"],
    }


def observation_record(task, obs, screenshot, prev_screenshot) -> dict:
    """The record `prompt_messages` / `images_of` read, from a live observation (a `world.flow.Task`
    and a `world.env.Observation`) and its rendered screenshots."""
    return {
        "instruction": task.instruction,
        "history": list(obs.history),
        "a11y": obs.a11y,
        "screenshot": screenshot,
        "prev_screenshot": prev_screenshot,
        "task_id": task.task_id,
    }
