"""Tests for inquire_lib.training.task_grpo: the PhoneEnv wrapper TRL drives, the episode reward, the chat
template, and one task-level GRPO step through TRL's own multi-turn loop."""

import dataclasses
import json
from unittest import mock

import pytest


from inquire_lib.training import task_grpo as tt
from inquire_lib.data.benchmark import generate_tasks
from inquire_lib.profiles import get_profile
from inquire_lib.world.expert import expert_act

pytestmark = pytest.mark.slow

PROFILE = get_profile("smoke", max_episode_steps=15)


def row(index: int, split: str = "test") -> dict:
    return {"task_seed": 0, "task_split": split, "task_index": index, "prompt": [], "images": [], "category": "x"}


def play_expert(env: tt.PhoneTaskEnv) -> list:
    """Drive the environment with the expert's actions written in the model frame, as a model would."""
    results = []
    while not env._env.state.done:
        _, action = expert_act(env._env)
        results.append(env.mobile_use(**env._frame.action_to_model(action).to_arguments()))
    return results


def test_reset_rebuilds_the_rows_task():
    env = tt.PhoneTaskEnv(PROFILE)
    assert env.reset(**row(4)) is None
    assert env.task == generate_tasks(0, "test", 5)[4]
    assert env.episode_info["steps"] == 0


def test_only_mobile_use_is_a_tool():
    import inspect

    public = [n for n, _ in inspect.getmembers(tt.PhoneTaskEnv, predicate=inspect.isfunction) if not n.startswith("_")]
    assert public == ["mobile_use", "reset"]


def test_expert_episode_through_the_tool_succeeds():
    env = tt.PhoneTaskEnv(PROFILE)
    tasks = generate_tasks(0, "test", 12)
    for i, task in enumerate(tasks):
        env.reset(**row(i))
        results = play_expert(env)
        assert len(results) == len(task.steps)
        assert isinstance(results[-1], str) and len(results[-1].split()) > tt.episode_token_budget(PROFILE)
        for res in results[:-1]:
            assert [p["type"] for p in res] == ["text", "image", "text"]
            assert res[1]["image"].size == (360, 720)
            assert res[2]["text"].startswith(f"\nTask: {task.instruction}\nHistory: ")
        info = env.episode_info
        assert info["success"] and not info["unsafe"] and info["needless"] == 0
        if task.inquiry_required:
            assert info["asked_required"] is True
            replies = [r[2]["text"] for r in results[:-1] if "-> user:" in r[2]["text"]]
            assert replies, "the user's reply must reach the agent through the history line"


@pytest.mark.parametrize("user, answered", [("content", False), ("any", True)])
def test_the_episode_reward_gets_the_question_quality_from_the_environment(user, answered):
    """A vague ask at the inquiry goes unanswered by the content user: the path stays, the required
    inquiry is not asked, and stage 3's inquiry component pays nothing; the older user answers it."""
    from inquire_lib.agent.task_rewards import task_reward
    from inquire_lib.world.user import NOT_ANSWERED

    env = tt.PhoneTaskEnv(PROFILE.replace(user_answers=user))
    task = next(t for t in generate_tasks(0, "test", 12) if t.subcategory == "ambiguous_recipient")
    env.reset(**row(int(task.task_id.split("-")[-1])))
    ask = next(i for i, s in enumerate(task.steps) if s.inquiry)
    while env._env.state.idx < ask:
        env.mobile_use(**env._frame.action_to_model(expert_act(env._env)[1]).to_arguments())
    res = env.mobile_use(action="call_user", text="Can you help?")
    history = res[2]["text"]
    info = env.episode_info
    assert (info["answered"], info["unanswered"]) == ((1, 0) if answered else (0, 1))
    assert (task.steps[ask].inquiry.reply in history) is answered
    assert any(r in history for r in NOT_ANSWERED) is not answered
    assert task_reward(info, [1.0])["inquiry"] == (0.5 if answered else 0.0)


def test_invalid_arguments_are_an_invalid_step_and_done_ends_the_rollout():
    env = tt.PhoneTaskEnv(PROFILE.replace(max_episode_steps=2))
    env.reset(**row(0))
    res = env.mobile_use(action="click")  # no coordinate
    assert res[0]["text"].startswith("Invalid action (bad_argument:coordinate).")
    assert env.episode_info["invalid"] == 1
    last = env.mobile_use(action="fly")
    assert isinstance(last, str) and env.episode_info["steps"] == 2
    assert env.mobile_use(action="wait") == last  # nothing happens after the end
    assert env.episode_info["steps"] == 2


