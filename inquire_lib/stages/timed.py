"""Each stage call's wall time in the run's timings (`runs.timing`)."""

from __future__ import annotations

import functools
import inspect
import time

from ..profiles import get_profile
from ..runs import timing
from ..runs.paths import run_dir


def timed(stage: str):
    """Record the wall time of each call in the run's timings, named after the call's checkpoint (its
    `name` or `variant` argument); an evaluation read back is marked as such."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arg = bound.arguments
            label = next((arg[k] for k in ("name", "variant") if isinstance(arg.get(k), str)), None)
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            reused = isinstance(result, dict) and bool(result.get("read_back"))
            timing.record(
                run_dir(get_profile(arg["profile"]), arg.get("out_root")),
                stage,
                label,
                time.perf_counter() - t0,
                **({"reused": True} if reused else {}),
            )
            return result

        return inner

    return wrap
