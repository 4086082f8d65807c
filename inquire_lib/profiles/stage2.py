"""Stage 2's settings: action-level GRPO on TRL's GRPOTrainer, its rewards and the checkpoint chosen on validation."""

from __future__ import annotations

from dataclasses import dataclass, field

from .scoring import EvalSettings


@dataclass(frozen=True)
class GRPOSettings(EvalSettings):
    """Stage 2: action-level GRPO, its rewards and its choice on validation."""

    grpo_grad_accum: int = field(
        default=1, metadata={"help": "gradient accumulation of stage 2: micro-batches per process", "affects": ("run",)}
    )
    grpo_steps: int = field(
        default=150,
        metadata={"trl": {"grpo_config": "max_steps"}, "help": "stage 2's GRPO steps", "affects": ("grpo",)},
    )
    grpo_prompts_per_step: int = field(
        default=4,
        metadata={
            "help": "prompts in a stage 2 step (global), each with num_generations completions",
            "affects": ("grpo",),
        },
    )
    grpo_inquiry_share: float = field(
        default=0.3,
        metadata={
            "help": "the share of GRPO prompts that need an inquiry (and again that follow one)",
            "affects": ("grpo",),
        },
    )
    # less leaves room for ordinary steps, whose actions a large inquiry share otherwise leaves without prompts
    grpo_followup_share: float | None = field(
        default=None,
        metadata={
            "help": "the share of GRPO prompts that follow an answered inquiry (None: grpo_inquiry_share)",
            "affects": ("grpo",),
        },
    )
    # The detour states: the steps after a mistake (a detour, labelled Back, then the path with the mistake in
    # the history; inquiries included) of `grpo_detour_tasks` fresh training tasks played with one
    # (`data.benchmark.grpo_detours`). The other prompts are all on the path, while a policy playing a task
    # meets such states after its first mistake, where an ask that nothing calls for goes untrained by them
    grpo_detour_share: float = field(
        default=0.0,
        metadata={"help": "the share of GRPO prompts that are states off the expert's path", "affects": ("grpo",)},
    )
    num_generations: int = field(
        default=8,
        metadata={
            "trl": {"grpo_config": "num_generations"},
            "help": "completions per GRPO prompt (the group)",
            "affects": ("grpo",),
        },
    )
    grpo_lr: float = field(
        default=2e-4,
        metadata={
            "trl": {"grpo_config": "learning_rate", "task_grpo_config": "learning_rate"},
            "help": "the learning rate of stages 2 and 3",
            "affects": ("grpo", "task_grpo"),
        },
    )
    beta: float = field(
        default=0.0,
        metadata={
            "trl": {"grpo_config": "beta", "task_grpo_config": "beta"},
            "help": "the KL term's weight in stages 2 and 3 (0: no reference model)",
            "affects": ("grpo", "task_grpo"),
        },
    )
    temperature: float = field(
        default=1.0,
        metadata={
            "trl": {"grpo_config": "temperature", "task_grpo_config": "temperature"},
            "help": "the sampling temperature of GRPO's completions",
            "affects": ("grpo", "task_grpo"),
        },
    )
    # the ask-or-act decision is one forking token in the reasoning, the rest is near-deterministic
    top_entropy_quantile: float = field(
        default=1.0,
        metadata={
            "trl": {"grpo_config": "top_entropy_quantile"},
            "help": "train only on the completion tokens whose entropy is in this top quantile (1.0: all tokens)",
            "affects": ("grpo",),
        },
    )
    grpo_iterations: int = field(
        default=1,
        metadata={
            "trl": {"grpo_config": "num_iterations"},
            "help": "optimisation passes per generated batch (generation dominates on CPU)",
            "affects": ("grpo",),
        },
    )
    # dapo: over the batch's tokens; dr_grpo: by a constant, so long completions weigh no less
    loss_type: str = field(
        default="dapo",
        metadata={
            "trl": {"grpo_config": "loss_type", "task_grpo_config": "loss_type"},
            "help": "GRPOConfig's loss_type: how the token losses are averaged",
            "affects": ("grpo", "task_grpo"),
        },
    )
    # group: by each group's reward std, which magnifies a group that barely differs; none: mean-centred only
    scale_rewards: str = field(
        default="group",
        metadata={
            "trl": {"grpo_config": "scale_rewards", "task_grpo_config": "scale_rewards"},
            "help": "GRPOConfig's scale_rewards: how advantages are scaled (group, batch, none)",
            "affects": ("grpo", "task_grpo"),
        },
    )
    # the stage's own run (`grpo_weak`, the checkpoint later notebooks use) and `grpo_weak_s1`, ... with the
    # training seed + 1, ...; each chosen on validation
    grpo_seeds: int = field(
        default=1,
        # how many runs, not what one run is: no stage's key reads it
        metadata={"help": "training seeds of each GRPO stage in the GRPO notebook's table", "affects": ("run",)},
    )
    # two runs side by side on 2 cores, each on one thread, cost about what one costs alone (docs/lab/log.md)
    parallel_runs: int = field(
        default=1,
        metadata={
            "help": "independent training runs (the extra seeds) at once, each a process with torch_threads threads",
            "affects": ("run",),
        },
    )
    grpo_save_steps: int = field(
        default=0,
        metadata={
            "help": "stage 2 keeps a checkpoint every this many steps for validation to choose from (0: a third of "
            "the run, last two kept)",
            "affects": ("grpo",),
        },
    )
    # The chosen checkpoint: the highest validation step ISR whose needless-inquiry rate is at most
    # `select_max_needless_steps` and whose safe-step accuracy is at most `select_max_safe_drop` below the start's
    select_max_needless_steps: float = field(
        default=0.10,
        metadata={
            "help": "checkpoint choice: the highest validation needless-inquiry rate allowed",
            "affects": ("grpo",),
        },
    )
    select_max_safe_drop: float = field(
        default=0.02,
        metadata={
            "help": "checkpoint choice: the largest drop of safe-step accuracy below the start's allowed",
            "affects": ("grpo",),
        },
    )
    # the step-level split never shows a screen off the path (`training.selection`)
    select_max_needless_episodes: float = field(
        default=1.0,
        metadata={
            "help": "checkpoint choice, below 1: validation tasks played online keep the share of episodes with a "
            "needless inquiry at most this",
            "affects": ("grpo",),
        },
    )
    # The first bias (nearest zero first) whose validation tasks, played online, keep the share of episodes
    # with a needless inquiry at most `select_bias_max_needless_episodes`, else the lowest share; the step and task
    # evaluations play the checkpoint with it (`training.checkpoints.ask_bias_of`); measured and left off
    # (docs/lab/grpo_inquiry_gain.md, "An operating point for grpo_full")
    select_ask_biases: tuple[float, ...] = field(
        default=(),
        metadata={
            "help": "the chosen checkpoint's operating point: biases tried on the ask decision's logit "
            "(call_user's); (): none",
            "affects": ("grpo",),
        },
    )
    select_bias_max_needless_episodes: float = field(
        default=0.05,
        metadata={
            "help": "the share of validation episodes with a needless inquiry an ask bias must keep to",
            "affects": ("grpo",),
        },
    )
    max_completion_length: int = field(
        default=96,
        metadata={
            "trl": {"grpo_config": "max_completion_length"},
            "help": "the longest completion GRPO generates, in tokens (stages 2 and 3)",
            "affects": ("grpo", "task_grpo"),
        },
    )
    use_vllm: bool = field(
        default=False,
        metadata={"help": "generate GRPO's completions through vLLM (TRL's use_vllm)", "affects": ("run",)},
    )
    vllm_mode: str = field(
        default="colocate",
        metadata={
            "help": "colocate shares the training GPUs; server talks to `trl vllm-serve` on GPUs of its own",
            "affects": ("run",),
        },
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.3, metadata={"help": "the GPU memory share vLLM takes when colocated", "affects": ("run",)}
    )
    missed_penalty: float = field(
        default=0.5, metadata={"help": "the inquiry reward's cost of a missed ask", "affects": ("grpo",)}
    )
    needless_penalty: float = field(
        default=0.5, metadata={"help": "the inquiry reward's cost of a needless ask", "affects": ("grpo",)}
    )
    # "consistency" (-1 where the tool call contradicts the reasoning's inquiry check) and "reasoned_ask"
    # (-1 for an ask after "not needed" only) are off by default
    reward_funcs: tuple[str, ...] = field(
        default=("format", "action", "inquiry"),
        metadata={"help": "the action-level rewards GRPO sums (`agent.rewards.REWARDS`)", "affects": ("grpo",)},
    )
    reward_weights: dict[str, float] = field(
        default_factory=dict,
        metadata={
            "help": "the weight of an action-level reward, by name; a reward not named weighs 1.0, as in TRL",
            "affects": ("grpo",),
        },
    )
