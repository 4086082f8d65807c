"""Overrides: `--set key=value` and a notebook's OVERRIDES, each checked against the field it names and typed
as that field is; the run name they give."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from typing import Any, Iterable

from .profile import PROFILES, Profile, get_profile
from .scoring import USER_ANSWERS
from .shared import TOKENIZER_DIGITS, TOKENIZER_SLOTS, TRAIN_VALUES

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
    "task_rollout": ("conversation", "reprompt"),
    # TRL 1.16's GRPOConfig accepts these
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
}


# dict fields whose keys are a few words
KEYS: dict[str, tuple[str, ...]] = {"task_start_shares": ("start", "path", "slip")}


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
        out = {k: _item(key, "float", v) for k, v in value.items()}
        keys = KEYS.get(key)
        if keys is not None and (set(out) - set(keys) or min(out.values()) < 0 or sum(out.values()) <= 0):
            raise _bad(key, f"shares >= 0 of {', '.join(keys)}, not all 0", value)
        return out
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
