"""What every stage's settings share: the data's (generated InquireBench, its splits and probe sets, the seed behind
them), the model's (which model, its numerics and threads, what its prompt shows, its LoRA adapters), and the two
with the profile's name (`StageSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .run import Named

# how training tasks draw slot values and phrasings (`world.values`): "fixed" (the train pools and the
# template's sentence) or "procedural" (open-ended composed values and composed phrasings)
TRAIN_VALUES = ("fixed", "procedural")

# the share of generated tasks that form the test split; the rest is the training split
TEST_FRACTION = 0.2


def split_sizes(n_tasks: int) -> dict[str, int]:
    """The real sizes of the training and test splits of `n_tasks` generated tasks."""
    n_test = max(1, round(n_tasks * TEST_FRACTION))
    return {"train": n_tasks - n_test, "test": n_test}


@dataclass(frozen=True)
class DataSettings:
    """Which tasks the training, validation and test splits hold (`data.benchmark`)."""

    seed: int = field(
        default=0,
        metadata={
            "help": "the seed of the data, the tiny model, the base agent and every training run",
            "affects": ("data", "tokenizer", "base_agent", "checkpoints", "eval"),
        },
    )
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
    val_inquiry_steps: int = field(
        default=0,
        metadata={
            "help": "the step-level validation holds at least this many inquiry steps, topped up with probes "
            "(0: no probes)",
            "affects": ("data", "grpo"),
        },
    )
    # --- the drills' and later stages' own data (stage 0, stage 1, stage 2) ---
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
    # with one, a policy that learned Back still ends the task on its second detour (docs/lab/base_agent.md)
    recovery_drill_slips: int = field(
        default=1,
        metadata={
            "help": "at most this many mistakes in a row at the recovery drill's step, each undone by Back",
            "affects": ("data", "base_agent"),
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
    grpo_detour_tasks: int = field(
        default=400,
        metadata={
            "help": "fresh training tasks played with a mistake for stage 2's states off the path",
            "affects": ("data", "grpo"),
        },
    )

    @property
    def train_split_tasks(self) -> int:
        """The training split's real size: `benchmark_tasks` less the test split."""
        return split_sizes(self.benchmark_tasks)["train"]

    @property
    def test_split_tasks(self) -> int:
        """The test split's real size (the held-out tasks that evaluations draw `eval_tasks` from)."""
        return split_sizes(self.benchmark_tasks)["test"]


TOKENIZER_DIGITS = ("merged", "split")
TOKENIZER_SLOTS = ("apart", "joined")


@dataclass(frozen=True)
class ModelSettings:
    """The model every stage trains, how it reads a screen, and the adapters later stages put on it."""

    train_seed: int | None = field(
        default=None,
        metadata={
            "help": "set to vary only the training runs (ablation and GRPO seeds); None: `seed`",
            "affects": ("checkpoints",),
        },
    )
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

    @property
    def is_tiny(self) -> bool:
        return self.model.startswith("tiny:")


@dataclass(frozen=True)
class StageSettings(ModelSettings, DataSettings, Named):
    """The name (which names a run's folders), the model and the data: what every stage and evaluation reads."""
