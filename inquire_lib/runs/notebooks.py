"""Run manifests and papermill orchestration of the numbered notebooks.

`run_notebooks("smoke", name="a", overrides={"grpo_lr": 1e-4})` executes `notebooks/NN_*.ipynb`
in order with papermill, writes each executed copy to `papermill_runs/<profile>/<run>/<nb>.ipynb`
and one `manifest.json` per run beside them that says what ran, with which effective profile, on
which code and package versions, and how each notebook ended. A run is continued, never replaced:
re-running some of its notebooks updates their entries and marks the notebooks after them stale;
a run name already used with other overrides is refused. One process at a time runs a run: a second
`run_notebooks` on it stops at once while the first lives (`runs.locks`).
"""

from __future__ import annotations

import contextlib
import functools
import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable

from ..profiles import (
    apply_overrides,
    check_overrides,
    default_run_name,
    get_profile,
    ModelSettings,
    OverrideError,
    Profile,
)
from . import locks, timing
from .hardware import bf16_probe, cpu_has_native_bf16, device_stamp, uses_bf16
from .paths import (
    FOLDERS,
    NOTEBOOKS_DIR,
    REPO_ROOT,
    RUN_NAME,
    check_run_name,
    root,
    run_dir,
    run_name,
    to_json,
    write_json_atomic,
    write_text_atomic,
)

NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"
MANIFEST_NAME = "manifest.json"
# Recorded in every manifest; a missing package is recorded as None rather than failing the run.
TRACKED_PACKAGES = (
    "torch",
    "torchvision",
    "transformers",
    "trl",
    "peft",
    "bitsandbytes",
    "accelerate",
    "datasets",
    "tokenizers",
    "papermill",
    "plotly",
    "ipywidgets",
)
# Cells that papermill adds to an executed copy and that are not in the source notebook.
_PAPERMILL_TAGS = {"injected-parameters", "papermill-error-cell-tag"}

# Executed notebooks keep no widget state: each plotly FigureWidget of the inspector carries plotly.js
# in its state (about 5 MB, three of them in the inspection notebook) and a live widget needs a kernel anyway.
# Every figure is also stored as a static image (`pipeline.show_fig`), which is what a notebook
# opened without a kernel shows.
STORE_WIDGET_STATE = False


@functools.lru_cache(maxsize=1)
def _ipc_kernel_manager():
    """The kernel manager papermill starts kernels with: unix sockets in a private temporary folder
    instead of loopback TCP, which any local user can reach and which makes every kernel warn that its
    traffic is unencrypted (a block in each nested run's output)."""
    import atexit
    import tempfile
    import uuid

    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    # jupyter_client's default prefix is "kernel-ipc" in the working directory: a killed run would leave
    # its sockets in the repository and two runs from one folder would share names. A socket path has at
    # most 107 bytes, so the folder is a short one under the system's temporary directory (mode 0700).
    folder = Path(tempfile.mkdtemp(prefix="inquire-ipc-"))
    atexit.register(lambda: folder.rmdir() if not any(folder.iterdir()) else None)

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _private_socket_prefix(self) -> str:
            return str(folder / f"k{uuid.uuid4().hex[:12]}")

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client's graceful shutdown sends SIGINT before its shutdown request; papermill shuts a
            # kernel down only once the notebook has run, so there is nothing to interrupt, and a SIGINT that
            # lands while the kernel still handles a message is logged by ipykernel as "[IPKernelApp] ERROR |
            # KeyboardInterrupt caught in kernel" on the run's console. A kernel that does not stop on the
            # request is still killed after `shutdown_wait_time`.
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return IPCKernelManager


