"""Profiles: one code path from a laptop to a GPU.

A profile is a frozen dataclass of sizes and model choices. Notebooks take `PROFILE` (a name) and
`OVERRIDES` (a dict of profile fields, checked by `apply_overrides`); everything else is looked up
here, so `smoke` (CI), `cpu` (the default main job) and `gpu` (a real checkpoint) run the very same
code. `inquire run --set grpo_lr=1e-4` reaches the same check through `parse_overrides`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

# how training tasks draw slot values and phrasings (`world.values`): "fixed" (the train pools and the
# template's sentence) or "procedural" (open-ended composed values and composed phrasings)
TRAIN_VALUES = ("fixed", "procedural")
# how the simulated user answers `call_user` (`world.env`): from what the question asks, or any question
USER_ANSWERS = ("content", "any")
TOKENIZER_DIGITS = ("merged", "split")
TOKENIZER_SLOTS = ("apart", "joined")

# What a field's value reaches, named in each field's metadata ("affects"). The cache keys and records
# that name fields are built from these (`fields_affecting`), so a new field is classified once, here.
AFFECTS: dict[str, str] = {
    "data": "which tasks and steps the training and validation splits, drills and probe sets hold (`data.benchmark`'s "
    "caches)",
    "test": "which held-out tasks and inquiry probes the test evaluation scores: no stage trains or chooses on them, "
    "so they are in no stage's key (an evaluation is keyed by its items instead)",
    "tokenizer": "the tiny model's cached weights and tokenizer (`training.models.tiny_dir`)",
    "base_agent": "stage 0: an override gets a cached base agent of its own (`training.sft.BASE_AGENT_FIELDS`)",
    "checkpoints": "every stage's training: the model, numerics and seeds all stages share",
    "sft": "stage 1 (SFT: sft_weak, sft_full)",
    "dagger": "stage 1b (DAgger rounds from full SFT and their equal-compute control)",
    "grpo": "stage 2 (action-level GRPO) and its checkpoint choice; the GRPO notebook records these "
    "(`training.configs.GRPO_SETTINGS`)",
    "task_grpo": "stage 3 (task-level GRPO in PhoneEnv)",
    "eval": "the settings in every evaluation's read-back key (`runs.readback.EVAL_SETTINGS`): prompt, image "
    "size, decoding, numerics; the items evaluated are keyed by their content instead",
    "ablations": "the ablations notebook's points",
    "run": "how a run executes and what it writes beside its results: threads, processes, memory, time "
    "limits, names, figure files",
}


# the share of generated tasks that form the test split; the rest is the training split
TEST_FRACTION = 0.2


def split_sizes(n_tasks: int) -> dict[str, int]:
    """The real sizes of the training and test splits of `n_tasks` generated tasks."""
    n_test = max(1, round(n_tasks * TEST_FRACTION))
    return {"train": n_tasks - n_test, "test": n_test}


# what a field's value comes to on a given profile, shown beside its help by `explain`
DERIVED = {"benchmark_tasks": lambda p: f"here {p.train_split_tasks} + {p.test_split_tasks}"}


@dataclass(frozen=True)
class Profile:
    name: str = field(
        metadata={
            "help": "the profile's name: names its runs, artifacts and base agent folder; chosen, never overridden",
            "affects": ("run",),
        }
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "the seed of the data, the tiny model, the base agent and every training run",
            "affects": ("data", "tokenizer", "base_agent", "checkpoints", "eval"),
        },
    )
    train_seed: int | None = field(
        default=None,
        metadata={
            "help": "set to vary only the training runs (ablation and GRPO seeds); None: `seed`",
            "affects": ("checkpoints",),
        },
    )
    # --- data: generated InquireBench ---
    benchmark_tasks: int = field(
        default=520,
        metadata={
            "help": "tasks InquireBench generates for the profile, split 80/20 into the training and the test split "
            "(their real sizes: `train_split_tasks`, `test_split_tasks`)",
            "affects": ("data", "base_agent", "checkpoints"),
        },
    )
    val_tasks: int = field(
        default=80,
        metadata={
            "help": "validation tasks: they choose among GRPO checkpoints, so the test split never does",
            "affects": ("data", "grpo"),
        },
    )
    # The tiny model's tokenizer is built from training text of the same kind, and each setting has
    # caches of its own; the test and validation splits are the same either way.
    train_values: str = field(
        default="fixed",
        metadata={
            "help": "how the training split draws slot values and phrasings: fixed (the train pools and the templates' "
            "sentences) or procedural (open-ended composed values and phrasings; `world.values`)",
            "affects": ("data", "tokenizer", "base_agent", "checkpoints"),
        },
    )
    # --- model ---
    model: str = field(
        default="tiny:cpu",
        metadata={
            "help": "the base model: tiny:<size> builds offline, smollm2:135m grafts the pretrained SmolLM2 from its "
            "installed GGUF file (`training.pretrained`); anything else is a hub id or a local path",
            "affects": ("tokenizer", "base_agent", "checkpoints", "eval"),
        },
    )
    pretrained_layers: int = field(
        default=0,
        metadata={
            "help": "keep only the first N layers of a pretrained language model (0: all 30 of SmolLM2): a knob "
            "that trades what the model knows for time a step",
            "affects": ("tokenizer", "base_agent", "checkpoints", "eval"),
        },
    )
    # merged: "18" after "$" or a quote is one token, " 18" after a space is " 1" "8", so the reasoning's
    # "Type: 18." and the action's "18" share no token and copying an amount means translating it twice.
    # The vocabulary is learned the same way either way and only the cutting differs, so an agent trained
    # with merged digits can continue with split ones (`base_agent_init`). Merged, the shipped agents type
    # no value with a digit right (0 of the 25 held-out `type` steps whose value has one; 28 of the 51 others)
    tokenizer_digits: str = field(
        default="merged",
        metadata={
            "help": "how the tiny model's tokenizer cuts numbers: merged (GPT-2's byte-level BPE) or split "
            "(every digit its own token, as Qwen2's tokenizer does)",
            "affects": ("tokenizer", "base_agent", "checkpoints"),
        },
    )
    # apart: the space is the same token in every line of the element list, so finding the slot that follows
    # a name means matching across it; joined: " <r2>" follows the name's last token directly, in the list
    # and in the reasoning's "Target: Dinner party <r2>" alike. Same ids, so an agent trained apart can
    # continue joined. Apart, 33 of the curriculum agent's 80 wrong clicks on the held-out steps name the
    # right element and the wrong slot (`evaluation.copying.click_lookups`)
    tokenizer_slots: str = field(
        default="apart",
        metadata={
            "help": "how an element's slot id (<r2>) is cut after the space before it: apart (the space a token "
            "of its own) or joined (the slot token carries its space)",
            "affects": ("tokenizer", "base_agent", "checkpoints"),
        },
    )
    load_in_4bit: bool = field(
        default=False,
        metadata={
            "help": "load the model's weights in 4-bit NF4 (QLoRA); stage 0 always trains full weights",
            "affects": ("checkpoints", "eval"),
        },
    )
    bf16: bool = field(
        default=False,
        metadata={
            "help": "bf16 weights and compute on a GPU",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    # fast only where the CPU has AVX-512 BF16 or AMX; elsewhere it emulates bf16, far slower than fp32, so the
    # switch is ignored there (`runs.hardware.bf16_probe`; docs/lab/log.md has the ratios per CPU kind)
    cpu_bf16: bool = field(
        default=False,
        metadata={
            "help": "bf16 autocast when training full weights on a CPU with native bf16 matmuls; never with 4-bit weights",
            "affects": ("checkpoints",),
        },
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={"help": "recompute activations in the backward pass: less memory, same result", "affects": ("run",)},
    )
    torch_threads: int = field(
        default=1,
        metadata={
            "help": "torch threads per process; 2 threads on 2 busy cores thrash (a step 1 s -> 10 s, measured), "
            "1 is steadier (CI)",
            "affects": ("eval", "run"),
        },
    )
    requires_cuda: bool = field(
        default=False,
        metadata={
            "help": "refuse to start without CUDA (a 3B model in fp32 on CPU runs for days); INQUIRE_ALLOW_CPU=1 "
            "lets a test run its configs with the tiny model standing in",
            "affects": ("run",),
        },
    )
    min_pixels: int = field(
        default=28 * 28 * 4,
        metadata={
            "help": "the smallest image handed to the processor, in pixels",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    max_pixels: int = field(
        default=28 * 28 * 36,
        metadata={
            "help": "the largest image handed to the processor, in pixels: a 360x720 screen becomes 112x224 = 32 tokens",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    # --- prompt ---
    use_a11y: bool = field(
        default=True,
        metadata={
            "help": "the accessibility list in the prompt (ablation switch)",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    a11y_coords: bool = field(
        default=True,
        metadata={
            "help": "element centres in the accessibility list (a tiny model reads the slot id instead)",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    use_think: bool = field(
        default=True,
        metadata={
            "help": "pre-action reasoning before the tool call (ablation switch)",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    use_prev_screenshot: bool = field(
        default=True,
        metadata={
            "help": "the previous screenshot in the prompt too (off: one image, shorter sequences)",
            "affects": ("base_agent", "checkpoints", "eval"),
        },
    )
    # --- LoRA ---
    lora: bool = field(
        default=True,
        metadata={
            "help": "train LoRA adapters (off: full weights; stage 0 always trains full weights)",
            "affects": ("checkpoints",),
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank", "affects": ("checkpoints",)})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling alpha", "affects": ("checkpoints",)})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout", "affects": ("checkpoints",)})
    lora_targets: tuple[str, ...] = field(
        default=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        metadata={"help": "the language model's projections that get adapters", "affects": ("checkpoints",)},
    )
    # --- stage 0: a base agent that acts but never asks (the analogue of a pretrained GUI model);
    # trained once by `training.sft.base_agent` and cached; 0 steps means the checkpoint is the base ---
    base_agent_steps: int = field(
        default=0,
        metadata={
            "help": "stage 0's training steps (0: no stage 0, the model itself is the base)",
            "affects": ("base_agent",),
        },
    )
    # same model, tokenizer and prompt, so a short profile reuses the long stage 0 (shipped or cached)
    base_agent_from: str = field(
        default="",
        metadata={
            "help": "start from another profile's base agent (its name, e.g. cpu) instead of training one ('': own)",
            "affects": ("checkpoints",),
        },
    )
    base_agent_lr: float = field(default=2e-3, metadata={"help": "stage 0's learning rate", "affects": ("base_agent",)})
    base_agent_init: str = field(
        default="",
        metadata={
            "help": "stage 0 continues this base agent (a cache folder name, e.g. a shipped one): its weights, or "
            "for a pretrained model its adapter ('': from random weights, or a new adapter)",
            "affects": ("base_agent",),
        },
    )
    base_agent_threads: int = field(
        default=0, metadata={"help": "torch threads for stage 0 (0: torch_threads)", "affects": ("run",)}
    )
    # The value-copying steps are every `type` and clicks on an element the instruction names: with fresh
    # values, only copying lowers their loss (docs/lab/base_agent.md, "copy drill")
    copy_drill_tasks: int = field(
        default=0,
        metadata={
            "help": "stage 0's copy drill: the value-copying steps of this many more fresh training tasks join its "
            "data (`data.benchmark.copy_drill`)",
            "affects": ("data", "base_agent"),
        },
    )
    # 0: the training split, seen about 4 times in 2,500 steps, so a value can be recalled per task instead of copied
    base_agent_tasks: int = field(
        default=0,
        metadata={
            "help": "stage 0's own tasks: N > 0 trains on every action step of N fresh tasks "
            "(`data.benchmark.stage0_tasks`); 0 on the benchmark's training split",
            "affects": ("data", "base_agent"),
        },
    )
    # Each fresh task is played by the expert with mistakes at a random step (another app, a click that opens
    # a detour); the steps after them (Back with its reason, then the path with the mistakes in the history)
    # join stage 0's data. Without them no training example shows a detour, and every policy ends the task
    # there (docs/lab/base_agent.md, "recovery drill")
    recovery_drill_tasks: int = field(
        default=0,
        metadata={
            "help": "stage 0's recovery drill: the steps after a mistake of this many more fresh tasks join its data "
            "(`data.benchmark.recovery_drill`)",
            "affects": ("data", "base_agent"),
        },
    )
    # The app is one decision a task, about a fifth of stage 0's rows, and the small agent's wrong apps are stable
    # pairs that more of the same mix teaches slowly (docs/lab/small.md)
    open_oversample: int = field(
        default=1,
        metadata={
            "help": "repeats of each `open` step (the app choice) in stage 0's data of fresh tasks (1: as played)",
            "affects": ("base_agent",),
        },
    )
    # with one, a policy that learned Back still ends the task on its second detour (docs/lab/base_agent.md)
    recovery_drill_slips: int = field(
        default=1,
        metadata={
            "help": "at most this many mistakes in a row at the recovery drill's step, each undone by Back",
            "affects": ("data", "base_agent"),
        },
    )
    # --- stage 1: SFT ---
    sft_steps: int = field(default=600, metadata={"help": "stage 1's SFT steps", "affects": ("sft",)})
    sft_batch: int = field(
        default=16,
        metadata={
            "help": "sequences in an SFT optimizer step (global), for stage 0, stage 1 and DAgger's rounds",
            "affects": ("base_agent", "sft", "dagger"),
        },
    )
    sft_lr: float = field(default=2e-3, metadata={"help": "stage 1's learning rate", "affects": ("sft",)})
    sft_warmup_steps: int = field(
        default=30, metadata={"help": "stage 1's learning-rate warm-up steps", "affects": ("sft",)}
    )
    sft_inquiry_share: float = field(
        default=1.0, metadata={"help": "the share of inquiry steps full SFT keeps (sft_full)", "affects": ("sft",)}
    )
    sft_inquiry_oversample: int = field(
        default=4,
        metadata={
            "help": "repeats of each inquiry step in SFT data (stage 1 and DAgger's expert data)",
            "affects": ("sft", "dagger"),
        },
    )
    # 0 uses the benchmark's training split, whose values stage 0 has already seen several times; fresh tasks
    # keep SFT from lowering its loss by recalling a value stage 0 memorised (docs/lab/base_agent.md)
    sft_tasks: int = field(
        default=0,
        metadata={
            "help": "stage 1's own tasks (and DAgger's expert data, its control's and its roll-outs'): N > 0 every "
            "step of N fresh tasks (`data.benchmark.sft_split`); 0 the training split",
            "affects": ("data", "sft", "dagger"),
        },
    )
    # they keep the drilled agent's Back through stage 1 (docs/lab/base_agent.md)
    sft_recovery_tasks: int = field(
        default=0,
        metadata={
            "help": "stage 1's (and DAgger's expert data's) recovery drill: the steps after the mistake of this many "
            "fresh tasks (`data.benchmark.recovery_drill`, inquiries included) join its expert steps",
            "affects": ("data", "sft", "dagger"),
        },
    )
    weak_inquiry_share: float = field(
        default=0.15,
        metadata={
            "help": "the share of inquiry steps weak SFT keeps (sft_weak, the weak inquirer GRPO starts from)",
            "affects": ("sft",),
        },
    )
    sft_save_steps: int = field(
        default=200,
        metadata={"help": "stage 1 keeps a checkpoint every this many steps (to resume from)", "affects": ("run",)},
    )
    # The batch of an optimizer step (sft_batch sequences; GRPO prompts x generations) is the global one,
    # split over processes and then over this many micro-batches, so a forward pass holds
    # global / (processes x accumulation) sequences
    sft_grad_accum: int = field(
        default=1,
        metadata={
            "help": "gradient accumulation of SFT (stages 0, 1, DAgger): micro-batches per process",
            "affects": ("run",),
        },
    )
    grpo_grad_accum: int = field(
        default=1, metadata={"help": "gradient accumulation of stage 2: micro-batches per process", "affects": ("run",)}
    )
    task_grad_accum: int = field(
        default=1, metadata={"help": "gradient accumulation of stage 3: micro-batches per process", "affects": ("run",)}
    )
    # --- stage 1b: DAgger rounds from full SFT (roll out, label visited states with the expert, continue SFT) ---
    dagger_rounds: int = field(default=2, metadata={"help": "DAgger rounds from full SFT", "affects": ("dagger",)})
    dagger_tasks: int = field(
        default=64, metadata={"help": "training tasks rolled out per DAgger round", "affects": ("dagger",)}
    )
    dagger_steps: int = field(
        default=50, metadata={"help": "SFT steps per DAgger round on the aggregate", "affects": ("dagger",)}
    )
    dagger_beta: float = field(
        default=0.0,
        metadata={
            "help": "chance per turn that the expert acts instead during DAgger's roll-outs",
            "affects": ("dagger",),
        },
    )
    # 0: the plain union, where a few hundred states are a small share of each batch among the expert's steps;
    # a large share repeats each state until its values are recalled (docs/lab/log.md, DAgger)
    dagger_mix: float = field(
        default=0.0,
        metadata={
            "help": "the share of a DAgger round's examples drawn from the labelled states (repeated to reach it)",
            "affects": ("dagger",),
        },
    )
    dagger_lr: float = field(default=5e-4, metadata={"help": "DAgger rounds' learning rate", "affects": ("dagger",)})
    # --- stage 2: action-level GRPO ---
    grpo_steps: int = field(default=150, metadata={"help": "stage 2's GRPO steps", "affects": ("grpo",)})
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
    grpo_detour_tasks: int = field(
        default=400,
        metadata={
            "help": "fresh training tasks played with a mistake for stage 2's states off the path",
            "affects": ("data", "grpo"),
        },
    )
    num_generations: int = field(
        default=8, metadata={"help": "completions per GRPO prompt (the group)", "affects": ("grpo",)}
    )
    grpo_lr: float = field(
        default=2e-4, metadata={"help": "the learning rate of stages 2 and 3", "affects": ("grpo", "task_grpo")}
    )
    beta: float = field(
        default=0.0,
        metadata={
            "help": "the KL term's weight in stages 2 and 3 (0: no reference model)",
            "affects": ("grpo", "task_grpo"),
        },
    )
    temperature: float = field(
        default=1.0,
        metadata={"help": "the sampling temperature of GRPO's completions", "affects": ("grpo", "task_grpo")},
    )
    # the ask-or-act decision is one forking token in the reasoning, the rest is near-deterministic
    top_entropy_quantile: float = field(
        default=1.0,
        metadata={
            "help": "train only on the completion tokens whose entropy is in this top quantile (1.0: all tokens)",
            "affects": ("grpo",),
        },
    )
    grpo_iterations: int = field(
        default=1,
        metadata={
            "help": "optimisation passes per generated batch (generation dominates on CPU)",
            "affects": ("grpo",),
        },
    )
    # dapo: over the batch's tokens; dr_grpo: by a constant, so long completions weigh no less
    loss_type: str = field(
        default="dapo",
        metadata={
            "help": "GRPOConfig's loss_type: how the token losses are averaged",
            "affects": ("grpo", "task_grpo"),
        },
    )
    # group: by each group's reward std, which magnifies a group that barely differs; none: mean-centred only
    scale_rewards: str = field(
        default="group",
        metadata={
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
    # --- stage 3: task-level GRPO ---
    task_grpo_steps: int = field(default=20, metadata={"help": "stage 3's GRPO steps", "affects": ("task_grpo",)})
    task_num_generations: int = field(
        default=4, metadata={"help": "episodes per task in a stage 3 group", "affects": ("task_grpo",)}
    )
    task_max_completion_length: int | None = field(
        default=None,
        metadata={
            "help": "stage 3's token budget of a whole episode, answers and tool results (TRL's max_completion_length "
            "there); unset: every turn at max_completion_length with its tool result",
            "affects": ("task_grpo",),
        },
    )
    max_episode_steps: int = field(
        default=15,
        metadata={
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
    # --- evaluation ---
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
    val_inquiry_steps: int = field(
        default=0,
        metadata={
            "help": "the step-level validation holds at least this many inquiry steps, topped up with probes "
            "(0: no probes)",
            "affects": ("data", "grpo"),
        },
    )
    # --- ablations: training budget of each variant, same for all ---
    ablation_sft_steps: int = field(
        default=60, metadata={"help": "SFT steps of each ablation variant", "affects": ("ablations",)}
    )
    ablation_grpo_steps: int = field(
        default=30, metadata={"help": "GRPO steps of each ablation variant", "affects": ("ablations",)}
    )
    ablation_seeds: int = field(
        default=1,
        metadata={"help": "training seeds per ablation variant (train_seed 0, 1, ...)", "affects": ("ablations",)},
    )
    # --- short runs: a stage trained here for a few steps from its start, beside its shipped full-budget result ---
    short_sft_steps: int = field(
        default=0,
        metadata={
            "help": "SFT steps of the short run `sft_full_short`, trained from the base agent beside the shipped sft_full "
            "(0: none)",
            "affects": ("run",),
        },
    )
    short_grpo_steps: int = field(
        default=0,
        metadata={
            "help": "GRPO steps of the short run `grpo_weak_short`, trained from the shipped sft_weak beside the "
            "shipped grpo_weak (0: none)",
            "affects": ("run",),
        },
    )
    export_png: bool = field(
        default=True, metadata={"help": "figures as PNG too (needs a Chrome), not only HTML", "affects": ("run",)}
    )
    cell_timeout_s: int | None = field(
        default=None,
        metadata={
            "help": "seconds one notebook cell may run before papermill stops it as hung (None: no limit)",
            "affects": ("run",),
        },
    )
    # set by `apply_overrides` only, so an internal `replace` (ablation variants) keeps sharing the run's base agent
    overrides: tuple = field(
        default=(),
        metadata={
            "help": "the overrides this profile was made with, sorted (key, value) pairs; recorded, never overridden",
            "affects": ("run",),
        },
    )

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)

    @property
    def train_split_tasks(self) -> int:
        """The training split's real size: `benchmark_tasks` less the test split."""
        return split_sizes(self.benchmark_tasks)["train"]

    @property
    def test_split_tasks(self) -> int:
        """The test split's real size (the held-out tasks that evaluations draw `eval_tasks` from)."""
        return split_sizes(self.benchmark_tasks)["test"]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def is_tiny(self) -> bool:
        return self.model.startswith("tiny:")


