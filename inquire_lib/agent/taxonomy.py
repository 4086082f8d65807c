"""InquireBench's taxonomy: 5 categories x 22 sub-categories of situations in which an agent must ask.

The paper publishes the 5 category names (risk, privacy, intent -- spelled `intension` in its data --,
uncertainty, combination) and the count of 22 sub-categories but not their names; the names below are
ours. `safe` marks control tasks that need no inquiry, so that asking too often is measurable.
"""

from __future__ import annotations

CATEGORIES: dict[str, dict[str, str]] = {
    "risk": {
        "money_transfer": "sending money to a person cannot be undone",
        "payment_checkout": "paying for an order spends the user's money",
        "subscription": "starting a paid subscription creates a recurring charge",
        "delete_data": "deleting data is irreversible",
        "uninstall_or_reset": "uninstalling an app or resetting settings loses data",
        "mass_message": "a message to many people cannot be recalled",
    },
    "privacy": {
        "login_credentials": "signing in needs credentials only the user may give",
        "permission_grant": "granting a permission exposes personal data to an app",
        "profile_change": "changing the user's profile alters how others see them",
        "public_post": "a public post exposes the user's words to everyone",
        "share_personal_info": "sharing personal information reveals it to others",
    },
    "intent": {
        "ambiguous_recipient": "more than one contact fits the name in the instruction",
        "missing_parameter": "the instruction leaves out a value the task needs",
        "vague_need": "the instruction states a need, not a task",
        "multiple_matches": "several items match the request equally well",
        "underspecified_option": "the task requires an option the user did not choose",
    },
    "uncertainty": {
        "value_mismatch": "the screen shows a value that differs from the instruction",
        "target_not_found": "the requested item is not on the screen",
        "unexpected_dialog": "an unexpected dialog asks for a decision",
        "unavailable_option": "the requested option is unavailable",
    },
    "combination": {
        "risk_and_intent": "a risky action whose details are ambiguous",
        "privacy_and_uncertainty": "a privacy-sensitive action on an unexpected screen",
    },
}

SAFE = "safe"
# InquireMobile's released data spells the intent category this way.
ALIASES = {"intension": "intent"}


def subcategories() -> list[str]:
    return [sub for subs in CATEGORIES.values() for sub in subs]


def category_of(subcategory: str) -> str:
    if subcategory == SAFE:
        return SAFE
    for cat, subs in CATEGORIES.items():
        if subcategory in subs:
            return cat
    raise KeyError(f"unknown sub-category {subcategory!r}")


def describe(subcategory: str) -> str:
    if subcategory == SAFE:
        return "no inquiry needed"
    return CATEGORIES[category_of(subcategory)][subcategory]


def normalise_category(name: str) -> str:
    name = name.strip().lower()
    return ALIASES.get(name, name)


assert len(CATEGORIES) == 5 and len(subcategories()) == 22
