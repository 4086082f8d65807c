"""Notebook 06's inspector live in JupyterLab, driven in headless Chromium through Playwright.

`test_inspector.py` drives the widget app from Python; this checks what a user sees: the notebook
executed by papermill on a synthetic run is opened in a private JupyterLab, all its cells are run
in a live kernel, and the step slider and filter dropdowns are moved in the browser. The panels
and plotly figures must follow (DOM text, screenshot pixels), and at 1280 px the side-by-side view
must keep checkpoint B's figure clear of the text panels.

The tests share one page and run in file order; each checks the state it starts from.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import browser as system_chromium  # noqa: E402
import synthetic_run as syn  # noqa: E402

from inquire_lib.runs import notebooks as runs  # noqa: E402
from inquire_lib.runs.paths import FOLDERS  # noqa: E402

pytestmark = pytest.mark.slow
TOKEN = "inspector-browser-test"
VIEWPORT = {"width": 1280, "height": 1000}
CHROMIUM_ARGS = system_chromium.OFFLINE_FLAGS
NOTEBOOK = "papermill_runs/smoke/default/06_inspect_trajectories.ipynb"  # below the Lab root
TIMEOUT_MS = 180_000  # running every cell (torch import, reports) on a busy 2-core machine
# The first draw loads plotly.js into the page and draws three figures: seconds, or tens of
# seconds when the machine is busy. Every wait ends as soon as its condition holds.
WAIT_MS = 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> dict[int, str]:
    """Every process below `pid` (kernels run in sessions of their own, out of its group), with
    its start time, so that a number reused meanwhile by another process is left alone."""
    stats = {}
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(path.parent.name)] = (int(fields[1]), fields[19])  # parent, start time
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, started) in stats.items():
            if ppid == parent:
                found[child] = started
                todo.append(child)
    return found


def _kill_left(processes: dict[int, str]) -> None:
    """SIGKILL the processes of a `_descendants` snapshot that are still the same processes."""
    for pid, started in processes.items():
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19] == started:
                os.kill(pid, signal.SIGKILL)
        except (OSError, IndexError):
            pass


def _start_lab(root: Path, private: Path) -> tuple[subprocess.Popen, str]:
    """A JupyterLab serving `root` on a free local port, its config, data, runtime and settings
    folders under `private`; returns at once with the process and its URL."""
    env = dict(os.environ)
    for variable, name in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ("IPYTHONDIR", "ipython"),
    ):
        env[variable] = str(private / name)
        (private / name).mkdir(parents=True)
    # no news toast over the figures, no kernel dialog on a slow start
    for plugin, settings in (
        ("apputils-extension/notification", {"fetchNews": "false", "checkForUpdates": False}),
        ("notebook-extension/tracker", {"autoStartDefaultKernel": True}),
    ):
        path = private / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
    ]
    if os.getuid() == 0:
        cmd.append("--allow-root")
    with (private / "server.log").open("wb") as log:
        server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return server, f"http://127.0.0.1:{port}"


def _wait_ready(server: subprocess.Popen, url: str, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {TOKEN}"})
    while True:
        assert server.poll() is None, f"JupyterLab exited {server.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                json.load(response)
            return
        except OSError:
            assert time.monotonic() < deadline, f"JupyterLab did not answer within {timeout:.0f} s"
            time.sleep(0.5)


def _stop(server: subprocess.Popen) -> None:
    """Stop the server, its kernels and whatever they started."""
    below = _descendants(server.pid)
    os.killpg(server.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    _kill_left(below)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(URL, root) of a private JupyterLab whose root holds a synthetic run and notebook 06
    executed on it by papermill; stopped with its kernels at the end, even on failure.

    The INQUIRE_* folders and PYTHONPATH are set for the module, so the papermill and JupyterLab
    kernels write nothing into the repository and import `inquire_lib` from it. The server starts
    while papermill runs: on two cores that hides its start-up.
    """
    root = tmp_path_factory.mktemp("lab")
    private = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as mp:
        for folder in FOLDERS:
            mp.setenv(FOLDERS[folder][0], str(tmp_path_factory.mktemp(folder)))
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(runs.REPO_ROOT), os.environ.get("PYTHONPATH")])))
        syn.write_run(root)  # root/papermill_runs/smoke/default/eval/{base,sft}/...
        server, url = _start_lab(root, private)
        try:
            runs_root = root / "papermill_runs"
            manifest = runs.run_notebooks(
                "smoke",
                only=["06"],
                out_root=runs_root,
                cwd=root,
                parameters={"RUN_ROOT": str(runs_root)},
                progress_bar=False,
                log=None,
            )
            assert manifest["status"] == "ok" and (root / NOTEBOOK).is_file()
            _wait_ready(server, url, private / "server.log")
            yield url, root
        finally:
            _stop(server)