class NotebookFailed(RuntimeError):
    """A notebook raised while papermill executed it; names the notebook and the failing cell."""

    def __init__(self, notebook: str, output_path: Path, error: dict, manifest: dict):
        self.notebook = notebook
        self.output_path = Path(output_path)
        self.cell_index = error.get("cell_index")
        self.exec_count = error.get("exec_count")
        self.ename = error.get("ename")
        self.evalue = error.get("evalue")
        self.manifest = manifest
        where = "before any cell ran" if self.cell_index is None else f"at cell index {self.cell_index}"
        if self.exec_count is not None:
            where += f" (In [{self.exec_count}])"
        evalue = (self.evalue or "")[:500]
        super().__init__(
            f"notebook {notebook} failed {where}: {self.ename}: {evalue}; executed copy: {self.output_path}"
        )


def discover_notebooks(notebooks_dir: str | Path | None = None) -> list[Path]:
    """Return the paths of `NN_*.ipynb` in notebooks_dir (default: the repo's notebooks/), sorted by name."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else NOTEBOOKS_DIR
    return sorted(folder.glob(NOTEBOOK_PATTERN), key=lambda p: p.name)


# The repo's notebooks in run order, as found at import time.
NOTEBOOKS: tuple[Path, ...] = tuple(discover_notebooks())


def select_notebooks(notebooks: Iterable[Path], only: Iterable[str] | None) -> list[Path]:
    """Keep the notebooks whose stem or file name starts with one of `only` ("01", "02_sft_qlora",
    "03_grpo_action_level.ipynb"), in their original order; None keeps all. An entry matching no
    notebook raises ValueError listing the available names."""
    notebooks = list(notebooks)
    if only is None:
        return notebooks
    tokens = [str(t).strip() for t in only]
    chosen: set[Path] = set()
    for token in tokens:
        stem = token[: -len(".ipynb")] if token.endswith(".ipynb") else token
        hits = [p for p in notebooks if token and p.stem.startswith(stem)]
        if not hits:
            names = ", ".join(p.stem for p in notebooks) or "(none)"
            raise ValueError(f"no notebook matches {token!r}; available: {names}")
        chosen.update(hits)
    return [p for p in notebooks if p in chosen]


@contextlib.contextmanager
def _runs_env(runs_root: Path, name: str):
    """Kernels inherit the runs root and the run name (see `paths`), so what a notebook writes
    lands beside its executed copy."""
    values = {FOLDERS["runs"][0]: str(runs_root), RUN_NAME[0]: name}
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def declared_parameters(notebook: str | Path) -> set[str]:
    """Names assigned in the notebook's `parameters` cell (empty when it has none)."""
    import ast

    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            names = set()
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
            return names
    return set()


def stamp_notebook(executed: Path, record: dict) -> None:
    """Record the run (name, profile, overrides, effective settings) in the executed notebook's
    metadata under "inquire", so the copy says what it ran with wherever it goes."""
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    nb.metadata["inquire"] = to_json(record)
    write_text_atomic(executed, nbformat.writes(nb))


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def git_state() -> tuple[str | None, bool | None]:
    """Return (HEAD commit sha, whether the work tree differs from it); (None, None) outside git
    or before the first commit."""
    sha = _git("rev-parse", "--verify", "HEAD")
    if sha is None:
        return None, None
    status = _git("status", "--porcelain")
    return sha.strip(), (None if status is None else bool(status.strip()))


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions by name (None when not installed); nothing is imported."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def device_info(profile: ModelSettings) -> dict:
    """The device a run uses, for the manifest: kind and name, the CUDA version torch was built
    for, the GPU count, the training dtype and the number of processes ($WORLD_SIZE)."""
    import torch

    cuda = torch.cuda.is_available()
    return {
        "device": "cuda" if cuda else "cpu",
        "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None,
        "dtype": "bfloat16" if uses_bf16(profile, cuda=cuda) else "float32",
        **device_stamp(),
        # measured where the flags allow bf16: whether it is used depends on it (`hardware.bf16_pays`)
        "bf16_probe": bf16_probe() if not cuda and cpu_has_native_bf16() else None,
        "load_in_4bit": profile.load_in_4bit,
        "processes": max(1, int(os.environ.get("WORLD_SIZE", "1"))),
    }