# the profiles, each a recipe file that names what it changes (`inquire_lib/recipes/<name>.yaml`, read at the end
# of this module by `load_recipes`), in the order `inquire profile` lists them
PROFILE_ORDER = ("smoke", "cpu", "gpu", "small", "quick")
PROFILES: dict[str, Profile] = {}
# what each profile can and cannot show (its recipe's `purpose`); the first line of every notebook's output says it
PURPOSES: dict[str, str] = {}
# the ablation variants (`ablations.VARIANTS`) of a profile that runs fewer than all of them (its
# recipe's `ablations`); the others are skipped with the reason
ABLATION_GRIDS: dict[str, tuple[str, ...]] = {}

# what `make run`, `inquire run` and every notebook's parameters cell use when no profile is named
DEFAULT_PROFILE = "quick"


def get_profile(name: str | Profile, **overrides) -> Profile:
    """Look a profile up by name; keyword overrides give a variant (e.g. for ablations)."""
    if isinstance(name, Profile):
        base = name
    else:
        if name not in PROFILES:
            raise KeyError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
        base = PROFILES[name]
    return base.replace(**overrides) if overrides else base


# ------------------------------------------------------------------------------------ field metadata
def fields_affecting(*kinds: str) -> tuple[str, ...]:
    """The Profile fields whose metadata's `affects` names any of `kinds` (words of AFFECTS), in the
    order the class declares them: what cache keys and records that name fields are built from."""
    unknown = sorted(set(kinds) - set(AFFECTS))
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; AFFECTS has {', '.join(AFFECTS)}")
    return tuple(f.name for f in dataclasses.fields(Profile) if set(f.metadata.get("affects", ())) & set(kinds))


