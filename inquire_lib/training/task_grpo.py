"""Stage 3: multi-turn, task-level GRPO in PhoneEnv, played one of two ways (`task_rollout`).

"reprompt" plays the episode the evaluation plays (`training.task_starts`: start states, each turn prompted afresh
with the stage 1-2 prompt, a return per episode). "conversation", the shipped grpo_task's, is TRL's own
environment rollout, described here:

`GRPOTrainer(environment_factory=...)` plays each sampled episode: the model's `<tool_call>` for
`mobile_use` is parsed by TRL and executed by `PhoneTaskEnv.mobile_use`, whose result (the next
screenshot and the prompt's text block: task, history with the user's replies, elements) is
appended as a tool turn; the model answers again, until the episode ends. Tool and screenshot
tokens are masked out of the loss. The episode's reward is `task_rewards.task_reward` of the
environment's final state plus the mean per-turn format score.

Why this path, and the few settings it needs:
- TRL parses tool calls only for chat templates it knows. Qwen2.5-VL's own template (the one
  stages 1-2 use) is not one of them and does not render tool turns; TRL's `qwen3_vl` template
  does, is prefix-preserving and uses the same vision tokens. Without tools both render our
  prompts to the same string (checked in the tests), so stage 3 switches the processor to it at
  load time and sets the Qwen3 response parser; the checkpoint itself is unchanged.
- The template's tool-schema block (several hundred tokens the model never saw in stages 1-2)
  is switched off: the system prompt of `agent.prompts` already describes `mobile_use`, so the first
  turn of an episode is exactly the stage 1-2 prompt.
- TRL ends an episode when the model stops calling tools, at `max_tool_calling_iterations`, or
  when a tool result would overflow `max_completion_length` (it is then rolled back). An
  environment has no other way to stop it, so once PhoneEnv is done (terminate, or the step
  limit) `mobile_use` returns an oversized text: TRL drops it and the rollout ends right after the
  final action, instead of sampling turns the environment would ignore.
- `rollout_func` was not used: it cannot carry screenshots produced during the episode.
- A tool result carries only the new screenshot: the previous one is already in the conversation,
  so `use_prev_screenshot` matters for the first turn only (where there is none).
- Evaluation (`evaluation.episodes`) prompts each turn afresh with the stage 1-2 prompt (history as text),
  whereas training sees the growing conversation; the first turn is identical in both.
"""

from __future__ import annotations

import json
from functools import partial
import warnings
from pathlib import Path

import datasets
import torch

from ..agent.actions import Action, ActionError, format_completion, parse_completion
from ..profiles import Profile, StageSettings, TaskGRPOSettings, get_profile
from ..agent.prompts import frame_for, images_of, observation_record, prompt_messages, user_text
from ..data.benchmark import screen_png, task_at
from ..agent.task_rewards import episode_sample, log_components, task_reward
from ..runs.paths import artifacts_dir
from .checkpoints import checkpoint_path
from .configs import config_record, lora_config, task_grpo_config
from .fit import TrainResult, fit
from . import shipped_stages
from .models import base_of, load_checkpoint
from .task_starts import EpisodeReturn, start_rows
from ..runs.tracking import trainer_tracking, use_tracking
from ..world.env import PhoneEnv
from ..world.expert import expert_act
from ..world.render import render

# text tokens of one tool result (history line, elements, markup): about 180 on the smoke and cpu
# tokenizers, with margin; the screenshot's image tokens come on top
TOOL_TEXT_TOKENS = 224
# the tiny models' context is 4096 positions; leave room for the first prompt
TINY_MAX_EPISODE_TOKENS = 3584


def task_chat_template() -> str:
    """TRL's qwen3_vl template with its tool-schema block switched off (see the module docstring)."""
    from trl.chat_template_utils import qwen3_vl_chat_template

    return "{%- set tools = none %}\n" + qwen3_vl_chat_template


def use_task_template(processor):
    """Give a processor the stage-3 chat template and TRL's Qwen3 response parser, in place."""
    from trl.chat_template_utils import qwen3_template

    processor.chat_template = task_chat_template()
    processor.tokenizer.response_template = qwen3_template
    processor.tokenizer.padding_side = "left"
    return processor


