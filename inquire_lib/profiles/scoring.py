"""The evaluation's settings: the test split's size, decoding, the engine, what a run scores, and the episode
every online play shares (evaluation, GRPO's choice on validation, stage 3, DAgger's roll-outs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .shared import StageSettings

# how the simulated user answers `call_user` (`world.env`): from what the question asks, or any question
USER_ANSWERS = ("content", "any")


@dataclass(frozen=True)
class EvalSettings(StageSettings):
    """What the evaluations score, how they decode and how an episode is played, on the model and the data (`StageSettings`)."""

    eval_batch: int = field(
        default=32, metadata={"help": "prompts generated at once in an evaluation", "affects": ("eval",)}
    )
    eval_max_new_tokens: int = field(
        default=96,
        metadata={"help": "the longest answer an evaluation generates, in tokens", "affects": ("eval",)},
    )
    eval_repetition_penalty: float = field(
        default=1.0,
        metadata={
            "help": "the evaluation's repetition penalty, explicit: a hub checkpoint ships its own (Qwen: 1.05)",
            "affects": ("eval",),
        },
    )
    # decoding is bound by reading the weights once per new token: bf16 weights halve that, and a CPU with native
    # bf16 (AVX-512 BF16, AMX) multiplies them at full speed; elsewhere (AVX2: emulated, ~90x slower) ignored
    eval_bf16: bool = field(
        default=False,
        metadata={
            "help": "evaluate in bf16 (an adapter merged first) on a CPU with native bf16; greedy outputs may differ "
            "from fp32's in a few tokens, so the manifest names the dtype",
            "affects": ("eval",),
        },
    )
    # OpenVINO GenAI's continuous batching (`evaluation.engine`): every prompt of a pass in one queue, each row
    # leaving as soon as its answer ends; passes that read logits (fork margins, confidence, an ask bias) stay on HF.
    # Not an "eval" setting: an evaluation names its engine in the played model's digest instead
    # (`stages.evaluate.played_digest`, as it names an ask bias), so the keys of HF evaluations stay those from before
    eval_engine: str = field(
        default="hf",
        metadata={
            "help": "what generates the greedy answers of step evaluation and task play: hf (transformers) or "
            "openvino (an exported copy, `inquire export-openvino`)",
            "affects": ("run",),
        },
    )
    eval_tasks: int = field(
        default=120,
        metadata={"help": "held-out test tasks evaluated (the step-level test is their steps)", "affects": ("test",)},
    )
    # When its tasks hold fewer, the inquiry steps of the split's next tasks join it as probes
    # (`data.benchmark.inquiry_probes`; their other steps are left out) that count toward step ISR only, so ISR's
    # interval narrows (about +-7 points at 200) while every other step rate stays that of the `eval_tasks`
    # (`val_tasks`) tasks
    eval_inquiry_steps: int = field(
        default=0,
        metadata={
            "help": "the step-level test holds at least this many inquiry steps, topped up with probes (0: no probes)",
            "affects": ("test",),
        },
    )
    task_eval_tasks: int = field(
        default=0,
        metadata={
            "help": "held-out test tasks played online at the task level (0: the `eval_tasks` of the step-level test)",
            "affects": ("test",),
        },
    )
    eval_untrained: bool = field(
        default=True,
        metadata={
            "help": "score the untrained model beside the trained ones (a grafted model's untrained text runs to "
            "the token cap on every step: minutes spent on a known zero)",
            "affects": ("run",),
        },
    )
    task_checkpoints: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "the checkpoints played online on the held-out tasks (empty: every one a notebook names); the "
            "others are scored step by step only",
            "affects": ("run",),
        },
    )
    logit_passes: bool = field(
        default=True,
        metadata={
            "help": "run the passes that read logits on the HF path: the operating curves of stage 2 and the evaluation's "
            "learned asking against a confidence threshold",
            "affects": ("run",),
        },
    )
    # --- the episode every online play shares ---
    max_episode_steps: int = field(
        default=15,
        metadata={
            "trl": {"task_grpo_config": "max_tool_calling_iterations"},
            "help": "the step limit of an episode played online (evaluation, stage 3, roll-outs)",
            "affects": ("task_grpo", "eval"),
        },
    )
    user_answers: str = field(
        default="content",
        metadata={
            "help": "the simulated user answers what a question asks (content) or any question at an inquiry step "
            "(any, the older user); stage 2's inquiry reward judges questions the same way",
            "affects": ("grpo", "task_grpo", "eval"),
        },
    )