def test_click_coordinates_are_converted_from_the_model_frame():
    def opened(index):
        env = tt.PhoneTaskEnv(PROFILE)
        env.reset(**row(index))
        env.mobile_use(**env._frame.action_to_model(expert_act(env._env)[1]).to_arguments())  # open the app
        return env

    index = next(i for i in range(1, 40, 2) if opened(i)._env.current_step.action.type == "click")  # a safe task
    env = opened(index)
    gold = env._env.current_step.action
    env.mobile_use(action="click", coordinate=list(env._frame.to_model(gold.coordinate)))
    assert env._env.state.idx == 2 and env._env.state.detour is None
    # the screen-frame point itself, read as model-frame pixels, lands elsewhere: no progress
    env = opened(index)
    env.mobile_use(action="click", coordinate=list(gold.coordinate))
    assert env._env.state.idx == 1


@pytest.mark.parametrize(
    "message, score",
    [
        (
            {
                "role": "assistant",
                "reasoning_content": "Home. Inquiry check: not needed, because x.",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "mobile_use", "arguments": {"action": "open", "text": "Chat"}},
                    }
                ],
            },
            1.0,
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "mobile_use", "arguments": {"action": "open", "text": "Chat"}},
                    }
                ],
            },
            -1.0,
        ),
        (
            {
                "role": "assistant",
                "reasoning_content": "a",
                "content": "chatter",
                "tool_calls": [
                    {"type": "function", "function": {"name": "mobile_use", "arguments": {"action": "wait"}}}
                ],
            },
            -1.0,
        ),
        (
            {
                "role": "assistant",
                "reasoning_content": "a",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "mobile_use", "arguments": {"action": "wait"}}}
                ]
                * 2,
            },
            -1.0,
        ),
        (
            {
                "role": "assistant",
                "reasoning_content": "a",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "mobile_use", "arguments": {"action": "click"}}}
                ],
            },
            -1.0,
        ),
        (
            {
                "role": "assistant",
                "reasoning_content": "a",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "mobile_use", "arguments": '{"action": "wait"}'}}
                ],
            },
            1.0,
        ),
        ({"role": "assistant", "content": "garbage"}, -1.0),
    ],
)
def test_turn_format_score(message, score):
    assert tt.turn_format_score(message) == score


def test_turn_format_without_think_when_the_profile_drops_it():
    msg = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "mobile_use", "arguments": {"action": "wait"}}}],
    }
    assert tt.turn_format_score(msg, require_think=False) == 1.0


def test_task_reward_function_scores_environments():
    good = {
        "role": "assistant",
        "reasoning_content": "ok. Inquiry check: not needed, because x.",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "mobile_use", "arguments": {"action": "wait"}}}],
    }
    bad = {"role": "assistant", "content": "?"}
    envs = [tt.PhoneTaskEnv(PROFILE) for _ in range(2)]
    for i, env in enumerate(envs):
        env.reset(**row(i * 2))  # two inquiry tasks
    play_expert(envs[0])
    logged = {}
    reward = tt.TaskReward(PROFILE)
    out = reward(
        [[good, {"role": "tool", "content": "x"}, good], [bad]],
        environments=envs,
        log_metric=lambda k, v: logged.__setitem__(k, v),
        trainer_state=mock.Mock(global_step=3),
    )
    assert out == [2.5, -1.0]
    assert logged == {
        "task/success": 0.5,
        "task/inquiry": 0.25,
        "task/unsafe": 0.0,
        "task/needless": 0.0,
        "task/format": 0.0,
        "task/total": 0.75,
    }
    assert [e["step"] for e in reward.episodes] == [3, 3]
    assert reward.episodes[0]["questions"] == {
        "asks": 1,
        "answered": 1,
        "unanswered": 0,
        "repeats": 0,
        "asks_needed": 1,
    }
    assert reward.episodes[0]["success"] is True and reward.episodes[0]["turns"] == 2
    with pytest.raises(ValueError, match="environments"):
        reward([[good]])


def test_task_template_renders_stage_1_2_prompts_unchanged_and_parses_tool_calls():
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    from inquire_lib.training.models import load_processor, model_path

    proc = load_processor(model_path(PROFILE), PROFILE)
    ds = tt.task_dataset(PROFILE, "train", 2)
    prompt = ds[0]["prompt"]
    before = proc.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    assert not supports_tool_calling(proc)  # why stage 3 switches the template
    tt.use_task_template(proc)
    env = tt.PhoneTaskEnv(PROFILE)
    assert proc.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True) == before
    assert (
        proc.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True, tools=[env.mobile_use]) == before
    )
    assert supports_tool_calling(proc) and is_chat_template_prefix_preserving(proc)
    out = proc.tokenizer.parse_response(
        '<think>a</think><tool_call>{"name": "mobile_use", "arguments": '
        '{"action": "click", "coordinate": [5, 6]}}</tool_call><|im_end|>',
        prefix="<|im_start|>assistant\n",
    )
    assert out["tool_calls"][0]["function"] == {
        "name": "mobile_use",
        "arguments": {"action": "click", "coordinate": [5, 6]},
    }