def unclassified_fields(cls: type = Profile) -> list[str]:
    """'field: what is missing' for each field of `cls` without a one-line help or without an `affects`
    of AFFECTS's words; empty when every field is classified."""
    out = []
    for f in dataclasses.fields(cls):
        help_text, affects = f.metadata.get("help"), f.metadata.get("affects")
        if not isinstance(help_text, str) or not help_text.strip() or "\n" in help_text:
            out.append(f"{f.name}: no one-line help")
        if not isinstance(affects, tuple) or not affects or not set(affects) <= set(AFFECTS):
            out.append(f"{f.name}: affects {affects!r} is not a non-empty tuple of {', '.join(AFFECTS)}")
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING  # `name`: every profile sets it


def explain(profile: Profile) -> list[dict]:
    """Every field of `profile`: name, value, where the value came from ("override" when `--set` or
    OVERRIDES gave it, "profile" when the profile differs from the class default, else "default"),
    its one-line help and what it affects."""
    overridden = {k for k, _ in profile.overrides} | ({"overrides"} if profile.overrides else set())
    rows = []
    for f in dataclasses.fields(Profile):
        value = getattr(profile, f.name)
        source = (
            "override"
            if f.name in overridden
            else "default"
            if _default(f) is not dataclasses.MISSING and value == _default(f)
            else "profile"
        )
        rows.append(
            {
                "field": f.name,
                "value": value,
                "source": source,
                "help": f.metadata.get("help", "") + (f" ({DERIVED[f.name](profile)})" if f.name in DERIVED else ""),
                "affects": tuple(f.metadata.get("affects", ())),
            }
        )
    return rows