@pytest.fixture(scope="module")
def page(lab):
    """The executed notebook open in JupyterLab at 1280 px, all its cells run again in a live
    kernel (outputs cleared first, so the wait ends on this run's prompts, not the saved ones)."""
    from playwright.sync_api import sync_playwright

    url, root = lab
    executable = system_chromium.chromium("inspector browser test")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport=VIEWPORT)
            pg.set_default_timeout(30_000)
            pg.goto(f"{url}/lab/tree/{NOTEBOOK}?token={TOKEN}")
            # Cells render in batches: wait for all the prompts before trusting what they show.
            n_code = sum(c.cell_type == "code" for c in nbformat.read(root / NOTEBOOK, as_version=4).cells)
            prompts = "[...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent)"
            pg.get_by_text("| Idle").wait_for(timeout=TIMEOUT_MS)  # the kernel, in the status bar
            pg.wait_for_function(f"() => {prompts}.filter(t => /\\[\\d+\\]/.test(t)).length == {n_code}")
            _menu(pg, "Edit", "Clear Outputs of All Cells")
            pg.wait_for_function(f"() => {prompts}.filter(t => /\\[ \\]/.test(t)).length == {n_code}")
            _menu(pg, "Run", "Run All Cells")
            # done: nothing queued or running ([*]); a failing cell leaves the ones after it at [ ]
            pg.wait_for_function(
                f"() => {{ const p = {prompts}; return p.length == {n_code} "
                "&& !p.some(t => t.includes('*')) && p.some(t => /\\d/.test(t)); }",
                timeout=TIMEOUT_MS,
            )
            if pg.evaluate(f"{prompts}.filter(t => /\\[\\d+\\]/.test(t)).length") != n_code:
                errors = pg.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                pytest.fail("a cell of notebook 06 failed in JupyterLab:\n" + "\n".join(errors.all_inner_texts()))
            yield pg
        finally:
            browser.close()


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel").get_by_text(menu, exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text(item, exact=True).click()


def _app(page):
    """The inspector's output area: the output of the cell that builds it."""
    return page.locator(".jp-CodeCell", has_text="inspector.Inspector(run").locator(".jp-OutputArea")


def _label(app):
    """The step label beside the slider, e.g. "step 1 (2/3) · missed_inquiry"."""
    return app.locator(".widget-hbox:has(.widget-slider) > .widget-html")


def _dropdown(app, name: str):
    """The <select> of the dropdown described as `name` ("category", not "subcategory")."""
    return app.locator(".widget-dropdown").filter(has=app.page.get_by_text(name, exact=True)).locator("select")


def _wait_shown(app, ids: list[str]) -> None:
    """Wait for the text panels to show `ids`: they update after the label, in their own messages."""
    from playwright.sync_api import expect

    panels = app.locator(".step-details")
    expect(panels).to_have_count(len(ids), timeout=WAIT_MS)
    for i, pred_id in enumerate(ids):
        expect(panels.nth(i)).to_have_attribute("data-id", pred_id, timeout=WAIT_MS)


def _figure(app, side: str):
    """Checkpoint `side`'s step figure: the episode strip comes first, then A, then B."""
    return app.locator(".js-plotly-plot").nth({"A": 1, "B": 2}[side])


def _title(app, side: str):
    return _figure(app, side).locator(".gtitle")


def _shot(figure) -> np.ndarray:
    """The plot's pixels once two screenshots in a row agree (plotly draws asynchronously); the
    widget around it may grow with its row, the plot keeps its size."""
    locator = figure.locator(".svg-container")
    last = None
    for _ in range(10):
        px = np.asarray(Image.open(io.BytesIO(locator.screenshot())).convert("RGB")).astype(int)
        if last is not None and last.shape == px.shape and (last == px).all():
            return px
        last = px
        time.sleep(0.3)
    return last


