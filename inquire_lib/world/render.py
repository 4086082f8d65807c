"""PIL renderer: a `Screen` becomes a phone screenshot in the screen frame (360 x 720).

Drawn to read like a phone UI at the model's resolution: a status bar, a coloured app bar with a
back arrow, list rows as cards, a primary button, a bottom tab bar, dialogs over a dimmed screen,
and a keyboard while typing. Deterministic: the same screen gives the same bytes.
"""

from __future__ import annotations

from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from .apps import APPS, DIALOG_BOX, KEYBOARD_TOP, SCREEN_H, SCREEN_W, SLOTS, Screen

BG = (246, 247, 249)
INK = (33, 33, 33)
MUTED = (117, 117, 117)
HOME_BG = (38, 50, 56)


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _darker(c, f=0.75):
    return tuple(int(v * f) for v in c)


def _text_fit(draw, xy, text, size, fill, max_w):
    font = _font(size)
    while draw.textlength(text, font=font) > max_w and len(text) > 3:
        text = text[:-2] + "…"
    draw.text(xy, text, font=font, fill=fill)


def _status_bar(d: ImageDraw.ImageDraw, dark: bool):
    fg = (255, 255, 255) if dark else INK
    d.text((12, 5), "9:41", font=_font(12), fill=fg)
    d.rectangle((318, 8, 342, 17), outline=fg)
    d.rectangle((320, 10, 336, 15), fill=fg)
    for k in range(4):
        d.rectangle((292 + k * 5, 17 - 3 * k, 295 + k * 5, 17), fill=fg)