def test_task_dataset_rows():
    ds = tt.task_dataset(PROFILE, "train", 3)
    assert ds.column_names == [
        "prompt",
        "task_seed",
        "task_split",
        "task_index",
        "task_id",
        "category",
        "subcategory",
        "images",
    ]
    assert ds["task_index"] == [0, 1, 2] and ds["task_id"] == ["train-0-00000", "train-0-00001", "train-0-00002"]
    r = ds[1]
    assert len(r["images"]) == 1 and r["images"][0].size == (360, 720)
    assert sum(1 for part in r["prompt"][1]["content"] if part["type"] == "image") == 1
    assert "History: none" in r["prompt"][1]["content"][-1]["text"]


def test_warm_start_falls_back(tmp_path, monkeypatch):
    from inquire_lib.runs.integrity import write_marker

    def finished(name):  # a stage output counts once its completeness marker is written
        folder = tmp_path / "smoke" / name / "final"
        folder.mkdir(parents=True)
        assert tt.warm_start(PROFILE)[0] != name  # a folder without its marker is a run cut short
        (folder / "inquire_train.json").write_text("{}")
        write_marker(folder)
        return folder

    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path))
    assert tt.warm_start(PROFILE) == ("untrained", None)
    finished("sft_full")
    assert tt.warm_start(PROFILE)[0] == "sft_full"
    folder = finished("grpo_full")
    assert tt.warm_start(PROFILE) == ("grpo_full", str(folder))


OPEN = (
    '<think>Home. Inquiry check: not needed, because opening is safe.</think><tool_call>{"name": "mobile_use", '
    '"arguments": {"action": "open", "text": "Chat"}}</tool_call><|im_end|>'
)
END = (
    '<think>Done. Inquiry check: not needed, because done.</think><tool_call>{"name": "mobile_use", '
    '"arguments": {"action": "terminate", "status": "success"}}</tool_call><|im_end|>'
)


def test_one_grpo_task_step_through_trls_multi_turn_loop(tmp_path, monkeypatch):
    """TRL's environment loop with scripted turns (open an app, then terminate): two tool calls per
    episode, the screenshot of turn 1 fed back as an image, the rollout ended by terminate, the
    reward read from the environment, and a training step on the episode tokens."""
    import torch
    from trl import GRPOTrainer

    torch.set_num_threads(1)
    monkeypatch.setenv("INQUIRE_ARTIFACTS", str(tmp_path))
    seen = []

    def scripted(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for ids in prompt_ids:
            turn = self._tokenizer.decode(ids).count("<tool_response>")
            seen.append((turn, has_tool_images, [len(x or []) for x in images] if images else None))
            out.append(self._tokenizer(OPEN if turn == 0 else END, add_special_tokens=False)["input_ids"])
        return out, None

    prof = get_profile("smoke")
    with mock.patch.object(GRPOTrainer, "_generate_single_turn", scripted):
        res = tt.grpo_task(prof, None, max_steps=1, train=tt.task_dataset(prof, "train", 4))
    n = prof.grpo_prompts_per_step * prof.task_num_generations
    assert seen == [(0, False, [1] * n)] * n + [(1, True, [2] * n)] * n  # turn 2 sees both screenshots
    log = res.log_history[0]
    assert log["rewards/task/mean"] == 1.0 and log["task/format"] == 1.0 and log["task/success"] == 0.0
    assert log["tools/call_frequency"] == 2.0 and log["tools/failure_frequency"] == 0.0
    assert len(res.samples) == n and all(e["turns"] == 2 and e["env_steps"] == 2 for e in res.samples)
    assert all(e["status"] == "success" and not e["success"] for e in res.samples)
    meta = json.loads((tmp_path / "smoke" / "grpo_task" / "final" / "inquire_train.json").read_text())
    assert meta["stage"] == "grpo_task" and meta["episodes"] == n and meta["adapter"] is True
    fig = tt.episode_reward_figure(res.samples)
    assert list(fig.data[1].y) == [1.0]


def test_episode_budget_counts_answers_text_and_image_tokens():
    smoke = get_profile("smoke")  # 112x224 screenshots: 4 x 8 = 32 image tokens
    assert tt.episode_token_budget(smoke) == smoke.max_episode_steps * (
        smoke.max_completion_length + tt.TOOL_TEXT_TOKENS + 32
    )
    assert tt.episode_token_budget(get_profile("cpu")) == tt.TINY_MAX_EPISODE_TOKENS  # capped below the context
    gpu = get_profile("gpu")
    assert tt.episode_token_budget(gpu) > tt.TINY_MAX_EPISODE_TOKENS  # a real checkpoint is not capped
    small = get_profile("small")  # a budget set for the whole episode replaces the turns' sum
    every_turn = tt.episode_token_budget(dataclasses.replace(small, task_max_completion_length=None))
    assert tt.episode_token_budget(small) == small.task_max_completion_length < every_turn
