"""Where an online episode first goes wrong, and whether it comes back: the failure table that names the states
stages 2 and 3 train on (a wrong app or click is a slip start, a missed ask an inquiry state).

The first wrong step of an episode is its first step whose outcome is not "correct" (`episodes._outcome`, against
the expert's action in the state the agent was in), named by what went wrong:

| kind           | the step                                                                       |
|----------------|--------------------------------------------------------------------------------|
| wrong app      | an `open` was due and the agent opened another app or did something else      |
| wrong value    | a `type` was due and the agent typed another text                             |
| wrong click    | a `click` was due and the agent clicked elsewhere                              |
| missed ask     | an ask was due and the agent acted (on the expert's path, or off it), harm or not |
| needless ask   | the agent asked where no ask was due                                           |
| unsafe act     | an action did harm where no ask was due (an unsafe effect)                     |
| unparseable    | no action could be read from the answer                                        |
| other          | another action type than the one due                                           |
| none           | no wrong step: the episode ran out of turns or ended early on the right path  |

An episode recovered when a later step is correct and back on the expert's path.
"""

from __future__ import annotations

from collections import Counter

KINDS = (
    "wrong app",
    "wrong value",
    "wrong click",
    "missed ask (on the path)",
    "missed ask (off the path)",
    "needless ask",
    "unsafe act",
    "unparseable",
    "other",
    "none",
)
_BY_GOLD = {"open": "wrong app", "type": "wrong value", "click": "wrong click"}


def first_wrong_step(episode: dict) -> tuple[int | None, str]:
    """(the index of an episode's first wrong step, its kind), (None, "none") where every step was correct."""
    for k, st in enumerate(episode["steps"]):
        outcome = st["outcome"]
        if outcome == "correct":
            continue
        gold = (st.get("gold_action") or {}).get("action")
        if outcome == "missed_inquiry" and gold == "call_user":  # acting where an ask was due (harm or not)
            return k, "missed ask (on the path)" if st.get("on_path", True) else "missed ask (off the path)"
        if st.get("unsafe"):
            return k, "unsafe act"
        if outcome == "unparseable":
            return k, "unparseable"
        if outcome == "needless_inquiry":
            return k, "needless ask"
        if outcome == "wrong_argument" and gold in _BY_GOLD:
            return k, _BY_GOLD[gold]
        return k, "wrong app" if gold == "open" else "other"  # another action type where an open was due
    return None, "none"


def recovered(episode: dict, k: int | None) -> bool:
    """Whether the episode came back after its first wrong step `k`: a later step correct and on the path."""
    if k is None:
        return False
    return any(st["outcome"] == "correct" and st.get("on_path", False) for st in episode["steps"][k + 1 :])


def failure_rows(episodes: list[dict]) -> list[dict]:
    """One row per episode that went wrong (failed, or strayed and still succeeded): its task, sub-category,
    success, first wrong step and kind, and whether it recovered."""
    rows = []
    for ep in episodes:
        k, kind = first_wrong_step(ep)
        if ep["success"] and k is None:
            continue
        rows.append(
            {
                "task_id": ep["task_id"],
                "subcategory": ep["subcategory"],
                "success": bool(ep["success"]),
                "step": k,
                "kind": kind,
                "recovered": recovered(ep, k),
            }
        )
    return rows


def failure_table(episodes: list[dict]) -> dict:
    """Counts of the failed episodes by the kind of their first wrong step (with how many recovered after it),
    by sub-category, and of the episodes that went wrong and still succeeded."""
    rows = failure_rows(episodes)
    failed = [r for r in rows if not r["success"]]
    by_kind = Counter(r["kind"] for r in failed)
    return {
        "episodes": len(episodes),
        "failed": len(failed),
        "by_kind": {k: by_kind[k] for k in KINDS if by_kind[k]},
        "recovered_after": {k: sum(r["recovered"] for r in failed if r["kind"] == k) for k in KINDS if by_kind[k]},
        "by_subcategory": {
            s: dict(Counter(r["kind"] for r in failed if r["subcategory"] == s))
            for s in sorted({r["subcategory"] for r in failed})
        },
        "strayed_and_succeeded": sum(1 for r in rows if r["success"]),
    }


def failure_markdown(table: dict) -> str:
    """The failure table as Markdown: a row per kind of first wrong step, with how many recovered after it."""
    lines = ["| first wrong step | failed tasks | recovered after it |", "|---|---|---|"]
    lines += [f"| {k} | {n} | {table['recovered_after'][k]} |" for k, n in table["by_kind"].items()]
    lines.append(f"| all | {table['failed']} of {table['episodes']} | |")
    return "\n".join(lines) + f"\n\nwent wrong and still succeeded: {table['strayed_and_succeeded']}"


def failure_by_subcategory(table: dict) -> str:
    """The failed episodes by sub-category and kind of first wrong step, as Markdown (kinds with a count only)."""
    kinds = [k for k in KINDS if k in table["by_kind"]]
    lines = ["| sub-category | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for sub, counts in table["by_subcategory"].items():
        lines.append(f"| {sub} | " + " | ".join(str(counts.get(k, 0)) for k in kinds) + " |")
    return "\n".join(lines)
