"""Content keys: what a cache or checkpoint is named by, a hash of the resolved settings that shaped it and
of its parent's key. Two profiles that resolve to the same settings share a key, however they were written
(a preset, an override, `replace`); a changed default gives a new key, so nothing made under the old
settings is served for the new ones, and no version number is bumped by hand."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

KEY_CHARS = 12


def settings_key(settings: Mapping[str, Any], parent: str = "") -> str:
    """The key of `settings` (field -> resolved value) under `parent` (the key or name of what it starts
    from; "" for a start from nothing): the first `KEY_CHARS` hex digits of a sha256 over canonical JSON."""
    canonical = json.dumps({"settings": dict(settings), "parent": parent}, sort_keys=True, default=_plain)
    return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_CHARS]


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """'field a -> b' for each field whose value differs between two settings (sorted by field)."""
    plain = lambda v: json.loads(json.dumps(v, default=_plain))
    return [
        f"{k} {plain(a.get(k))!r} -> {plain(b.get(k))!r}"
        for k in sorted(set(a) | set(b))
        if plain(a.get(k)) != plain(b.get(k))
    ]


def _plain(value: Any) -> Any:
    """Tuples and other sequences as lists, anything else by its text: values that JSON has no form for."""
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)
