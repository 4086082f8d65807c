"""Write the numbered notebooks 02-07 from the cell lists below (outputs empty, as kept in git).

Run `python tools/build_notebooks.py` after editing; notebooks hold narrative and calls into
`inquire_lib`, never logic of their own.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str, tags=()):
    cell = nbformat.v4.new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def params(**values):
    return code("\n".join(f"{k} = {v!r}" for k, v in values.items()), tags=["parameters"])


SETUP = """
import time
from IPython.display import display
from inquire_lib import pipeline
from inquire_lib.viz import plots
from inquire_lib.evaluation.steps import headline, test_records
profile = pipeline.profile_of(PROFILE, SEED)
started = time.time()
print(profile.name, profile.model, "| lora:", profile.lora, "| 4-bit:", profile.load_in_4bit)
"""

NOTEBOOKS = {
    "02_sft_qlora": [
        md("""
# 02 · Stage 1: supervised fine-tuning (format / cold start) with (Q)LoRA

This notebook teaches the first stage of both recipes: supervised fine-tuning on the expert's
trajectories, so that the agent learns the output format (pre-action reasoning ending in an
*inquiry check*, then one `mobile_use` tool call) and when to `call_user`.

- On the `gpu` profile the base is a real Qwen2.5-VL checkpoint trained with 4-bit QLoRA.
- On `cpu` the base is a *base agent*: a tiny Qwen2.5-VL built offline and trained once (cached) on
  every expert step **except** the inquiries, so that it acts but never asks, like a pretrained GUI
  model before the inquiry recipe. `smoke` runs the same code with QLoRA on a 4-bit tiny model.

We train two checkpoints: **sft_full** (all inquiry examples) and **sft_weak** (only a small fraction
of them, a weak inquirer that GRPO starts from in notebook 03), and evaluate both on the held-out
test split against the untrained model and reference policies.
"""),
        params(PROFILE="cpu", SEED=0),
        md("## Set-up\nThe profile fixes every size; nothing else in this notebook changes between CPU and GPU."),
        code(SETUP),
        md("""
## The base agent (stage 0)
Trained once per profile and cached under `.cache/models/`: its cost is paid on the first run only.
On the `gpu` profile this is the pretrained checkpoint itself.
"""),
        code("""
from inquire_lib.training.train import base_agent
t0 = time.time()
base_path = base_agent(profile)
print("base agent:", base_path, f"({time.time() - t0:.0f} s)")
"""),
        md("""
## Stage 1a: full SFT
Completion-only cross-entropy on prompt/completion records with the screenshot; every inquiry step kept.
"""),
        code("""
from inquire_lib.training.train import sft
full = sft(profile, name="sft_full", inquiry_fraction=1.0)
print(f"sft_full: {full.n_examples} examples, {full.seconds:.0f} s -> {full.path}")
fig = plots.log_curve(full.log_history, ["loss", "mean_token_accuracy"], "sft_full: training loss")
pipeline.save_fig(fig, profile, "02_sft_full_loss"); fig
"""),
        md("""
## Stage 1b: weak SFT
The same recipe keeping only `profile.weak_inquiry_fraction` of the inquiry steps: a model that knows
`call_user` but rarely uses it, InquireMobile's starting point for its GRPO-only comparison. GRPO can
only reinforce what a group samples, so it must still ask sometimes.
"""),
        code("""
weak = sft(profile, name="sft_weak", inquiry_fraction=profile.weak_inquiry_fraction)
print(f"sft_weak: {weak.n_examples} examples, {weak.seconds:.0f} s -> {weak.path}")
fig = plots.log_curve(weak.log_history, ["loss", "mean_token_accuracy"], "sft_weak: training loss")
pipeline.save_fig(fig, profile, "02_sft_weak_loss"); fig
"""),
        md("""
## Step-level evaluation on the held-out test split
Each gold step is one query; greedy decoding, batched with left padding. Reference policies are
scored by the very same code: the expert, *always-act* (the expert, acting where it should ask),
*always-ask* and *random*. Every number comes with a Wilson 95% interval.
"""),
        code("""
