"""Each stage call's wall time and peak resident memory in the run's timings (`runs.timing`)."""

from __future__ import annotations

import functools
import inspect
import time

from ..profiles import get_profile
from ..runs import timing
from ..runs.paths import run_dir


def timed(stage: str):
    """Record the wall time of each call in the run's timings, named after the call's checkpoint (its
    `name` or `variant` argument), with the process's peak RSS during the call (and a child's, where one set a
    new peak); an evaluation read back is marked as such."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arg = bound.arguments
            label = next((arg[k] for k in ("name", "variant") if isinstance(arg.get(k), str)), None)
            timing.reset_peak_rss()
            children_before = timing.peak_rss_mb()["children"]
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            seconds = time.perf_counter() - t0
            reused = isinstance(result, dict) and bool(result.get("read_back"))
            peak = timing.peak_rss_mb()
            memory = {"peak_rss_mb": peak["self"]} if peak["self"] is not None else {}
            if peak["children"] > children_before:  # a child of this stage (the exporter) set a new peak
                memory["child_peak_rss_mb"] = peak["children"]
            timing.record(
                run_dir(get_profile(arg["profile"]), arg.get("out_root")),
                stage,
                label,
                seconds,
                **({"reused": True} if reused else {}),
                **memory,
            )
            return result

        return inner

    return wrap
