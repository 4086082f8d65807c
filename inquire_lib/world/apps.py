"""Apps, screens and UI elements of the offline phone.

Screens follow a regular layout, as real phones mostly do: an app bar (back, title, one action),
up to seven list rows of fixed height, a primary button, a bottom bar of up to four tabs, and a
centred dialog with Cancel / OK. Every interactive element therefore sits in one of a few named
slots, and its id *is* its slot (`r3` is the fourth row). A click is a choice among slots rather
than a copy of arbitrary numbers, and a list row is wide, so any point in it counts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..agent.actions import DEFAULT_SCREEN_WH

SCREEN_W, SCREEN_H = DEFAULT_SCREEN_WH
STATUS_H = 24
MAX_ROWS = 7
ROW_TOP, ROW_H, ROW_GAP = 88, 64, 8

# slot id -> bbox (x0, y0, x1, y1) in the screen frame
SLOTS: dict[str, tuple[int, int, int, int]] = {
    "back": (0, 24, 56, 80),
    "act": (304, 24, 360, 80),
    **{
        f"r{k}": (8, ROW_TOP + k * (ROW_H + ROW_GAP), 352, ROW_TOP + k * (ROW_H + ROW_GAP) + ROW_H)
        for k in range(MAX_ROWS)
    },
    "btn": (24, 600, 336, 648),
    **{f"tab{k}": (k * 90, 664, k * 90 + 90, 720) for k in range(4)},
    "cancel": (48, 396, 172, 444),
    "ok": (188, 396, 312, 444),
}
DIALOG_BOX = (32, 220, 328, 460)
KEYBOARD_TOP = 456
HOME_COLS, HOME_ICON = 4, 64
SLOT_IDS = tuple(SLOTS) + tuple(f"a{k}" for k in range(12))


def home_icon_bbox(k: int) -> tuple[int, int, int, int]:
    col, row = k % HOME_COLS, k // HOME_COLS
    x0, y0 = 22 + col * 84, 110 + row * 110
    return (x0, y0, x0 + HOME_ICON, y0 + HOME_ICON)


def centre(bbox) -> tuple[int, int]:
    x0, y0, x1, y1 = bbox
    return ((x0 + x1) // 2, (y0 + y1) // 2)


@dataclass(frozen=True)
class Element:
    id: str
    role: str  # row | text | input | button | tab | icon | dialog_button
    text: str
    detail: str = ""
    checked: bool | None = None  # switches show on/off

    @property
    def bbox(self) -> tuple[int, int, int, int]:
        if self.id.startswith("a") and self.id[1:].isdigit():
            return home_icon_bbox(int(self.id[1:]))
        return SLOTS[self.id]

    @property
    def clickable(self) -> bool:
        return self.role not in ("text", "input")


@dataclass(frozen=True)
class Screen:
    app: str
    title: str
    elements: tuple[Element, ...] = ()
    dialog: str | None = None  # dialog message; its buttons are the `cancel` / `ok` elements
    keyboard: bool = False
    input_text: str = ""  # what has been typed into the focused input so far

    def element(self, eid: str) -> Element | None:
        return next((e for e in self.elements if e.id == eid), None)

    def find(self, text: str) -> Element | None:
        return next((e for e in self.elements if e.text == text), None)

    def at(self, x: float, y: float) -> Element | None:
        """The clickable element under a point; while a dialog is open only its buttons react."""
        for e in self.elements:
            if self.dialog and e.role != "dialog_button":
                continue
            x0, y0, x1, y1 = e.bbox
            if e.clickable and x0 <= x <= x1 and y0 <= y <= y1:
                return e
        return None

    def with_input(self, text: str) -> "Screen":
        return replace(self, input_text=text)

    def a11y(self) -> list[dict]:
        """The accessibility list: what a screen reader would expose, in slot order."""
        return [
            {"id": e.id, "role": e.role, "text": e.text, "detail": e.detail, "bbox": list(e.bbox)}
            for e in self.elements
        ]


@dataclass(frozen=True)
class App:
    name: str
    color: tuple[int, int, int]
    tabs: tuple[str, ...] = ()


APPS: dict[str, App] = {
    a.name: a
    for a in (
        App("Wallet", (33, 150, 83), ("Home", "Cards", "History", "Me")),
        App("Chat", (3, 169, 244), ("Chats", "Contacts", "Discover", "Me")),
        App("Shop", (255, 112, 67), ("Home", "Search", "Cart", "Me")),
        App("Gallery", (171, 71, 188), ("Photos", "Albums", "Shared")),
        App("Settings", (96, 125, 139)),
        App("Social", (233, 30, 99), ("Feed", "Post", "Profile")),
        App("Mail", (229, 57, 53), ("Inbox", "Sent", "Drafts")),
        App("Maps", (67, 160, 71), ("Explore", "Saved", "Go")),
        App("Food", (255, 160, 0), ("Home", "Orders", "Me")),
        App("Music", (94, 53, 177), ("Home", "Search", "Library")),
        App("Calendar", (30, 136, 229), ("Day", "Month")),
        App("Files", (121, 85, 72), ("Recent", "Browse")),
    )
}


def home_screen() -> Screen:
    icons = tuple(Element(f"a{k}", "icon", name) for k, name in enumerate(APPS))
    return Screen(app="Home", title="Home", elements=icons)


def app_screen(
    app: str,
    title: str,
    rows=(),
    button: str | None = None,
    action: str | None = None,
    tabs: bool = False,
    dialog: str | None = None,
    dialog_buttons=("Cancel", "OK"),
    keyboard: bool = False,
    back: bool = True,
) -> Screen:
    """Lay an app screen out on the slots. `rows` holds str, (text, detail), or Element-like tuples
    (text, detail, role); a role of "text" gives a non-clickable info row, "input" a text field."""
    els: list[Element] = []
    if back:
        els.append(Element("back", "button", "Back"))
    if action:
        els.append(Element("act", "button", action))
    if len(rows) > MAX_ROWS:
        raise ValueError(f"{title}: {len(rows)} rows do not fit in {MAX_ROWS} slots")
    for k, row in enumerate(rows):
        row = (row,) if isinstance(row, str) else tuple(row)
        detail = row[1] if len(row) > 1 else ""
        role = row[2] if len(row) > 2 else "row"
        els.append(Element(f"r{k}", role, row[0], detail))
    if button and not keyboard:
        els.append(Element("btn", "button", button))
    if tabs and not keyboard:
        for k, name in enumerate(APPS[app].tabs):
            els.append(Element(f"tab{k}", "tab", name))
    if dialog:
        els.append(Element("cancel", "dialog_button", dialog_buttons[0]))
        els.append(Element("ok", "dialog_button", dialog_buttons[1]))
    return Screen(app=app, title=title, elements=tuple(els), dialog=dialog, keyboard=keyboard)