def episode_token_budget(profile: TaskGRPOSettings) -> int:
    """`max_completion_length` of an episode: `task_max_completion_length` where set, else every turn's answer
    plus its tool result (text and the screenshot's image tokens, one per 28x28 patch of the resized screen);
    capped below the tiny models' context."""
    frame = frame_for(profile)
    turn = profile.max_completion_length + TOOL_TEXT_TOKENS + (frame.model_w // 28) * (frame.model_h // 28)
    budget = profile.task_max_completion_length or profile.max_episode_steps * turn
    return min(TINY_MAX_EPISODE_TOKENS, budget) if profile.is_tiny else budget


# ---------------------------------------------------------------------------- environment
class PhoneTaskEnv:
    """PhoneEnv as TRL's environment: `reset(**row)` rebuilds the row's task; `mobile_use` is the tool.

    Its only public methods are `reset` and `mobile_use`: TRL exposes every other public method to
    the model as a tool, so helpers are private or properties."""

    def __init__(self, profile: Profile):
        self._profile = profile
        self._frame = frame_for(profile)
        self._env = PhoneEnv(max_steps=profile.max_episode_steps, user_answers=profile.user_answers)
        self._task = None
        self._shot = None
        self._overflow = " ".join(str(i) for i in range(episode_token_budget(profile) + 1))

    def reset(self, task_seed: int, task_split: str, task_index: int, **row) -> None:
        """Start the row's task; the first screenshot is already in the row's prompt and images."""
        self._task = task_at(int(task_seed), str(task_split), int(task_index), self._profile.train_values)
        obs = self._env.reset(self._task)
        self._shot = render(obs.screen)
        return None

    def mobile_use(
        self,
        action: str,
        coordinate: list[int] | None = None,
        coordinate2: list[int] | None = None,
        text: str | None = None,
        time: float | None = None,
        button: str | None = None,
        status: str | None = None,
    ) -> list:
        """Perform one action on the phone and return the new screen.

        Args:
            action: One of click, long_press, swipe, type, key, system_button, open, wait, terminate, call_user.
            coordinate: [x, y] pixel of the current screenshot (click, long_press, swipe start).
            coordinate2: [x, y] pixel where a swipe ends.
            text: Text to type, key name, app name to open, or the question for call_user.
            time: Seconds to wait or to press.
            button: Back, Home, Menu or Enter (system_button).
            status: success or failure (terminate).

        Returns:
            The new screenshot and the task, history (with the user's replies) and screen elements.
        """
        if self._task is None:
            raise RuntimeError("reset() must be called before mobile_use()")
        if self._env.state.done:
            return self._overflow  # ends the rollout (see the module docstring)
        args = {
            "action": action,
            "coordinate": coordinate,
            "coordinate2": coordinate2,
            "text": text,
            "time": time,
            "button": button,
            "status": status,
        }
        note = ""
        try:
            act = self._frame.action_to_screen(Action.from_arguments({k: v for k, v in args.items() if v is not None}))
        except ActionError as exc:
            act, note = None, f"Invalid action ({exc.reason}).\n"
        prev = self._shot
        obs, done, _ = self._env.step(act)
        if done:
            return self._overflow
        self._shot = render(obs.screen)
        rec = observation_record(self._task, obs, self._shot, prev)
        body = user_text(
            rec,
            self._profile.use_a11y,
            len(images_of(rec, self._profile)),
            self._frame,
            self._profile.a11y_coords,
        )
        return [
            {"type": "text", "text": note + "Current screen:"},
            {"type": "image", "image": self._shot.copy()},
            {"type": "text", "text": "\n" + body},
        ]

    @property
    def episode_info(self) -> dict:
        """`PhoneEnv.info()` of the episode so far."""
        return self._env.info()

    @property
    def task(self):
        return self._task


def preview_episode(profile: Profile, row: dict, turns: int = 2) -> list[tuple[str, str]]:
    """(role, text) of the first `turns` turns of the expert's episode on a dataset row, as the model
    reads them: the first prompt's text, then each answer and tool result (screenshots as <screenshot>)."""
    env = PhoneTaskEnv(profile)
    env.reset(**row)
    out = [("user", "".join(p.get("text") or "<screenshot>" for p in row["prompt"][-1]["content"]))]
    for _ in range(turns):
        think, action = expert_act(env._env)
        model_action = env._frame.action_to_model(action)
        out.append(("assistant", format_completion(think if profile.use_think else None, model_action)))
        res = env.mobile_use(**model_action.to_arguments())
        if isinstance(res, str):
            out.append(("tool", "(episode over: the rollout ends here)"))
            break
        out.append(("tool", "".join(p["text"] if p["type"] == "text" else "<screenshot>" for p in res)))
    return out


# ---------------------------------------------------------------------------------- reward
def turn_text(message: dict) -> str:
    """An assistant turn as TRL parsed it, written back as text: <think>, any free text, tool calls."""
    parts = []
    if message.get("reasoning_content") is not None:
        parts.append(f"<think>{message['reasoning_content']}</think>")
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
    parts.append(content or "")
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, dict) else {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        parts.append("<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>")
    return "".join(parts)


def turn_format_score(message: dict, require_think: bool = True) -> float:
    """+1 for one non-empty <think>, then exactly one valid mobile_use call and no other text; else -1."""
    p = parse_completion(turn_text(message), require_think=require_think)
    return 1.0 if p.format_ok and p.action is not None else -1.0


class TaskReward:
    """TRL reward function of a whole episode: `task_reward` of the environment's final info and the
    per-turn format scores. Logs each component's batch mean as `task/<component>` and keeps one
    record per scored episode in `episodes` (for plots of the reward over training)."""

    __name__ = "task"

    def __init__(self, profile: Profile):
        self.profile = profile
        self.episodes: list[dict] = []

    def __call__(self, completions, environments=None, log_metric=None, trainer_state=None, **kwargs) -> list[float]:
        if environments is None:
            raise ValueError("the task reward needs the rollouts' environments (GRPOTrainer environment_factory)")
        step = getattr(trainer_state, "global_step", None)
        out, parts_all = [], []
        for completion, env in zip(completions, environments, strict=True):
            turns = [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
            scores = [turn_format_score(m, self.profile.use_think) for m in turns]
            info = env.episode_info
            parts = task_reward(info, scores)
            out.append(parts["total"])
            parts_all.append(parts)
            self.episodes.append(episode_sample(env.task, info, parts, scores, step, len(turns)))
        log_components(log_metric, parts_all)
        return out


# ----------------------------------------------------------------------------------- data
def task_dataset(profile: StageSettings, split: str = "train", n: int | None = None) -> datasets.Dataset:
    """One row per task: its first prompt (the stage 1-2 prompt of the home screen) and screenshot,
    plus the (seed, split, index) from which `PhoneTaskEnv.reset` rebuilds the task."""
    n = profile.train_split_tasks if n is None else n
    frame = frame_for(profile)
    rows = {
        "prompt": [],
        "images": [],
        "task_seed": [],
        "task_split": [],
        "task_index": [],
        "task_id": [],
        "category": [],
        "subcategory": [],
    }

    env = PhoneEnv()
    for i in range(n):
        task = task_at(profile.seed, split, i, profile.train_values)
        obs = env.reset(task)
        rec = observation_record(task, obs, render(obs.screen), None)
        rows["prompt"].append(prompt_messages(rec, profile, frame))
        rows["images"].append([screen_png(obs.screen)])  # the first turn has no previous screen
        rows["task_seed"].append(profile.seed)
        rows["task_split"].append(split)
        rows["task_index"].append(i)
        rows["task_id"].append(task.task_id)
        rows["category"].append(task.category)
        rows["subcategory"].append(task.subcategory)
    ds = datasets.Dataset.from_dict({k: v for k, v in rows.items() if k != "images"})
    return ds.add_column("images", rows["images"], feature=datasets.List(datasets.Image()))


# -------------------------------------------------------------------------------- trainer
def warm_start(profile: Profile, order=("grpo_full", "sft_full")) -> tuple[str, str | None]:
    """(name, path) of the first checkpoint of `order` that exists, else the untrained model:
    stage 3 starts from the action-level checkpoint, or from SFT where stage 2 was not run."""
    for name in order:
        try:
            return name, checkpoint_path(profile, name)
        except FileNotFoundError:
            continue
    return "untrained", None


def grpo_task(
    profile: str | Profile,
    start: str | None,
    name: str = "grpo_task",
    max_steps: int | None = None,
    resume: bool = False,
    train: datasets.Dataset | None = None,
    callbacks=None,
    rebuild: bool | None = None,
) -> TrainResult:
    """Stage 3 from checkpoint `start` (an SFT/GRPO output: adapter or full model; None: untrained).

    Each step samples `task_num_generations` episodes for each of `grpo_prompts_per_step` training
    tasks at `temperature` (at most `max_episode_steps` tool calls each), scores each episode with
    `TaskReward`, and takes a GRPO step on the model's own tokens. Writes
    `artifacts/<profile>/<name>/final`; `samples` of the result holds one record per episode. A result shipped
    for exactly these settings and start (`shipped_stages.result_key`) is installed instead of trained, unless
    `rebuild` (default: `name` in $INQUIRE_REBUILD) asks to train it here."""
    from trl import GRPOTrainer

    profile = get_profile(profile)
    torch.set_num_threads(profile.torch_threads)
    out_dir = artifacts_dir(profile) / name
    steps = max_steps or profile.task_grpo_steps
    key = shipped_stages.result_key(profile, name, steps, start) if train is None else None
    if key is not None and not shipped_stages.rebuilds(name, rebuild):
        installed = shipped_stages.install_final(profile, name, key, out_dir, base_of(start, profile))
        if installed is not None:
            return installed
    reprompt = profile.task_rollout == "reprompt"
    if train is None:
        rows = min(profile.train_split_tasks, steps * profile.grpo_prompts_per_step)
        train = start_rows(profile, "train", rows) if reprompt else task_dataset(profile, "train")
    model, processor = load_checkpoint(profile, start, trainable=True)
    if not reprompt:
        use_task_template(processor)
    is_adapter = start is not None and (Path(start) / "adapter_config.json").exists()
    with trainer_tracking(profile, name) as tracking, warnings.catch_warnings():
        # TRL marks environment_factory experimental with a UserWarning on every trainer; we rely on it
        # knowingly (pinned TRL) and the notebook output should not repeat it
        warnings.filterwarnings("ignore", message=".*environment_factory.*", category=UserWarning)
        # a reprompted episode's completion is one turn (its later turns are played by the reward); a
        # conversation's is the whole episode
        budget = profile.max_completion_length if reprompt else episode_token_budget(profile)
        config = task_grpo_config(profile, out_dir, budget, steps)
        record = config_record(config)  # what is trained, not where it is logged
        reward = EpisodeReturn(profile) if reprompt else TaskReward(profile)
        trainer = GRPOTrainer(
            model=model,
            args=use_tracking(config, tracking),
            train_dataset=train,
            processing_class=processor,
            reward_funcs=[reward],
            environment_factory=None if reprompt else partial(PhoneTaskEnv, profile),
            peft_config=lora_config(profile) if (profile.lora and not is_adapter) else None,
            callbacks=callbacks,
        )
        if reprompt:
            reward.bind(trainer.model, processor)
    final, seconds = fit(
        trainer,
        out_dir,
        resume,
        meta=lambda folder, seconds: {
            "stage": "grpo_task",
            "profile": profile.name,
            "start": start,
            "adapter": (folder / "adapter_config.json").exists(),
            "base": base_of(start, profile),
            "seconds": seconds,
            "episodes": len(reward.episodes),
            "max_episode_steps": profile.max_episode_steps,
            "task_rollout": profile.task_rollout,
            "config": record,
            "log_history": trainer.state.log_history,
            "samples": reward.episodes,
        },
        key=key,
    )
    adapter = (final / "adapter_config.json").exists()
    return TrainResult(str(final), adapter, trainer.state.log_history, len(train), seconds, reward.episodes)


def episode_reward_figure(episodes: list[dict], title: str = "task-level GRPO: reward per episode"):
    """Each episode's total reward over training steps (points) and the per-step mean (line)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_scatter(
        x=[e["step"] for e in episodes],
        y=[e["total"] for e in episodes],
        mode="markers",
        name="episode",
        marker=dict(opacity=0.5, color=["#2E7D32" if e["success"] else "#D32F2F" for e in episodes]),
        hovertext=[f"{e['task_id']} ({e['subcategory']}): {e['total']:.2f}" for e in episodes],
    )
    by_step: dict = {}
    for e in episodes:
        by_step.setdefault(e["step"], []).append(e["total"])
    xs = sorted(by_step, key=lambda s: (s is None, s))
    fig.add_scatter(x=xs, y=[sum(by_step[s]) / len(by_step[s]) for s in xs], mode="lines+markers", name="mean")
    fig.update_layout(title=title, xaxis_title="training step", yaxis_title="episode reward", height=360)
    return fig