def run_manifest(profile: str | Profile, seed: int | None = None, name: str | None = None) -> dict:
    """Describe the code and environment a result comes from: git sha and dirty flag, run name (the
    current run unless given), profile name, its overrides and the effective settings, seed (the
    profile's unless given), Python and package versions, and the time it was taken, as plain JSON
    types (tuples become lists). Notebooks stamp their metrics JSON with it."""
    prof = get_profile(profile)
    sha, dirty = git_state()
    return to_json(
        {
            "git_sha": sha,
            "git_dirty": dirty,
            "run": check_run_name(name) if name is not None else run_name(),
            "profile": prof.name,
            "overrides": dict(prof.overrides),
            "settings": prof.to_dict(),
            "seed": prof.seed if seed is None else seed,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "packages": package_versions(),
            "device": device_info(prof),
            "created": _now(),
        }
    )


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _source_cell_index(executed_path: Path, fallback: int | None) -> int | None:
    """Index, in the source notebook, of the first cell with an error in the executed copy
    (papermill's own injected-parameters and error-marker cells are not counted)."""
    try:
        import nbformat

        nb = nbformat.read(executed_path, as_version=4)
    except Exception:
        return fallback
    index = 0
    for cell in nb.cells:
        if _PAPERMILL_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and not (
                out.get("ename") == "SystemExit" and out.get("evalue") in ("", "0")
            ):
                return index
        if cell.get("metadata", {}).get("papermill", {}).get("exception") is True:
            return index
        index += 1
    return fallback


def _error_record(exc: BaseException, executed_path: Path) -> dict:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        return {
            "cell_index": _source_cell_index(executed_path, exc.cell_index),
            "exec_count": exc.exec_count,
            "ename": exc.ename,
            "evalue": str(exc.evalue)[:2000],
        }
    return {"cell_index": None, "exec_count": None, "ename": type(exc).__name__, "evalue": str(exc)[:2000]}


def _entry(nb: Path, out_dir: Path) -> dict:
    return {
        "name": nb.stem,
        "source": str(nb),
        "executed": str(out_dir / nb.name),
        "duration_s": None,
        "status": "not run",
        "error": None,
        "finished": None,
        "stale_because": None,
    }


def _mark_stale(entries: list[dict], upstream: str) -> list[str]:
    """Mark every finished notebook after `upstream` (in name order) stale; returns their names."""
    marked = []
    for entry in entries:
        if entry["name"] > upstream and entry["status"] in ("ok", "stale"):
            entry["status"] = "stale"
            entry["stale_because"] = f"{upstream} was re-run after it"
            marked.append(entry["name"])
    return marked


def _load_existing(manifest_path: Path, overrides: dict, seed) -> dict | None:
    """The run's manifest when it exists; refuses a run made with other overrides or another seed."""
    import json

    if not manifest_path.exists():
        return None
    old = json.loads(manifest_path.read_text())
    if old.get("overrides", {}) != to_json(overrides) or old.get("seed") != seed:
        raise ValueError(
            f"run {old.get('run')!r} in {manifest_path.parent} was made with overrides {old.get('overrides', {})} "
            f"and seed {old.get('seed')}, not {to_json(overrides)} and seed {seed}: choose another --name"
        )
    return old