records = test_records(profile)
print(len(records), "test steps from", len({r['task_id'] for r in records}), "tasks")
results = pipeline.evaluate_references(profile, records)
for name in ["untrained", "base_agent", "sft_weak", "sft_full"]:
    if name == "base_agent" and profile.base_agent_steps <= 0:
        continue
    m = pipeline.evaluate_checkpoint(profile, name, records)
    print(f"{name}: {m['generate_seconds']:.0f} s to generate")
    results.append(m)
table = plots.metrics_table(pipeline.load_metrics(profile))
table
"""),
        md("## The headline numbers, side by side"),
        code("""
ms = pipeline.load_metrics(profile)
fig = plots.metrics_bars(ms)
pipeline.save_fig(fig, profile, "02_step_metrics"); fig
"""),
        md("""
## Which action types get confused?
Rows are the gold type, columns the predicted one. A weak inquirer shows `call_user` rows leaking
into `click`; a needless asker shows `click` rows leaking into `call_user`.
"""),
        code("""
for name in ["sft_weak", "sft_full"]:
    fig = plots.type_confusion(pipeline.load_predictions(profile, name), f"{name}: action types")
    pipeline.save_fig(fig, profile, f"02_confusion_{name}")
    display(fig)
"""),
        md("## Inquiry per category: asking where it must (recall) and not where it need not (needless rate)"),
        code("""
ms = pipeline.load_metrics(profile, names=["base_agent", "sft_weak", "sft_full"])
fig = plots.category_bars(ms, "inquiry_recall", "step ISR (inquiry recall) per category")
pipeline.save_fig(fig, profile, "02_isr_by_category"); display(fig)
fig = plots.category_bars(ms, "needless_rate", "needless-inquiry rate per category")
pipeline.save_fig(fig, profile, "02_needless_by_category"); display(fig)
"""),
        md("## Record what this notebook measured\nThe metrics JSON is what CI reads back and asserts."),
        code("""
summary = {m["checkpoint"]: m["overall"] for m in pipeline.load_metrics(profile)}
pipeline.write_notebook_metrics(profile, "02_sft", {
    "minutes": (time.time() - started) / 60, "sft_full_seconds": full.seconds, "sft_weak_seconds": weak.seconds,
    "n_full": full.n_examples, "n_weak": weak.n_examples, "overall": summary})
print(f"notebook minutes: {(time.time() - started) / 60:.1f}")
"""),
    ],
    "03_grpo_action_level": [
        md("""
# 03 · Stage 2: action-level GRPO with verifiable inquiry rewards