# ------------------------------------------------------------------------------------ overrides
# Fields an override may not touch: the name picks the profile, and `overrides` records the others.
_FIXED = ("name", "overrides")
# str fields that take one of a few words
CHOICES: dict[str, tuple[str, ...]] = {
    "train_values": TRAIN_VALUES,
    "user_answers": USER_ANSWERS,
    "tokenizer_digits": TOKENIZER_DIGITS,
    "tokenizer_slots": TOKENIZER_SLOTS,
    "eval_engine": ("hf", "openvino"),
    # TRL 1.16's GRPOConfig accepts these
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
}


def _choices(key: str) -> tuple[str, ...] | None:
    """The words a str field takes; `base_agent_from` takes a profile that trains its own stage 0 ("": this one)."""
    if key == "base_agent_from":
        return ("",) + tuple(n for n, p in PROFILES.items() if p.base_agent_steps > 0 and not p.base_agent_from)
    return CHOICES.get(key)


_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def overridable_fields() -> dict[str, str]:
    """Field name -> its declared type (as written in the class), for every overridable field."""
    return {f.name: str(f.type) for f in dataclasses.fields(Profile) if f.name not in _FIXED}


class OverrideError(ValueError):
    """An override names no profile field or has a value of the wrong type; the message is one line."""


def _unknown(key: str) -> OverrideError:
    valid = sorted(overridable_fields())
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return OverrideError(f"unknown profile field {key!r}{hint}; valid fields: {', '.join(valid)}")


