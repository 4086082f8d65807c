"""Experiment tracking: TensorBoard event files inside each run, `<run_dir>/tensorboard/<stage>/`.

Training reaches it through TRL's `report_to=["tensorboard"]` (`trainer_tracking`); the run name,
the effective profile (text and hyperparameters) and the headline step metrics of every evaluated
checkpoint (`log_metrics`) are written beside. `make dashboard` serves every run of every profile.

Why TensorBoard rather than trackio or MLflow: TRL and transformers log to it with no server and no
account; its store is plain event files inside the run's folder, so it is copied, archived and
deleted with the run; `EventAccumulator` reads it back (the tests do); and it installs seven small
wheels without touching the pinned stack, where trackio 0.43 would downgrade pillow (13 -> 12.3)
and bring a web server, and MLflow a database layer (SQLAlchemy, alembic, Flask).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ..profiles import Named, Profile
from .paths import run_dir, run_name, to_json
from .records import headline

TRACKER = "tensorboard"
# the step metrics logged per checkpoint (values of `metrics["overall"]`)
HEADLINE = (
    "format",
    "type_accuracy",
    "step_accuracy",
    "click_in_bbox",
    "inquiry_recall",
    "needless_rate",
    "safe_step_accuracy",
)
# the task-level metrics logged per checkpoint
TASK_HEADLINE = ("success_rate", "isr", "needless_rate", "unsafe_rate")


def available() -> bool:
    """Whether the TensorBoard writer can be imported (tracking is skipped, not failed, without it)."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        return False
    return True


def log_dir(profile: Named | str, stage: str, out_root: str | os.PathLike | None = None) -> Path:
    """`<run_dir>/tensorboard/<stage>/`: one TensorBoard run per training stage or evaluation."""
    name = profile if isinstance(profile, str) else profile.name
    return run_dir(name, out_root) / "tensorboard" / stage


def _hparams(profile: Profile) -> dict:
    """The profile's fields as TensorBoard hyperparameters (numbers, bools and strings only)."""
    out = {"run": run_name()}
    for key, value in profile.to_dict().items():
        if isinstance(value, (bool, int, float, str)):
            out[key] = value
        elif value is None or isinstance(value, (list, tuple)):
            out[key] = json.dumps(to_json(value))
    return out


def log_profile(profile: Profile, stage: str, metrics: dict | None = None, out_root=None) -> Path | None:
    """Write the run name and effective profile (a JSON text and the hyperparameters view, with
    `metrics` as its scalars) into the stage's TensorBoard run; None when TensorBoard is missing."""
    if not available():
        return None
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    folder = log_dir(profile, stage, out_root)
    with contextlib.closing(SummaryWriter(log_dir=str(folder))) as writer:
        text = json.dumps({"run": run_name(), "stage": stage, "profile": to_json(profile.to_dict())}, indent=1)
        writer.add_text("profile", "    " + text.replace("\n", "\n    "))  # a code block in the text view
        exp, ssi, sei = hparams(_hparams(profile), {f"hparam/{k}": v for k, v in (metrics or {}).items()})
        for summary in (exp, ssi, sei):
            writer.file_writer.add_summary(summary)
        for key, value in (metrics or {}).items():
            writer.add_scalar(f"hparam/{key}", value, 0)
    return folder


@contextlib.contextmanager
def trainer_tracking(profile: Profile, stage: str | None):
    """Yield the `report_to`/`run_name` arguments of a trainer config. Construct the trainer inside:
    transformers' TensorBoard callback reads its folder (TENSORBOARD_LOGGING_DIR) when the trainer
    is built. `stage` None (the cached base agent, shared by runs) or no TensorBoard: no tracking."""
    if stage is None or not available():
        yield {"report_to": []}
        return
    folder = log_dir(profile, stage)
    variable = "TENSORBOARD_LOGGING_DIR"
    old = os.environ.get(variable)
    os.environ[variable] = str(folder)
    try:
        log_profile(profile, stage)
        yield {"report_to": [TRACKER], "run_name": f"{run_name()}/{stage}"}
    finally:
        if old is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = old


def use_tracking(config, tracking: dict):
    """Set a built trainer config's `report_to` (and `run_name`) from `trainer_tracking`'s arguments;
    returns the config. The config builders stay free of tracking (benchmarks build the same ones)."""
    config.report_to = list(tracking["report_to"])
    if tracking.get("run_name"):
        config.run_name = tracking["run_name"]
    return config


def log_metrics(profile: Profile, checkpoint: str, metrics: dict, kind: str = "step", out_root=None) -> Path | None:
    """Log a checkpoint's headline metrics as scalars `<kind>/<metric>` of TensorBoard run
    `eval_<checkpoint>`, with the profile as its hyperparameters; None when TensorBoard is missing."""
    values = headline(metrics, HEADLINE if kind == "step" else TASK_HEADLINE, text=False)
    return log_profile(profile, f"eval_{checkpoint}", {f"{kind}/{k}": v for k, v in values.items()}, out_root)


def read_scalars(folder: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of a TensorBoard run folder -> [(step, value)], read back from its event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def read_texts(folder: str | os.PathLike) -> dict[str, str]:
    """The text summaries of a TensorBoard run folder (tag -> last value), e.g. "profile" and TRL's "args"."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags().get("tensors", []):
        events = acc.Tensors(tag)
        if events and events[-1].tensor_proto.string_val:
            out[tag.split("/")[0]] = events[-1].tensor_proto.string_val[0].decode()
    return out