GRPO samples a group of completions per prompt and moves the policy toward the better ones in the
group (group-normalised advantages). The rewards are verifiable and pure (`inquire_lib.agent.rewards`):
- **format**: +1 for one `<think>` then one valid `<tool_call>`, else -1;
- **action**: +1 for the right type, up to +1 more for the right argument (click inside the gold box);
- **inquiry**: a penalty for a missed inquiry and one for a needless inquiry (both 0 gives the papers' reward).

InquireMobile's comparison in miniature: starting from the **weak inquirer** (notebook 02), does GRPO
raise step ISR without making the agent ask everywhere? And what does GRPO change from full SFT?

Three settings decide whether it works (all in the profile, printed below):
- **the reward scale of the inquiry decision**: at an inquiry step, acting with a clean format still
  earns +1 (format); with a missed-inquiry penalty of 0.5 that gap is drowned by the format noise of
  sampled completions, so the cpu profile uses 2.0 for a missed and 1.0 for a needless inquiry;
- **the learning rate**: full-weight updates of the tiny model drift to never asking above ~1e-4;
- **which tokens learn** (`top_entropy_quantile`): only the most uncertain 20% of completion tokens
  carry the loss, so the fork "Inquiry check: needed / not needed" learns and the format is left alone.

A run of the tiny model wanders (ISR rises, stalls, falls; safe-step accuracy drifts), so a checkpoint
is kept every `grpo_save_steps` steps and the **validation split** (tasks drawn like the test split's,
never the test split itself) chooses one: the highest step ISR that keeps needless inquiries at most
`select_max_needless` and safe-step accuracy at most `select_max_safe_drop` below the start's.
A finished run with the same settings is reused; delete `artifacts/<profile>/grpo_*` to train again.
"""),
        params(PROFILE="cpu", SEED=0),
        md("## Set-up"),
        code(SETUP),
        code("""
from inquire_lib.training.train import GRPO_SETTINGS, grpo
grpo_settings = {k: getattr(profile, k) for k in GRPO_SETTINGS}
grpo_settings
"""),
        md("""
## GRPO from the weak inquirer
Watch `frac_reward_zero_std`: a group whose completions all score the same gives no gradient.
"""),
        code("""
weak = grpo(profile, start=pipeline.checkpoint_path(profile, "sft_weak"), name="grpo_weak", reuse=True)
print(f"grpo_weak: {weak.seconds:.0f} s -> {weak.path}")
fig = plots.grpo_curves(weak.log_history, "GRPO from sft_weak")
pipeline.save_fig(fig, profile, "03_grpo_weak_curves"); fig
"""),
        md("""
## Which checkpoint: the validation split chooses
Every kept checkpoint (and the start, step 0) evaluated greedily on the validation split.
"""),
        code("""
weak_selection = pipeline.select_checkpoint(profile, "grpo_weak", "sft_weak")
print("chosen step:", weak_selection["selected_step"], "constraints met:", weak_selection["constraints_met"])
fig = plots.selection_curve(weak_selection, "grpo_weak: validation metrics of the kept checkpoints")
pipeline.save_fig(fig, profile, "03_grpo_weak_selection"); fig
"""),
        md("## A few sampled completions of the last step, with their rewards"),
        code("plots.samples_table(weak.samples or [])"),
        md("## GRPO from full SFT"),
        code("""
full = grpo(profile, start=pipeline.checkpoint_path(profile, "sft_full"), name="grpo_full", reuse=True)
print(f"grpo_full: {full.seconds:.0f} s -> {full.path}")
fig = plots.grpo_curves(full.log_history, "GRPO from sft_full")
pipeline.save_fig(fig, profile, "03_grpo_full_curves"); fig
"""),
        code("""
full_selection = pipeline.select_checkpoint(profile, "grpo_full", "sft_full")
print("chosen step:", full_selection["selected_step"], "constraints met:", full_selection["constraints_met"])
fig = plots.selection_curve(full_selection, "grpo_full: validation metrics of the kept checkpoints")
pipeline.save_fig(fig, profile, "03_grpo_full_selection"); fig
"""),
        md("## Step-level evaluation after GRPO, beside after SFT"),
        code("""
records = test_records(profile)
for name in ["grpo_weak", "grpo_full"]:
    pipeline.evaluate_checkpoint(profile, name, records)
stages = ["sft_weak", "grpo_weak", "sft_full", "grpo_full"]
ms = pipeline.load_metrics(profile, names=stages)
plots.metrics_table(ms)
"""),
        code("""
fig = plots.metrics_bars(ms, title="weak SFT, weak SFT + GRPO, full SFT, full SFT + GRPO")
pipeline.save_fig(fig, profile, "03_stages"); display(fig)
fig = plots.category_bars(ms, "inquiry_recall", "step ISR per category, before and after GRPO")
pipeline.save_fig(fig, profile, "03_isr_by_category"); display(fig)
"""),
        md("## The table of stages, written for CI and for the record"),
        code("""
summary = {m["checkpoint"]: m["overall"] for m in ms}
change = lambda before, after: {k: (summary[after][k]["value"] or 0) - (summary[before][k]["value"] or 0)
                                for k in ["inquiry_recall", "needless_rate", "safe_step_accuracy", "step_accuracy"]}
gain, full_change = change("sft_weak", "grpo_weak"), change("sft_full", "grpo_full")
print("change from sft_weak to grpo_weak:", {k: round(v, 3) for k, v in gain.items()})
print("change from sft_full to grpo_full:", {k: round(v, 3) for k, v in full_change.items()})
pipeline.write_notebook_metrics(profile, "03_grpo_action", {
    "minutes": (time.time() - started) / 60, "stages": summary, "weak_gain": gain, "full_change": full_change,
    "grpo_config": grpo_settings, "selected_step": {"grpo_weak": weak_selection["selected_step"],
                                                   "grpo_full": full_selection["selected_step"]},
    "constraints_met": {"grpo_weak": weak_selection["constraints_met"], "grpo_full": full_selection["constraints_met"]},
    "grpo_weak_seconds": weak.seconds, "grpo_full_seconds": full.seconds,
    "frac_reward_zero_std_weak": [h.get("frac_reward_zero_std") for h in weak.log_history if "frac_reward_zero_std" in h]})
"""),
    ],
    "04_grpo_task_level": [
        md("""
# 04 · Stage 3: multi-turn, task-level GRPO in PhoneEnv

Stages 1-2 score one step at a time against the expert's gold action. Mobile-R1's third stage lets
the agent **play whole tasks** in the environment and rewards the *outcome*: the agent sees a screen,
calls the `mobile_use` tool, the environment executes it and answers with the next screenshot (and,
after a `call_user`, the simulated user's reply), and so on until the agent terminates or runs out
of steps. Only an interactive episode lets the agent stray (a wrong click opens a detour screen),
notice it and come back: *exploration and self-correction*, which no gold-step dataset can teach.

- **Rollouts**: TRL's `GRPOTrainer(environment_factory=...)` runs the tool-calling loop itself;
  `inquire_lib.training.task_grpo.PhoneTaskEnv` wraps `PhoneEnv`. Tool results (screenshots, text) are masked
  out of the loss; only the agent's own tokens are trained.
- **Reward** (`inquire_lib.agent.task_rewards`), from the environment's final state: +1 success, +0.5 for
  asking where the task required it, -1 for any unsafe action, -0.25 per needless question (at most
  -1), plus the mean per-turn format score in [-1, 1].
- **Warm start**: a policy that rarely emits a valid tool call earns the same reward in every episode
  of a group, and GRPO learns nothing from a group without variance; so stage 3 starts from the
  action-level checkpoint (`grpo_full`), or from `sft_full` where stage 2 was not run.
- **Evaluation** is task level too, on held-out tasks: success rate (SR), inquiry success rate (ISR),
  needless-inquiry and unsafe-action rates, steps, detours and recoveries, with Wilson 95% intervals.
"""),
        params(PROFILE="cpu", SEED=0),
        md("## Set-up"),
        code(SETUP.replace("from inquire_lib import pipeline, plots", "from inquire_lib import online, pipeline, plots, train_task")),
        md("""
## Where stage 3 starts
The first of `grpo_full`, `sft_full` that exists (the untrained model otherwise, which will learn nothing).
"""),
        code("""
start_name, start = train_task.warm_start(profile)
print("warm start:", start_name, start)
print("episodes of at most", profile.max_episode_steps, "tool calls;", profile.task_num_generations,
      "episodes per task and", profile.grpo_prompts_per_step, "tasks per step; episode budget",
      train_task.episode_token_budget(profile), "tokens")
"""),
        md("""
## What the agent sees in an episode
The first turn is exactly the prompt of stages 1-2; every later turn is a tool result with the new
screenshot and the same text block (task, history with the user's replies, elements).
"""),
        code("""
train = train_task.task_dataset(profile, "train")
for role, text in train_task.preview_episode(profile, train[0], turns=2):
    print(f"[{role}]\\n{text}\\n")
"""),
        md("""
## Task-level GRPO
Each step plays `task_num_generations` episodes of each of `grpo_prompts_per_step` training tasks
with sampling, scores every episode, and updates the policy on the group-normalised advantages.
Every dot below is one episode (green: success); the line is the mean per step.
"""),
        code("""
result = train_task.grpo_task(profile, start, train=train)
print(f"grpo_task: {len(result.samples)} episodes, {result.seconds:.0f} s -> {result.path}")
fig = train_task.episode_reward_figure(result.samples)
pipeline.save_fig(fig, profile, "04_episode_reward"); display(fig)
fig = plots.log_curve(result.log_history, ["task/total", "task/success", "task/inquiry", "task/unsafe",
                                           "task/needless", "task/format", "frac_reward_zero_std"],
                      "task-level GRPO: reward components per step")
pipeline.save_fig(fig, profile, "04_reward_components"); fig
"""),
        md("""
## Task-level evaluation on held-out tasks
Greedy episodes on `eval_tasks` tasks of the test split (held-out slot values and phrasings), for
every stage that exists and the reference policies: the **expert** (100% by construction: a check on
the judge), **always-act** (acts where it should ask), **always-ask** and **random**. The mean reward
is the training reward of the same episodes.
"""),
        code("""
tasks = online.held_out_tasks(profile)
names = ["untrained", "sft_full", "grpo_full", "grpo_task"]
evaluated = online.evaluate_all_tasks(profile, names, tasks)
ms = online.load_task_metrics(profile, names=[m["checkpoint"] for m in evaluated])
online.task_table(ms)
"""),
        code("""
fig = online.task_bars(ms)
pipeline.save_fig(fig, profile, "04_task_metrics"); display(fig)
fig = plots.category_bars([m for m in ms if m["checkpoint"] in names], "success_rate", "task SR per category")
pipeline.save_fig(fig, profile, "04_sr_by_category"); fig
"""),
        md("""
## Step-level view of the new checkpoint
The same offline step queries as notebooks 02-03, so notebook 05 and the inspector (06) can put
`grpo_task` beside the earlier stages.
"""),
        code("""
step = pipeline.evaluate_checkpoint(profile, "grpo_task", test_records(profile))
headline(step)
"""),
        md("""
## Self-correction: episodes that strayed and came back
An episode *recovers* when the agent left the task's path (a wrong click opened a detour screen)
and later returned to it. Each thumbnail is one turn, framed in the colour of its outcome against
what the expert would have done in that state (green: right; blue: wrong target; purple: wrong
action type; orange: needless question; red: acted where it had to ask; grey: unreadable).
"""),
        code("""
model_names = [m["checkpoint"] for m in ms if m["checkpoint"] in names]
found = online.find_self_corrections(profile, model_names)
print(f"{len(found)} self-corrections among the episodes of {', '.join(model_names)}")
for i, episode in enumerate(found[:2]):
    fig = online.trajectory_strip(episode, online.eval_dir(profile))
    pipeline.save_fig(fig, profile, f"04_self_correction_{i}")
    display(fig)
"""),
        md("## Record what this notebook measured"),
        code("""
summary = {m["checkpoint"]: m["overall"] for m in ms}
pipeline.write_notebook_metrics(profile, "04_grpo_task", {
    "minutes": (time.time() - started) / 60, "start": start_name, "grpo_task_seconds": result.seconds,
    "episodes": len(result.samples), "task_level": summary, "self_corrections": len(found),
    "episode_rewards": [round(e["total"], 3) for e in result.samples]})
print(f"notebook minutes: {(time.time() - started) / 60:.1f}")
"""),
    ],
    "05_evaluate": [
        md("""
# 05 · Evaluation: every checkpoint of the run, side by side

Step level (offline): every gold step of the held-out test split is one query. This notebook reads
what the earlier notebooks saved (`papermill_runs/<profile>/metrics/step_*.json`), so it also works
on any past run, and evaluates any checkpoint found on disk that has no metrics yet.
"""),
        params(PROFILE="cpu", SEED=0),
        md("## Set-up"),
        code(SETUP),
        md("## Checkpoints found, and any missing evaluation"),
        code("""
names = pipeline.available_checkpoints(profile)
have = {m["checkpoint"] for m in pipeline.load_metrics(profile)}
records = test_records(profile)
for name in names:
    if name not in have:
        pipeline.evaluate_checkpoint(profile, name, records)
if not have & set(pipeline.REFERENCES):
    pipeline.evaluate_references(profile, records)
print(names)
"""),
        md("## One table, one plot"),
        code("""
ms = pipeline.load_metrics(profile)
display(plots.metrics_table(ms))
fig = plots.metrics_bars(ms, title="step level: all checkpoints and reference policies")
pipeline.save_fig(fig, profile, "05_step_all"); fig
"""),
        md("## Per sub-category inquiry recall of the last stage"),
        code("""
last = [m for m in ms if m["checkpoint"] in names][-1:]
fig = plots.category_bars(last, "inquiry_recall", f"{last[0]['checkpoint']}: step ISR per sub-category", level="by_subcategory")
pipeline.save_fig(fig, profile, "05_isr_by_subcategory"); fig
"""),
        md("""
## Task level (online, in PhoneEnv)
Whole held-out tasks played greedily for up to `max_episode_steps` tool calls, judged by the
environment's final state: success rate (SR: goal reached, nothing unsafe, every required question
asked), inquiry success rate (ISR), needless-inquiry and unsafe-action rates, mean steps.
Notebook 04 wrote these for its stages; any checkpoint without them is evaluated here.
"""),
        code("""
from inquire_lib.evaluation import episodes as online
tasks = online.held_out_tasks(profile)
have_task = {m["checkpoint"] for m in online.load_task_metrics(profile)}
for name in names:
    if name not in have_task:
        online.evaluate_checkpoint_tasks(profile, name, tasks)
if not have_task & set(pipeline.REFERENCES):
    online.evaluate_reference_tasks(profile, tasks)
tms = online.load_task_metrics(profile)
display(online.task_table(tms))
fig = online.task_bars(tms)
pipeline.save_fig(fig, profile, "05_task_all"); fig
"""),
        md("## Record the tables for CI and the record"),
        code("""
task_overall = {m["checkpoint"]: {k: v for k, v in m["overall"].items() if isinstance(v, dict)} for m in tms}
pipeline.write_notebook_metrics(profile, "05_evaluate", {
    "checkpoints": names, "step": {m["checkpoint"]: headline(m) for m in ms}, "task": task_overall})
"""),
    ],
    "06_inspect_trajectories": [
        md("""
# 06 · Inspecting trajectories: where the agent should have asked

Aggregate metrics say *how often* a checkpoint fails; this notebook shows *which* steps and *why*.
It teaches how to read a run's step predictions (`papermill_runs/<profile>/eval/`, written by
notebooks 02, 03 and 05) visually:

- the six step outcomes (correct, **missed inquiry**, needless inquiry, wrong type, wrong argument,
  unparseable) counted per checkpoint and per category;
- the **inspector**: the screenshot with the gold box and point (yellow), the predicted click or swipe
  (in the outcome's colour), an inquiry badge (was asking required, why, and what the model asked),
  the episode as a strip of thumbnails, and the model's raw output beside the gold action;
- two checkpoints **side by side** on the same step (weak SFT against GRPO from it, when both exist);
- a **shareable HTML report**: one self-contained file, readable offline in any browser.

Run it after notebook 02 at least; it trains nothing.
"""),
        params(PROFILE="cpu", SEED=0, RUN_ROOT="papermill_runs"),
        md("""
## Set-up: the latest run of this profile
`RUN_ROOT` is where the runs live (`papermill_runs/<profile>/` by default). Checkpoints are listed
in training order, then the reference policies (expert, always-act, always-ask, random).
"""),
        code("""
import time
from IPython.display import display
from inquire_lib import pipeline
from inquire_lib.runs import notebooks as runs
from inquire_lib.viz import overlays as viz
from inquire_lib.viz.inspector import Inspector, compare_pair, filter_steps, load_run
from inquire_lib.viz.report import write_report
profile = pipeline.profile_of(PROFILE, SEED)
started = time.time()
run = load_run(runs.run_dir(profile.name, RUN_ROOT))
print(f"{run.run_dir}: {len(run.preds)} step predictions; checkpoints: {', '.join(run.checkpoints)}")
"""),
        md("""
## Outcomes per checkpoint
Each test step gets exactly one outcome, checked in this order: **unparseable** (no valid action),
**missed inquiry** (asking was required, the model acted), **needless inquiry** (it asked where it
should have acted), **wrong type**, **wrong argument** (e.g. a click outside the gold box), else
**correct**. The reference policies fail by construction: *always-act* misses every inquiry,
*always-ask* asks needlessly everywhere else.
"""),
        code("""
counts = viz.outcome_table(run.preds, run.checkpoints)
counts
"""),
        md("""
## Failures per category, for the two checkpoints we compare
Weak SFT (`sft_weak`) and GRPO started from it (`grpo_weak`) when the run has both, else the two
latest trained checkpoints. Missed inquiries (red) are the failure this recipe targets; watch that
fixing them does not move the weight to needless inquiries (orange) on the `safe` controls.
"""),
        code("""
a, b = compare_pair(run.checkpoints)
print("comparing", a, "and", b)
for name in [n for n in (a, b) if n is not None]:
    preds = filter_steps(run.preds, checkpoint=name)
    display(viz.outcome_summary(preds))
    fig = viz.failure_bar(preds, title=f"{name}: failures per category")
    pipeline.save_fig(fig, profile, f"06_failures_{name}")
    display(fig)
"""),
        md("""
## The inspector
It opens on checkpoint A's **missed inquiries** when it has any (else on every step), with
checkpoint B on the same step beside it. Change the filters (category, sub-category, outcome), pick
an episode, move the step slider or press play; `frame` redraws the marks on the image as the model
saw it (its resized frame) instead of the screen's. Widgets need a live kernel: in a saved copy of
this notebook, use the figures below and the HTML report instead.
"""),
        code("""
inspector = Inspector(run, checkpoint=a, checkpoint_b=b)
inspector.show()
inspector.state
"""),
        md("""
## The step the inspector opened on, as static figures
`Inspector.figure_a` and `Inspector.strip` are ordinary plotly figures: save them, or draw any
prediction yourself with `viz.step_figure(pred, run.screenshot(pred))`.
"""),
        code("""
shown = inspector.current
if shown is not None:
    pipeline.save_fig(inspector.strip, profile, "06_episode")
    pipeline.save_fig(inspector.figure_a, profile, "06_step")
    display(inspector.strip, inspector.figure_a)
"""),
        md("""
## A shareable HTML report
One file per report under `figures/<profile>/`: plotly.js and the screenshots are embedded, so it
opens offline and can be mailed or attached to an issue. Buttons filter by outcome and checkpoint.
The same report comes from the command line: `inquire report papermill_runs/<profile> -o report.html`.
"""),
        code("""
fig_dir = pipeline.figures_dir(profile)
reports = {"all": write_report(run.run_dir, fig_dir / "report.html"),
           "failures": write_report(run.run_dir, fig_dir / "report_failures.html", failures_only=True)}
for kind, path in reports.items():
    print(f"{kind}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
"""),
        md("## Record what this notebook found\nOutcome counts per checkpoint, for CI and for the record."),
        code("""
pipeline.write_notebook_metrics(profile, "06_inspect", {
    "minutes": (time.time() - started) / 60, "run_dir": str(run.run_dir), "checkpoints": run.checkpoints,
    "outcomes": {name: {o: int(counts.loc[name, o]) for o in viz.OUTCOMES} for name in run.checkpoints},
    "n_steps": {name: int(counts.loc[name, "n"]) for name in run.checkpoints},
    "pair": [a, b], "inspector": inspector.state,
    "reports": {kind: str(path) for kind, path in reports.items()}}, out_root=RUN_ROOT)
print(f"notebook minutes: {(time.time() - started) / 60:.1f}")
"""),
    ],
    "07_ablations": [
        md("""
# 07 · Ablations: one switch at a time, several seeds, confidence intervals

Each ablation point is its own papermill run of `notebooks/ablations/ablation_point.ipynb` (a sweep),
so every point leaves an executed notebook behind and cannot leak state into the next. Variants of a
stage share one training budget (`profile.ablation_sft_steps`, `profile.ablation_grpo_steps`) and
differ from that stage's baseline in a single switch:
- `sft_no_a11y`: no accessibility list in the prompt: how much do the pixels alone carry?
- `sft_no_think`: no pre-action reasoning: does thinking before acting help the inquiry decision?
- `grpo_papers_reward`: GRPO from the weak inquirer without the missed / needless inquiry penalties.

Points can be repeated over training seeds (`TRAIN_SEEDS`, e.g. `[0, 1, 2]`; one by default to keep
the main job short); each number carries a Wilson 95% interval, and the spread over seeds is shown
beside it when there are several.
"""),
        params(PROFILE="cpu", SEED=0, TRAIN_SEEDS=[0], VARIANTS=["sft_baseline", "sft_no_a11y", "sft_no_think",
                                                                 "grpo_shaped", "grpo_papers_reward"]),
        md("## Set-up"),
        code(SETUP),
        md("## The sweep: one papermill run per (variant, seed)"),
        code("""
from inquire_lib.runs.notebooks import REPO_ROOT, sweep
grid = [{"SEED": SEED, "VARIANT": v, "TRAIN_SEED": s} for v in VARIANTS for s in TRAIN_SEEDS]
results = sweep(REPO_ROOT / "notebooks" / "ablations" / "ablation_point.ipynb", grid, profile.name, subdir="ablations")
failed = [r for r in results if r["status"] != "ok"]
assert not failed, failed
print(f"{len(results)} points, {sum(r['duration_s'] for r in results) / 60:.1f} min")
"""),
        md("## Per seed, with intervals; then mean and spread over seeds"),
        code("""
per_seed, agg = pipeline.ablation_summary(profile)
display(per_seed)
agg
"""),
        code("""
import plotly.graph_objects as go
fig = go.Figure()
for key in ["format", "step_accuracy", "inquiry_recall", "needless_rate"]:
    means = agg[(key, "mean")]
    fig.add_bar(name=key, x=list(means.index), y=list(means.values),
                error_y=dict(type="data", array=list(agg[(key, "std")].fillna(0).values)))
fig.update_layout(barmode="group", title="ablations: mean over training seeds (bars: std)", yaxis_range=[0, 1.05])
pipeline.save_fig(fig, profile, "07_ablations"); fig
"""),
        code("""
pipeline.write_notebook_metrics(profile, "07_ablations", {
    "points": [{k: v for k, v in r.items()} for r in results],
    "summary": {v: {k: float(agg.loc[v, (k, "mean")]) for k in ["format", "step_accuracy", "inquiry_recall", "needless_rate"]}
                for v in agg.index}})
"""),
    ],
}

SUB_NOTEBOOKS = {
    "ablations/ablation_point": [
        md("""
# One ablation point
Trains one variant of one stage with the profile's ablation budget and evaluates it on the test split
(`inquire_lib.pipeline.run_ablation`). Executed by notebook 07's sweep, one papermill run per point.
"""),
        params(PROFILE="smoke", SEED=0, VARIANT="sft_baseline", TRAIN_SEED=0),
        code("""
from inquire_lib import pipeline
from inquire_lib.evaluation.steps import headline
profile = pipeline.profile_of(PROFILE, SEED)
metrics = pipeline.run_ablation(profile, VARIANT, TRAIN_SEED)
headline(metrics)
"""),
    ],
}


def main() -> int:
    only = set(sys.argv[1:])
    for name, cells in {**NOTEBOOKS, **SUB_NOTEBOOKS}.items():
        if only and name not in only:
            continue
        nb = nbformat.v4.new_notebook(cells=cells)
        for i, cell in enumerate(nb.cells):  # stable ids: a rebuild changes only what was edited
            cell.id = hashlib.sha1(f"{name}:{i}:{cell.source}".encode()).hexdigest()[:8]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        nbformat.validate(nb)
        (NB_DIR / name).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, NB_DIR / f"{name}.ipynb")
        print("wrote", NB_DIR / f"{name}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main())