def _home(screen: Screen) -> Image.Image:
    img = Image.new("RGB", (SCREEN_W, SCREEN_H), HOME_BG)
    d = ImageDraw.Draw(img)
    _status_bar(d, dark=True)
    for e in screen.elements:
        x0, y0, x1, y1 = e.bbox
        color = APPS[e.text].color if e.text in APPS else (120, 120, 120)
        d.rounded_rectangle((x0, y0, x1, y1), radius=14, fill=color)
        d.text(((x0 + x1) // 2, (y0 + y1) // 2), e.text[0], font=_font(30), fill="white", anchor="mm")
        d.text(((x0 + x1) // 2, y1 + 12), e.text, font=_font(12), fill="white", anchor="mm")
    return img


def _keyboard(d: ImageDraw.ImageDraw):
    d.rectangle((0, KEYBOARD_TOP, SCREEN_W, SCREEN_H), fill=(210, 214, 220))
    rows = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
    for r, keys in enumerate(rows):
        w = 32
        x = (SCREEN_W - len(keys) * (w + 4)) // 2
        y = KEYBOARD_TOP + 16 + r * 56
        for ch in keys:
            d.rounded_rectangle((x, y, x + w, y + 44), radius=5, fill="white")
            d.text((x + w // 2, y + 22), ch, font=_font(16), fill=INK, anchor="mm")
            x += w + 4
    d.rounded_rectangle((70, KEYBOARD_TOP + 184, 290, KEYBOARD_TOP + 228), radius=5, fill="white")
    d.text((180, KEYBOARD_TOP + 206), "space", font=_font(13), fill=MUTED, anchor="mm")


@lru_cache(maxsize=4096)
def render(screen: Screen) -> Image.Image:
    """Screenshot of a screen (cached: treat the returned image as read-only)."""
    if screen.app == "Home":
        return _home(screen)
    color = APPS[screen.app].color if screen.app in APPS else (90, 90, 90)
    img = Image.new("RGB", (SCREEN_W, SCREEN_H), BG)
    d = ImageDraw.Draw(img)
    d.rectangle((0, 0, SCREEN_W, 80), fill=color)
    _status_bar(d, dark=True)
    _text_fit(d, (64, 38), screen.title, 20, "white", 230)
    for e in screen.elements:
        x0, y0, x1, y1 = e.bbox
        if e.id == "back":
            d.line((36, 40, 22, 52, 36, 64), fill="white", width=4)
        elif e.id == "act":
            d.rounded_rectangle((x0 + 4, y0 + 12, x1 - 6, y1 - 12), radius=8, outline="white", width=2)
            d.text(((x0 + x1) // 2, (y0 + y1) // 2), e.text[:1], font=_font(16), fill="white", anchor="mm")
        elif e.role in ("row", "text", "input"):
            fill = "white" if e.role != "text" else (236, 239, 241)
            d.rounded_rectangle((x0, y0, x1, y1), radius=10, fill=fill, outline=(224, 224, 224))
            if e.role == "row":
                d.ellipse((x0 + 12, y0 + 16, x0 + 44, y0 + 48), fill=color)
                d.text((x0 + 28, y0 + 32), e.text[:1].upper(), font=_font(15), fill="white", anchor="mm")
                d.line((x1 - 22, y0 + 24, x1 - 14, y0 + 32, x1 - 22, y0 + 40), fill=MUTED, width=2)
                tx = x0 + 56
            else:
                tx = x0 + 14
            if e.role == "input":
                d.text((tx, y0 + 6), e.text, font=_font(12), fill=MUTED)
                d.line((tx, y1 - 14, x1 - 14, y1 - 14), fill=color, width=2)
                _text_fit(d, (tx, y0 + 26), e.detail, 18, INK, x1 - tx - 16)
            else:
                _text_fit(d, (tx, y0 + (12 if e.detail else 22)), e.text, 17, INK, x1 - tx - 40)
                if e.detail:
                    _text_fit(d, (tx, y0 + 36), e.detail, 13, MUTED, x1 - tx - 40)
        elif e.id == "btn":
            d.rounded_rectangle((x0, y0, x1, y1), radius=24, fill=color)
            d.text(((x0 + x1) // 2, (y0 + y1) // 2), e.text, font=_font(17), fill="white", anchor="mm")
    tabs = [e for e in screen.elements if e.role == "tab"]
    if tabs:
        d.rectangle((0, SLOTS["tab0"][1], SCREEN_W, SCREEN_H), fill="white", outline=(224, 224, 224))
        for e in tabs:
            x0, y0, x1, y1 = e.bbox
            d.ellipse(((x0 + x1) // 2 - 9, y0 + 10, (x0 + x1) // 2 + 9, y0 + 28), outline=color, width=2)
            d.text(((x0 + x1) // 2, y0 + 42), e.text, font=_font(12), fill=INK, anchor="mm")
    if screen.keyboard:
        _keyboard(d)
    if screen.dialog:
        overlay = Image.new("RGBA", img.size, (0, 0, 0, 110))
        img = Image.alpha_composite(img.convert("RGBA"), overlay).convert("RGB")
        d = ImageDraw.Draw(img)
        d.rounded_rectangle(DIALOG_BOX, radius=16, fill="white")
        words, lines, line = screen.dialog.split(), [], ""
        for w in words:  # wrap the message to the dialog's width
            if d.textlength(f"{line} {w}".strip(), font=_font(16)) > DIALOG_BOX[2] - DIALOG_BOX[0] - 40:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}".strip()
        lines.append(line)
        for k, ln in enumerate(lines[:5]):
            d.text((DIALOG_BOX[0] + 20, DIALOG_BOX[1] + 24 + k * 24), ln, font=_font(16), fill=INK)
        for e in screen.elements:
            if e.role == "dialog_button":
                x0, y0, x1, y1 = e.bbox
                primary = e.id == "ok"
                d.rounded_rectangle((x0, y0, x1, y1), radius=20, fill=color if primary else (236, 239, 241))
                d.text(
                    ((x0 + x1) // 2, (y0 + y1) // 2),
                    e.text,
                    font=_font(16),
                    fill="white" if primary else INK,
                    anchor="mm",
                )
    return img