def _changed(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of pixels that differ clearly between two same-sized screenshots."""
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((np.abs(a - b).max(axis=2) > 30).mean())


def _wait_text(locator, text: str) -> None:
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text, timeout=WAIT_MS)


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


# The notebook's vertical scroller: moving it (and only it) is what a reader does to reach B.
SCROLL_TO = """fig => {
    let s = fig.parentElement;
    while (!(s.scrollHeight > s.clientHeight && /auto|scroll/.test(getComputedStyle(s).overflowY)))
        s = s.parentElement;
    s.scrollTop += fig.getBoundingClientRect().top - s.getBoundingClientRect().top - 10;
}"""
# Points across the figure, inside the viewport below the notebook toolbar, whose topmost element
# is not part of the figure (another element drawn over it, or a box clipping it).
HIDDEN_POINTS = """(fig, view) => {
    const r = fig.getBoundingClientRect(), hidden = [];
    let seen = 0;
    for (const fx of [0.05, 0.35, 0.65, 0.95]) for (const fy of [0.05, 0.3, 0.6, 0.9]) {
        const x = r.left + fx * r.width, y = r.top + fy * r.height;
        if (y < view.top || y >= view.bottom) continue;
        seen++;
        const top = document.elementFromPoint(x, y);
        if (!fig.contains(top)) hidden.push([Math.round(x), Math.round(y), top ? top.className.toString() : null]);
    }
    return {seen, hidden};
}"""


def test_opens_on_the_first_missed_inquiry_side_by_side(page):
    """The live app shows what notebook 06 promises: A (base) on its first missed inquiry, B (sft)
    on the same step, two step figures after the episode strip."""
    app = _app(page)
    _wait_text(_label(app), "step 1 (2/3) · missed_inquiry")
    _wait_shown(app, ["t0_risk/1", "t0_risk/1"])
    assert app.locator(".js-plotly-plot").count() == 3
    _figure(app, "A").evaluate(SCROLL_TO)  # Run All left the notebook scrolled to its end
    _wait_text(_title(app, "A"), "t0_risk/1 · base · missed_inquiry")
    _wait_text(_title(app, "B"), "t0_risk/1 · sft · missed_inquiry")


def test_side_by_side_stays_readable_at_1280px(page, tmp_path):
    """Scrolled down to it, checkpoint B's figure lies within the 1280 px viewport, clear of A's
    figure and of both text panels, and nothing covers or clips it (the browser's topmost element
    at points across it is the figure)."""
    app = _app(page)
    fig_b = _figure(app, "B")
    fig_b.evaluate(SCROLL_TO)
    page.screenshot(path=tmp_path / "inspector_1280.png")
    shutil.copy(tmp_path / "inspector_1280.png", "/tmp/inspector_1280.png")
    box_a, box_b = _figure(app, "A").bounding_box(), fig_b.bounding_box()
    assert 0 <= box_b["x"] and box_b["x"] + box_b["width"] <= VIEWPORT["width"], box_b
    assert box_b["y"] == box_a["y"] and box_b["x"] >= box_a["x"] + box_a["width"], (box_a, box_b)  # beside A
    panels = app.locator(".widget-html:has(.step-details)")
    assert panels.count() == 2
    for other in [box_a, *(panel.bounding_box() for panel in panels.all())]:
        assert not _overlap(box_b, other), (box_b, other)
    view = page.locator(".jp-NotebookPanel-notebook").bounding_box()
    points = fig_b.evaluate(HIDDEN_POINTS, {"top": view["y"], "bottom": view["y"] + view["height"]})
    assert points["seen"] >= 8 and points["hidden"] == [], points


def test_step_slider_moves_panels_and_figures(page):
    """ArrowRight on the slider's handle shows the episode's next step: label, both text panels,
    both figure titles, and figure A's pixels follow."""
    app = _app(page)
    assert _label(app).inner_text() == "step 1 (2/3) · missed_inquiry"
    before = _shot(_figure(app, "A"))
    handle = app.locator(".widget-slider .noUi-handle")
    handle.focus()
    handle.press("ArrowRight")
    _wait_text(_label(app), "step 2 (3/3) · correct")
    _wait_shown(app, ["t0_risk/2", "t0_risk/2"])
    _wait_text(_title(app, "A"), "t0_risk/2 · base · correct")
    _wait_text(_title(app, "B"), "t0_risk/2 · sft · wrong_argument")
    changed = _changed(before, _shot(_figure(app, "A")))
    assert changed > 0.02, f"only {changed:.1%} of figure A's pixels changed"  # about 5% here


def test_filters_move_the_app_to_a_matching_step(page):
    """The outcome dropdown moves A to its one wrong_type step (in another episode); adding a
    category without such a step empties the app and says so."""
    app = _app(page)
    assert _label(app).inner_text() == "step 2 (3/3) · correct"
    before = _shot(_figure(app, "A"))
    _dropdown(app, "outcome").select_option("wrong_type")
    _wait_text(_label(app), "step 1 (2/2) · wrong_type")
    _wait_shown(app, ["t1_privacy/1", "t1_privacy/1"])
    assert _dropdown(app, "episode").input_value() == "t1_privacy"
    _wait_text(_title(app, "A"), "t1_privacy/1 · base · wrong_type")
    _wait_text(_title(app, "B"), "t1_privacy/1 · sft · unparseable")
    changed = _changed(before, _shot(_figure(app, "A")))
    assert changed > 0.02, f"only {changed:.1%} of figure A's pixels changed"  # about 5% here

    _dropdown(app, "category").select_option("safe")
    _wait_text(_label(app), "no step matches these filters")
    _wait_shown(app, [])
    assert app.locator(".js-plotly-plot").count() == 0