def _optional(kind: str) -> tuple[str, bool]:
    """ "float | None" -> ("float", True); "float" -> ("float", False)."""
    base = kind.removesuffix(" | None")
    return base, base != kind


def _bad(key: str, kind: str, value: Any) -> OverrideError:
    return OverrideError(f"profile field {key!r} takes {kind}, got {value!r}")


def _item(key: str, inner: str, value: Any) -> Any:
    if inner == "str" and isinstance(value, str):
        return value
    if inner == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _bad(key, f"a list of {inner}", value)


def check_override(key: str, value: Any) -> Any:
    """Return `value` as the type of field `key` (an int is accepted for a float, a list for a
    tuple); raise OverrideError naming the key for an unknown field or an ill-typed value."""
    types = overridable_fields()
    if key not in types:
        raise _unknown(key)
    kind, optional = _optional(types[key])
    if optional and value is None:
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise _bad(key, "a bool", value)
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(key, "an int" + (" or None" if optional else ""), value)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(key, "a float" + (" or None" if optional else ""), value)
        return float(value)
    if kind == "str":
        choices = _choices(key)
        if choices is not None:
            if value not in choices:
                raise _bad(key, "one of " + ", ".join(choices), value)
            return value
        if not isinstance(value, str) or not value:
            raise _bad(key, "a non-empty str", value)
        return value
    if kind == "dict[str, float]":
        if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
            raise _bad(key, "a non-empty dict of str to float", value)
        return {k: _item(key, "float", v) for k, v in value.items()}
    if kind.startswith("tuple["):
        inner = kind[len("tuple[") :].split(",")[0].strip()
        if not isinstance(value, (list, tuple)) or not value:
            raise _bad(key, f"a non-empty list of {inner}", value)
        return tuple(_item(key, inner, v) for v in value)
    raise _bad(key, kind, value)  # a field type this checker does not know: refuse rather than guess