def run_notebooks(
    profile: str,
    only: list[str] | None = None,
    out_root: str | Path | None = None,
    parameters: dict | None = None,
    kernel_name: str | None = "python3",
    notebooks_dir: str | Path | None = None,
    cwd: str | Path | None = None,
    progress_bar: bool | None = None,
    log: Callable[[str], None] | None = print,
    overrides: dict | None = None,
    name: str | None = None,
    cell_timeout: int | None = None,
    preflight: Callable[[], None] | None = None,
) -> dict:
    """Execute the numbered notebooks (those selected by `only`, see select_notebooks) in order
    with papermill as run `name` (default: `default_run_name(overrides)`), passing
    {"PROFILE": profile, "OVERRIDES": overrides (when any), **parameters}, the kernel started in
    `cwd` (the repo root by default, so `import inquire_lib` works). Overrides are checked before any
    kernel starts (OverrideError naming the key), and every notebook run with overrides must declare
    `OVERRIDES` in its parameters cell. Executed copies go to `<out_root>/<profile>/<run>/<nb>.ipynb`
    (their metadata["inquire"] records the run and effective profile) and the run's manifest to
    `<out_root>/<profile>/<run>/manifest.json`, rewritten after every notebook; an existing run's
    manifest is continued (see module doc). Stops at the first failure and raises NotebookFailed;
    returns the manifest when all succeed. The progress bar is off when CI is set, unless asked for. A
    cell running longer than `cell_timeout` seconds (default: the profile's `cell_timeout_s`) fails the
    notebook instead of hanging the run. `preflight` is called with the run's lock held, before any notebook
    starts (`inquire run` prints its plan there, and stops when it would train unasked)."""
    import papermill

    prof = get_profile(profile)  # an unknown name fails here, before any kernel starts
    params = {"PROFILE": prof.name, **(parameters or {})}
    if params["PROFILE"] != prof.name:
        raise ValueError(f"parameters['PROFILE']={params['PROFILE']!r} contradicts profile {prof.name!r}")
    checked = check_overrides(overrides if overrides is not None else params.get("OVERRIDES"))
    if "OVERRIDES" in params and check_overrides(params["OVERRIDES"]) != checked:
        raise ValueError("parameters['OVERRIDES'] contradicts overrides")
    params.pop("OVERRIDES", None)
    if checked:
        params["OVERRIDES"] = checked
    effective = apply_overrides(prof, checked)
    name = check_run_name(name if name is not None else default_run_name(checked))
    notebooks = select_notebooks(discover_notebooks(notebooks_dir), only)
    if not notebooks:
        folder = notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR
        raise FileNotFoundError(f"no notebooks matching {NOTEBOOK_PATTERN} in {folder}")
    if checked:
        deaf = [nb.name for nb in notebooks if "OVERRIDES" not in declared_parameters(nb)]
        if deaf:
            raise OverrideError(
                f"notebooks without an OVERRIDES parameter would ignore the overrides: {', '.join(deaf)}"
            )
    out_dir = run_dir(prof.name, out_root, name=name)
    manifest_path = out_dir / MANIFEST_NAME
    seed = params.get("SEED", prof.seed)
    # one process at a time: a second one stops here, before it reads or writes anything of the run
    with locks.held(out_dir / locks.LOCK_NAME, f"run {prof.name}/{name}"):
        if preflight is not None:
            preflight()
        existing = _load_existing(manifest_path, checked, seed)
        out_dir.mkdir(parents=True, exist_ok=True)
        if progress_bar is None:
            progress_bar = not _in_ci()
        workdir = Path(cwd) if cwd is not None else REPO_ROOT
        say = log or (lambda _msg: None)

        timeout = effective.cell_timeout_s if cell_timeout is None else cell_timeout
        manifest = run_manifest(effective, seed=seed, name=name)
        entries = {
            e["name"]: {**_entry(Path(e["source"]), out_dir), **e} for e in (existing or {}).get("notebooks", [])
        }
        for nb in notebooks:
            entries.setdefault(nb.stem, _entry(nb, out_dir))
        history = (existing or {}).get("history", [])
        invocation = {
            "started": _now(),
            "finished": None,
            "only": list(only) if only is not None else None,
            "notebooks": [nb.stem for nb in notebooks],
            "status": "running",
            "git_sha": manifest["git_sha"],
        }
        history.append(invocation)
        manifest.update(
            {
                "parameters": params,
                "only": list(only) if only is not None else None,
                "kernel_name": kernel_name,
                "cell_timeout_s": timeout,
                "out_dir": str(out_dir),
                "started": (existing or {}).get("started") or invocation["started"],
                "finished": None,
                "status": "running",
                "notebooks": [entries[k] for k in sorted(entries)],
                "history": history,
            }
        )
        write_json_atomic(manifest_path, manifest)
        stamp = {
            "run": name,
            "profile": prof.name,
            "overrides": checked,
            "seed": seed,
            "settings": effective.to_dict(),
            "manifest": str(manifest_path),
        }

        def finish(status: str) -> None:
            manifest["status"] = invocation["status"] = status
            manifest["finished"] = invocation["finished"] = _now()
            write_json_atomic(manifest_path, manifest)

        for i, nb in enumerate(notebooks, start=1):
            entry = entries[nb.stem]
            entry.update(_entry(nb, out_dir))
            executed = out_dir / nb.name
            say(f"[{i}/{len(notebooks)}] {nb.stem} (profile {prof.name}, run {name})")
            entry["status"] = "running"
            write_json_atomic(manifest_path, manifest)
            seen = len(timing.read(out_dir))
            t0 = time.perf_counter()
            try:
                with _runs_env(out_dir.parent.parent, name):
                    papermill.execute_notebook(
                        str(nb),
                        str(executed),
                        parameters=params,
                        kernel_name=kernel_name,
                        cwd=str(workdir),
                        progress_bar=progress_bar,
                        execution_timeout=timeout,
                        store_widget_state=STORE_WIDGET_STATE,
                        kernel_manager_class=_ipc_kernel_manager(),
                    )
            except BaseException as exc:  # record interrupts too, then let them through
                entry["duration_s"] = round(time.perf_counter() - t0, 3)
                entry["stages"] = _stages(out_dir, seen)
                entry["status"] = "failed"
                entry["finished"] = _now()
                entry["error"] = _error_record(exc, executed)
                _mark_stale(list(entries.values()), nb.stem)
                finish("failed")
                if executed.exists():
                    with contextlib.suppress(Exception):
                        stamp_notebook(executed, stamp)
                if not isinstance(exc, Exception):
                    raise
                failure = NotebookFailed(nb.name, executed, entry["error"], manifest)
                say(f"    FAILED: {failure}")
                raise failure from exc
            stamp_notebook(executed, stamp)
            entry["duration_s"] = round(time.perf_counter() - t0, 3)
            entry["stages"] = _stages(out_dir, seen)
            entry["status"] = "ok"
            entry["finished"] = _now()
            queued = {p.stem for p in notebooks[i:]}
            later = [n for n in _mark_stale(list(entries.values()), nb.stem) if n not in queued]
            say(f"    ok in {entry['duration_s']:.1f} s -> {executed}")
            if later:
                say(f"    stale now (run before {nb.stem} changed): {', '.join(later)}")

        finish("ok")
        say("time table (wall clock, this machine):\n" + timing.table(manifest["notebooks"]))
        return manifest


