"""Profiles: one code path from a laptop to a GPU.

A profile is a frozen dataclass of sizes and model choices. Notebooks take `PROFILE` (a name) as
their only papermill parameter of substance; everything else is looked up here, so `smoke` (CI),
`cpu` (the default main job) and `gpu` (a real checkpoint) run the very same code.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    name: str
    seed: int = 0  # data, base agent and training seed
    train_seed: int | None = None  # set to vary only the training run (ablation seeds)
    # --- data: generated InquireBench ---
    train_tasks: int = 400
    test_tasks: int = 120
    val_tasks: int = 80  # validation: chooses among GRPO checkpoints, so the test split never does
    # --- model ---
    model: str = "tiny:cpu"  # "tiny:<size>" builds offline; anything else is a hub id or local path
    load_in_4bit: bool = False
    bf16: bool = False
    gradient_checkpointing: bool = False
    torch_threads: int = 1  # 2 threads on 2 busy cores thrash (see FINDINGS); 1 is steadier (CI)
    # a profile that needs CUDA refuses to start without it (a 3B model in fp32 on CPU runs for days);
    # INQUIRE_ALLOW_CPU=1 lets a test run its configs with the tiny model standing in
    requires_cuda: bool = False
    # image bounds handed to the processor (pixels); a 360x720 screen becomes 112x224 = 32 tokens
    min_pixels: int = 28 * 28 * 4
    max_pixels: int = 28 * 28 * 36
    # --- prompt ---
    use_a11y: bool = True  # the accessibility list in the prompt (ablation switch)
    a11y_coords: bool = True  # element centres in the list (a tiny model reads the slot id instead)
    use_think: bool = True  # pre-action reasoning before the tool call (ablation switch)
    use_prev_screenshot: bool = True
    # --- LoRA ---
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    # --- stage 0: a base agent that acts but never asks (the analogue of a pretrained GUI model);
    # trained once by `training.sft.base_agent` and cached; 0 steps means the checkpoint is the base ---
    base_agent_steps: int = 0
    base_agent_lr: float = 2e-3
    # --- stage 1: SFT ---
    sft_steps: int = 600
    sft_batch: int = 16
    sft_lr: float = 2e-3
    sft_warmup_steps: int = 30
    sft_inquiry_fraction: float = 1.0
    sft_inquiry_oversample: int = 4  # repeats of each inquiry step in SFT data
    weak_inquiry_fraction: float = 0.15  # the weak inquirer that GRPO starts from
    sft_save_steps: int = 200
    # gradient accumulation per stage: the batch of an optimizer step (sft_batch sequences; GRPO
    # prompts x generations) is the global one, split over processes and then over this many
    # micro-batches, so a forward pass holds global / (processes x accumulation) sequences
    sft_grad_accum: int = 1
    grpo_grad_accum: int = 1
    task_grad_accum: int = 1
    # --- stage 2: action-level GRPO ---
    grpo_steps: int = 150
    grpo_prompts_per_step: int = 4
    grpo_inquiry_share: float = 0.3  # of GRPO prompts that need an inquiry (and again that follow one)
    num_generations: int = 8
    grpo_lr: float = 2e-4
    beta: float = 0.0
    temperature: float = 1.0
    # train only on the completion tokens whose entropy is in the top quantile (1.0 = all tokens):
    # the ask-or-act decision is one forking token in the reasoning, the rest is near-deterministic
    top_entropy_quantile: float = 1.0
    grpo_iterations: int = 1  # optimisation passes per generated batch (generation dominates on CPU)
    # keep a checkpoint every this many steps for validation to choose from (0: a third of the run, last two kept)
    grpo_save_steps: int = 0
    # the chosen checkpoint: the highest validation step ISR whose needless-inquiry rate is at most
    # `select_max_needless` and whose safe-step accuracy is at most `select_max_safe_drop` below the start's
    select_max_needless: float = 0.10
    select_max_safe_drop: float = 0.02
    max_completion_length: int = 96
    # generation in GRPO through vLLM (TRL's use_vllm): "colocate" shares the training GPUs,
    # "server" talks to `trl vllm-serve` on GPUs of its own
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.3
    missed_penalty: float = 0.5
    needless_penalty: float = 0.5
    # weight of each action-level reward, by the reward's name (`agent.rewards.REWARDS`)
    reward_weights: dict[str, float] = field(default_factory=lambda: {"format": 1.0, "action": 1.0, "inquiry": 1.0})
    # --- stage 3: task-level GRPO ---
    task_grpo_steps: int = 20
    task_num_generations: int = 4
    max_episode_steps: int = 15
    # --- evaluation ---
    eval_batch: int = 32
    eval_max_new_tokens: int = 96
    eval_repetition_penalty: float = 1.0  # explicit: a hub checkpoint ships its own (Qwen: 1.05)
    eval_tasks: int = 120
    # --- ablations (notebook 07): training budget of each variant, same for all ---
    ablation_sft_steps: int = 60
    ablation_grpo_steps: int = 30
    export_png: bool = True  # figures as PNG too (needs a Chrome), not only HTML
    # seconds one notebook cell may run before papermill stops it as hung (None: no limit)
    cell_timeout_s: int | None = None

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def is_tiny(self) -> bool:
        return self.model.startswith("tiny:")


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", train_tasks=24, test_tasks=12, model="tiny:smoke", load_in_4bit=True, a11y_coords=False,
        sft_steps=6, sft_batch=4, sft_save_steps=3, sft_warmup_steps=1, base_agent_steps=4,
        grpo_steps=2, grpo_save_steps=1, val_tasks=4, grpo_prompts_per_step=2, num_generations=4, max_completion_length=48, top_entropy_quantile=0.2,
        task_grpo_steps=1, task_num_generations=2, max_episode_steps=8,
        eval_batch=16, eval_max_new_tokens=48, eval_tasks=8, lora_r=8, lora_alpha=16, export_png=False,
        ablation_sft_steps=2, ablation_grpo_steps=1, cell_timeout_s=900,
    ),
    # full training of the tiny model (LoRA on random weights learns little); one screenshot keeps
    # sequences short on 2 cores
    "cpu": Profile(name="cpu", lora=False, use_prev_screenshot=False, a11y_coords=False, train_tasks=2000,
                   test_tasks=120, base_agent_steps=400, sft_steps=150, sft_lr=1e-3, sft_warmup_steps=10,
                   grpo_steps=200, grpo_save_steps=25, grpo_prompts_per_step=4, num_generations=8, grpo_lr=1e-4, beta=0.04,
                   top_entropy_quantile=0.2, missed_penalty=2.0, needless_penalty=1.0,
                   task_grpo_steps=10, torch_threads=1, ablation_sft_steps=40, ablation_grpo_steps=20,
                   eval_batch=64, eval_tasks=80),
    # Qwen2.5-VL-3B with 4-bit QLoRA on one GPU; the model is the hub id unless INQUIRE_MODEL or
    # `--set model=DIR` names a local copy. Batches are global (see the grad_accum fields): stage 1
    # runs 2 sequences a forward pass, stage 2 4 completions (~5k tokens), stage 3 one episode
    # (~13k tokens); docs/scaling.md has the arithmetic. GRPO keeps what the cpu runs showed:
    # penalties 2.0/1.0 (0.5/0.5 drowns the ask-or-act gap), the top-20% entropy mask, a KL term,
    # a checkpoint every 50 steps chosen on validation.
    "gpu": Profile(
        name="gpu", model="Qwen/Qwen2.5-VL-3B-Instruct", load_in_4bit=True, bf16=True, requires_cuda=True,
        gradient_checkpointing=True, torch_threads=8, min_pixels=28 * 28 * 64,
        max_pixels=28 * 28 * 512, train_tasks=2000, test_tasks=300, sft_steps=1000, sft_batch=8, sft_grad_accum=4,
        sft_lr=1e-4, grpo_lr=1e-5, grpo_steps=300, grpo_save_steps=50, grpo_grad_accum=8, task_grad_accum=16,
        max_completion_length=256, beta=0.04, top_entropy_quantile=0.2, missed_penalty=2.0, needless_penalty=1.0,
        eval_batch=16, eval_max_new_tokens=256, eval_tasks=300, lora_r=64, lora_alpha=128,
    ),
}


def parse_sets(items) -> dict:
    """`key=value` strings (the command line's `--set`) -> typed overrides of Profile fields: the
    value is read as the field's type (bool: true/false/1/0; tuples: comma-separated)."""
    fields = {f.name: f for f in dataclasses.fields(Profile)}
    out: dict = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key not in fields:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of Profile's fields")
        default = getattr(PROFILES["cpu"], key)
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                value = raw.lower() in ("true", "1")
            elif isinstance(default, dict):  # name:value,name:value
                value = {k.strip(): float(v) for k, _, v in (kv.partition(":") for kv in raw.split(",") if kv)}
            elif isinstance(default, tuple):
                kind = type(default[0]) if default else str
                value = tuple(kind(v) for v in raw.split(",") if v)
            elif key == "train_seed":
                value = None if raw.lower() == "none" else int(raw)
            else:
                value = type(default)(raw)
        except ValueError:
            raise ValueError(f"--set {item!r}: {raw!r} is not a {type(default).__name__}") from None
        out[key] = value
    return out


def get_profile(name: str | Profile, **overrides) -> Profile:
    """Look a profile up by name; keyword overrides give a variant (e.g. for ablations)."""
    if isinstance(name, Profile):
        base = name
    else:
        if name not in PROFILES:
            raise KeyError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
        base = PROFILES[name]
    return base.replace(**overrides) if overrides else base