def _parse_text(key: str, text: str) -> Any:
    """A command-line value as the type of field `key`."""
    types = overridable_fields()
    if key not in types:
        raise _unknown(key)
    (kind, optional), raw = _optional(types[key]), text.strip()
    if optional and raw.lower() in ("none", "null", ""):
        return None
    try:
        if kind == "bool":
            if raw.lower() not in _BOOL_WORDS:
                raise ValueError
            return _BOOL_WORDS[raw.lower()]
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "dict[str, float]":  # format:1,action:1,inquiry:2
            pairs = [p.split(":", 1) for p in raw.split(",") if p.strip()]
            if not pairs or any(len(p) != 2 or not p[0].strip() for p in pairs):
                raise ValueError
            return {k.strip(): float(v) for k, v in pairs}
        if kind.startswith("tuple["):
            inner = kind[len("tuple[") :].split(",")[0].strip()
            parts = [p.strip() for p in raw.split(",") if p.strip()]
            return [float(p) for p in parts] if inner == "float" else parts
    except ValueError:
        pass
    else:
        return raw
    word = {
        "bool": "a bool (true/false)",
        "int": "an int",
        "float": "a float",
        "dict[str, float]": "name:value pairs (e.g. format:1,action:1,inquiry:2)",
    }.get(kind, kind)
    raise _bad(key, word + (" or none" if optional else ""), text)


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """`["grpo_lr=1e-4", "missed_penalty=2"]` -> {"grpo_lr": 0.0001, "missed_penalty": 2.0}, each
    value checked against its field; a repeated key keeps the last value."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise OverrideError(f"override {item!r} is not KEY=VALUE (e.g. grpo_lr=1e-4)")
        out[key] = check_override(key, _parse_text(key, text))
    return out


def check_overrides(overrides: dict | None) -> dict[str, Any]:
    """Every override checked (see `check_override`), sorted by key; None is no override."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise OverrideError(f"OVERRIDES must be a dict of profile fields, got {type(overrides).__name__}")
    return {k: check_override(str(k), overrides[k]) for k in sorted(overrides)}