def _stages(out_dir: Path, seen: int) -> list[dict]:
    """The stage timings a notebook added to its run (`runs.timing`), in order."""
    return [{k: v for k, v in t.items() if k != "at"} for t in timing.read(out_dir)[seen:]]


SWEEP_MANIFEST = "sweep.json"
POINT_SUFFIX = ".point.json"  # beside each executed point: written last, it marks the point finished


def point_key(notebook: str | Path, params: dict, profile: Profile) -> str:
    """What decides a sweep point's result: the notebook's source, its parameters (overrides
    included), the effective profile and the library's source (`readback.library_digest`)."""
    import hashlib
    import json

    from .readback import library_digest

    h = hashlib.sha256(Path(notebook).read_bytes())
    h.update(
        json.dumps(
            {"parameters": to_json(params), "profile": to_json(profile.to_dict()), "code": library_digest()},
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()


def _finished_point(executed: Path, key: str) -> dict | None:
    """The record of an earlier run of this point when it finished with the same key, else None
    (a missing, unreadable, failed or differently keyed record means: run it again)."""
    import json

    marker = executed.with_name(executed.name + POINT_SUFFIX)
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("key") != key
        or record.get("status") != "ok"
        or not executed.exists()
    ):
        return None
    return record


def _execute_point(
    notebook: str,
    params: dict,
    executed: Path,
    key: str,
    kernel_name: str,
    cwd: str,
    timeout_s,
    runs_root: Path,
    name: str,
    progress_bar: bool,
) -> dict:
    """Execute one sweep point with papermill; its marker (`<executed>.point.json`) is written last,
    and only when the point finished. Module level, so a spawned worker process can run it."""
    import papermill

    marker = executed.with_name(executed.name + POINT_SUFFIX)
    marker.unlink(missing_ok=True)  # our own record of an earlier run: the point is no longer finished
    t0 = time.perf_counter()
    record = {"parameters": params, "executed": str(executed), "status": "ok", "error": None, "key": key}
    try:
        with _runs_env(runs_root, name):
            papermill.execute_notebook(
                notebook,
                str(executed),
                parameters=params,
                kernel_name=kernel_name,
                cwd=cwd,
                progress_bar=progress_bar,
                execution_timeout=timeout_s,
                store_widget_state=STORE_WIDGET_STATE,
                kernel_manager_class=_ipc_kernel_manager(),
            )
    except Exception as exc:
        record.update(status="failed", error=_error_record(exc, executed))
    record["duration_s"] = round(time.perf_counter() - t0, 3)
    record["finished"] = _now()
    if record["status"] == "ok":
        write_json_atomic(marker, to_json(record))
    return record


def _exit_with_parent(parent: int) -> None:
    """Sweep worker initializer: the worker ends when the sweep that started it is gone (killed, say), as a
    kernel does when its parent goes; without it the points in flight would run on unseen and a rerun
    could train the same point twice at once."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _lanes(grid: list[dict], todo: list[int], lane: Callable[[dict], object] | None) -> list[list[int]]:
    """The points still to run, grouped into lanes (grid order kept within each), longest lane first so
    the last lane to start is a short one. Without `lane` every point is a lane of its own."""
    lanes: dict = {}
    for i in todo:
        lanes.setdefault(lane(grid[i]) if lane else i, []).append(i)
    return sorted(lanes.values(), key=len, reverse=True)


def sweep(
    notebook: str | Path,
    grid: list[dict],
    profile: str,
    out_root: str | Path | None = None,
    subdir: str = "sweeps",
    kernel_name: str = "python3",
    cwd: str | Path | None = None,
    log: Callable[[str], None] | None = print,
    overrides: dict | None = None,
    resume: bool = True,
    parallel: int = 1,
    lane: Callable[[dict], object] | None = None,
) -> list[dict]:
    """Execute one parametrised notebook once per point of `grid` with papermill, each into
    `<out_root>/<profile>/<run>/<subdir>/<stem>__k1-v1_k2-v2.ipynb`. Every point runs even if another
    failed; returns one record per point, in grid order, {parameters, executed, duration_s, status, error,
    key}, status "ok", "failed" or "reused". The run's `overrides` (checked) go to every point as
    OVERRIDES, kept out of the file names.

    Resuming: a finished point leaves `<executed>.point.json` (written last, atomically) with its
    `point_key`; with `resume`, a point whose record holds the same key is reused, not executed again
    (an interrupted sweep continues where it stopped). `<subdir>/sweep.json` lists every point of the
    latest sweep with its status ("running" while it runs, "not run" before), rewritten after each
    point, so a failed or never-reached one is named.

    Parallel: with `parallel` > 1, that many points run at once, each in a worker process of its own
    (spawned, so no worker inherits a kernel's threads). `lane(point)` names the points that must run
    one after another (a point that starts from another's checkpoint shares its lane); points of
    different lanes may run side by side. Without `lane` the points are independent."""
    prof = apply_overrides(get_profile(profile), overrides)
    out_dir = run_dir(prof.name, out_root) / subdir
    name = run_name()
    out_dir.mkdir(parents=True, exist_ok=True)
    say = log or (lambda _msg: None)
    checked = check_overrides(overrides)
    points = []
    for point in grid:
        params = {"PROFILE": prof.name, **point, **({"OVERRIDES": checked} if checked else {})}
        tag = "_".join(f"{k}-{v}" for k, v in sorted(point.items()))
        executed = out_dir / f"{Path(notebook).stem}__{tag}.ipynb"
        points.append((tag, params, executed, point_key(notebook, params, prof)))
    results: list[dict | None] = [None] * len(points)
    running: set[int] = set()

    def record_sweep(status: str) -> None:
        listed = [
            results[i]
            or {
                "parameters": params,
                "executed": str(executed),
                "status": "running" if i in running else "not run",
                "key": key,
            }
            for i, (_tag, params, executed, key) in enumerate(points)
        ]
        done = [r for r in results if r is not None]
        write_json_atomic(
            out_dir / SWEEP_MANIFEST,
            {
                "notebook": str(notebook),
                "profile": prof.name,
                "run": name,
                "status": status,
                "updated": _now(),
                "parallel": max(1, parallel),
                "counts": {s: sum(r["status"] == s for r in done) for s in ("ok", "reused", "failed")},
                "points": to_json(listed),
            },
        )

    for i, (tag, params, executed, key) in enumerate(points):
        earlier = _finished_point(executed, key) if resume else None
        if earlier is not None:
            results[i] = {
                "parameters": params,
                "executed": str(executed),
                "status": "reused",
                "error": None,
                "key": key,
                "duration_s": earlier.get("duration_s", 0.0),
                "finished": earlier.get("finished"),
            }
            say(f"  sweep point {tag}: reused (finished {results[i]['finished']}, same settings and code)")
    todo = [i for i, r in enumerate(results) if r is None]
    record_sweep("running")

    def job(i: int) -> tuple:
        _tag, params, executed, key = points[i]
        return (
            str(notebook),
            params,
            executed,
            key,
            kernel_name,
            str(cwd or REPO_ROOT),
            prof.cell_timeout_s,
            root("runs", out_root),
            name,
            parallel <= 1 and not _in_ci(),
        )

    def start(i: int) -> None:
        running.add(i)
        record_sweep("running")  # the manifest names the point running as soon as it is taken

    def finish(i: int, record: dict) -> None:
        running.discard(i)
        results[i] = record
        say(f"  sweep point {points[i][0]}: {record['status']} in {record['duration_s']:.1f} s")
        record_sweep("running")

    def failed(i: int, exc: BaseException) -> dict:
        _tag, params, executed, key = points[i]
        return {
            "parameters": params,
            "executed": str(executed),
            "status": "failed",
            "key": key,
            "error": _error_record(exc, executed),
            "duration_s": 0.0,
            "finished": _now(),
        }

    if parallel <= 1 or len(todo) <= 1:
        for i in todo:
            start(i)
            finish(i, _execute_point(*job(i)))
    else:
        import multiprocessing
        from collections import deque
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        lanes = deque(deque(lane_points) for lane_points in _lanes(grid, todo, lane))
        with ProcessPoolExecutor(
            parallel,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            futures: dict = {}

            def submit(lane_points: deque) -> None:
                i = lane_points.popleft()
                start(i)
                try:
                    futures[pool.submit(_execute_point, *job(i))] = (i, lane_points)
                except Exception as exc:  # the pool broke: a worker died; the point is named as failed
                    finish(i, failed(i, exc))

            while lanes and len(futures) < parallel:
                submit(lanes.popleft())
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    i, lane_points = futures.pop(future)
                    try:
                        record = future.result()
                    except Exception as exc:  # the worker itself died (e.g. killed for memory)
                        record = failed(i, exc)
                    finish(i, record)
                    if lane_points:
                        submit(lane_points)
                    elif lanes:
                        submit(lanes.popleft())
    record_sweep("finished")
    return results