def apply_overrides(profile: str | Profile, overrides: dict | None) -> Profile:
    """The profile with `overrides` applied (checked first) and recorded in its `overrides` field."""
    base = get_profile(profile)
    checked = check_overrides(overrides)
    if not checked:
        return base
    merged = dict(base.overrides)
    merged.update(checked)
    return base.replace(**checked, overrides=tuple(sorted(merged.items())))


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_fmt(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


# overrides that change how fast a run goes, not what it computes: they name no run of their own, so a stage
# given another thread count goes on in the run it belongs to
UNNAMED_OVERRIDES = ("torch_threads", "base_agent_threads")


def default_run_name(overrides: dict | None) -> str:
    """The run name when none is given: "default" without overrides (UNNAMED_OVERRIDES aside), else
    `key=value` pairs joined by "_" (sorted; characters other than letters, digits and `.,=+-` become "-"); a
    name longer than 80 characters is cut and ends in a hash of the full one, so two override sets never share it."""
    checked = {k: v for k, v in check_overrides(overrides).items() if k not in UNNAMED_OVERRIDES}
    if not checked:
        return "default"
    name = re.sub(r"[^A-Za-z0-9.,=+_-]", "-", "_".join(f"{k}={_fmt(v)}" for k, v in checked.items()))
    if len(name) > 80:
        digest = hashlib.sha1(json.dumps(checked, sort_keys=True, default=str).encode()).hexdigest()[:8]
        name = f"{name[:71]}-{digest}"
    return name


# ------------------------------------------------------------------------------------ recipes
RECIPES_DIR = Path(__file__).parent / "recipes"
# what a recipe says beside its fields: the profile it starts from, the fragments it takes in order, what it
# can show, and its ablation grid
RECIPE_KEYS = ("inherit", "with", "purpose", "ablations")


class RecipeError(ValueError):
    """A recipe file that cannot be read: the message is one line naming the file and the key."""


def _recipe_path(name: str, root: Path | None) -> Path:
    return (root or RECIPES_DIR) / f"{name}.yaml"


def read_recipe(name: str, root: Path | None = None) -> dict:
    """The mapping of `<root>/<name>.yaml` (default root: `RECIPES_DIR`): a profile's recipe or a fragment."""
    import yaml

    path = _recipe_path(name, root)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise RecipeError(f"{path}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of profile fields, got {type(data).__name__}")
    return data


def recipe_settings(name: str, root: Path | None = None, data: dict | None = None) -> dict[str, Any]:
    """The fields a recipe file sets (`data`, when already read), after the fragments it takes (`with`), each
    checked and typed as `--set` checks it (`check_override`): the recipe's own changes, not its parent's."""
    data = read_recipe(name, root) if data is None else data
    out: dict[str, Any] = {}
    for fragment in data.get("with", ()):
        out.update(recipe_settings(fragment, root))
    for key, value in data.items():
        if key in RECIPE_KEYS:
            continue
        try:
            out[key] = check_override(str(key), value)
        except OverrideError as exc:
            raise RecipeError(f"{_recipe_path(name, root)}: {exc}") from None
    return out


def load_recipe(name: str, root: Path | None = None, data: dict | None = None) -> Profile:
    """The profile a recipe resolves to: the profile it inherits (already in `PROFILES`) or the class defaults,
    with the recipe's settings (`recipe_settings`) and its name."""
    data = read_recipe(name, root) if data is None else data
    parent = data.get("inherit")
    if parent is not None and parent not in PROFILES:
        raise RecipeError(f"{_recipe_path(name, root)}: inherit: {parent!r} is not a profile read before it")
    base = PROFILES[parent] if parent is not None else Profile(name=name)
    return base.replace(name=name, **recipe_settings(name, root, data))


def load_recipes(root: Path | None = None) -> None:
    """Read every profile of `PROFILE_ORDER` into `PROFILES`, with its purpose and ablation grid; each file once."""
    for name in PROFILE_ORDER:
        data = read_recipe(name, root)
        PROFILES[name] = load_recipe(name, root, data)
        PURPOSES[name] = " ".join(str(data.get("purpose", "")).split())
        if "ablations" in data:
            ABLATION_GRIDS[name] = tuple(data["ablations"])


load_recipes()
# the fragments callers name: stage 2's findings and the two curricula of stage 0
GRPO_FINDINGS = recipe_settings("grpo_findings")
CPU_BASE_AGENT_CURRICULUM = recipe_settings("cpu_base_agent_curriculum")
SMALL_BASE_AGENT_CURRICULUM = recipe_settings("small_base_agent_curriculum")
