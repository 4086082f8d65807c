"""Slot values for task templates, split so that the test set holds out values never seen in training.

Test and validation tasks draw from the fixed held-out pools below. Training tasks draw from the fixed
train pools ("fixed", the default), or with `train_values="procedural"` mostly from open-ended
procedural pools (syllable-composed names, random amounts and times, composed items, places, songs,
notes...), so that a model cannot succeed by memorising a few dozen values and must copy the value
from the instruction or the screen; a share still comes from the fixed train pools. Procedural
values never equal, nor contain as a word, any held-out value. Test and validation draws are the
same under either setting.
"""

from __future__ import annotations

import random
import re

from ..profiles import TRAIN_VALUES

POOLS: dict[str, tuple[list, list]] = {
    # name: (train values, held-out test values)
    "first": (
        [
            "Alice",
            "Ben",
            "Chloe",
            "David",
            "Emma",
            "Felix",
            "Grace",
            "Henry",
            "Iris",
            "Jack",
            "Kate",
            "Liam",
            "Mia",
            "Noah",
            "Olivia",
            "Paul",
            "Quinn",
            "Rosa",
            "Sam",
            "Tara",
            "Umar",
            "Vera",
            "Will",
            "Yara",
            "Zoe",
            "Omar",
            "Lena",
            "Hugo",
        ],
        ["Aria", "Bruno", "Cleo", "Dante", "Elsa", "Finn", "Gina", "Ivan"],
    ),
    "last": (
        [
            "Chen",
            "Kim",
            "Wong",
            "Smith",
            "Garcia",
            "Patel",
            "Rossi",
            "Silva",
            "Novak",
            "Brown",
            "Lopez",
            "Khan",
            "Tanaka",
            "Dubois",
            "Berg",
        ],
        ["Ortiz", "Haddad", "Nakamura", "Fischer", "Moreau"],
    ),
    "amount": (
        [12, 15, 20, 25, 30, 35, 40, 45, 50, 60, 75, 80, 90, 100, 120, 150, 200, 250],
        [18, 27, 33, 64, 85, 140],
    ),
    "item": (
        [
            "running shoes",
            "blue t-shirt",
            "coffee mug",
            "desk lamp",
            "phone case",
            "yoga mat",
            "water bottle",
            "backpack",
            "headphones",
            "notebook",
            "umbrella",
            "wool socks",
            "sunglasses",
            "rain jacket",
            "board game",
            "tea kettle",
            "bike helmet",
            "wall clock",
        ],
        ["travel pillow", "garden gloves", "reading light", "picnic blanket", "chess set"],
    ),
    "dish": (
        [
            "margherita pizza",
            "pad thai",
            "chicken curry",
            "veggie burger",
            "sushi set",
            "caesar salad",
            "beef tacos",
            "ramen bowl",
            "falafel wrap",
            "pasta carbonara",
        ],
        ["poke bowl", "lentil soup", "fish and chips"],
    ),
    "song": (
        [
            "Blue Morning",
            "City Lights",
            "Paper Boats",
            "Golden Hour",
            "Slow River",
            "Night Drive",
            "Summer Rain",
            "Open Road",
            "Quiet Storm",
            "Northern Sky",
        ],
        ["Velvet Moon", "Silver Lining", "Echo Valley"],
    ),
    "place": (
        [
            "Central Station",
            "City Library",
            "Riverside Park",
            "Old Town Square",
            "Airport",
            "Science Museum",
            "Harbor Market",
            "Main Street Cafe",
            "Sports Arena",
            "Botanic Garden",
        ],
        ["Lakeside Pier", "Art Gallery", "Union Bridge"],
    ),
    "album": (
        ["Holiday 2024", "Family", "Screenshots", "Beach Trip", "Birthday", "Receipts", "Pets", "Hiking"],
        ["Wedding", "Garden", "Road Trip"],
    ),
    "subject": (
        [
            "Team meeting",
            "Invoice April",
            "Trip plan",
            "Lunch on Friday",
            "Project update",
            "Weekend plans",
            "Book club",
            "Rent reminder",
        ],
        ["Quarterly report", "Flight details", "Dinner party"],
    ),
    "time": (["9:00", "10:30", "12:00", "13:30", "15:00", "18:00", "19:30"], ["8:15", "16:45", "20:15"]),
    "day": (["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"], ["Saturday", "Sunday"]),
    "size": (["S", "M", "L"], ["XL"]),
    "note": (
        [
            "running late",
            "on my way",
            "see you soon",
            "call me later",
            "thanks a lot",
            "happy birthday",
            "meeting moved",
        ],
        ["dinner is ready", "got the tickets"],
    ),
}


HELD_OUT_WORDS = [str(v) for pool, (_, test) in POOLS.items() for v in test if pool not in ("amount", "time")]
_HELD_OUT_RE = re.compile(
    r"(?<![\w])(" + "|".join(re.escape(w) for w in sorted(HELD_OUT_WORDS, key=len, reverse=True)) + r")(?![\w])",
    re.IGNORECASE,
)
FIXED_SHARE = 0.25  # share of procedural training values still drawn from the fixed train pools

# pieces of the procedural pools; none of them is, or composes into, a held-out value (checked on draw)
_ONSETS = [
    "b",
    "br",
    "c",
    "ch",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "j",
    "k",
    "kl",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "sh",
    "st",
    "t",
    "th",
    "tr",
    "v",
    "w",
    "y",
    "z",
]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ie", "ou"]
_CODAS = ["", "", "", "", "n", "r", "l", "s", "m", "t", "nd", "rk", "ss", "x"]
_ADJ = [
    "red",
    "blue",
    "green",
    "black",
    "white",
    "small",
    "large",
    "leather",
    "wooden",
    "steel",
    "cotton",
    "linen",
    "travel",
    "kitchen",
    "desk",
    "wool",
    "silk",
    "folding",
    "portable",
    "electric",
    "vintage",
    "striped",
    "bamboo",
    "glass",
    "canvas",
    "mini",
    "reading",
    "picnic",
    "camping",
    "chess",
    "garden",
]
_NOUNS = [
    "lamp",
    "mug",
    "bag",
    "chair",
    "scarf",
    "kettle",
    "clock",
    "pen",
    "jacket",
    "hat",
    "towel",
    "speaker",
    "charger",
    "bottle",
    "basket",
    "mirror",
    "pillow",
    "blanket",
    "gloves",
    "set",
    "light",
    "tray",
    "stool",
    "wallet",
    "vase",
    "candle",
    "rug",
    "apron",
    "belt",
    "cushion",
    "notepad",
    "shelf",
    "board",
    "tent",
]
_DISH_ADJ = [
    "spicy",
    "grilled",
    "fried",
    "vegan",
    "crispy",
    "smoked",
    "garlic",
    "lemon",
    "honey",
    "sweet",
    "hot",
    "mushroom",
    "lentil",
    "chicken",
    "beef",
    "tofu",
    "shrimp",
    "fish",
    "veggie",
    "poke",
]
_DISH = [
    "noodles",
    "rice",
    "salad",
    "soup",
    "wrap",
    "curry",
    "bowl",
    "burger",
    "pizza",
    "tacos",
    "pie",
    "stew",
    "sandwich",
    "dumplings",
    "pasta",
    "risotto",
    "skewers",
    "chips",
    "omelette",
]
_TITLE_A = [
    "Blue",
    "Silent",
    "Golden",
    "Wild",
    "Electric",
    "Broken",
    "Hidden",
    "Crimson",
    "Lonely",
    "Endless",
    "Silver",
    "Velvet",
    "Paper",
    "Morning",
    "Northern",
    "Summer",
    "Quiet",
    "Echo",
    "Neon",
    "Falling",
]
_TITLE_B = [
    "Moon",
    "River",
    "Heart",
    "Sky",
    "Road",
    "Fire",
    "Dream",
    "Valley",
    "Lining",
    "Light",
    "Rain",
    "Waves",
    "Stars",
    "Storm",
    "Boats",
    "Lights",
    "Hour",
    "Drive",
    "Song",
    "Shadows",
]
_PLACE_A = [
    "North",
    "Old",
    "Grand",
    "Lakeside",
    "Hill",
    "River",
    "Central",
    "West",
    "Union",
    "Harbor",
    "East",
    "Maple",
    "Oak",
    "Market",
    "King",
    "Station",
    "Park",
    "Castle",
    "Bay",
    "Art",
]
_PLACE_B = [
    "Station",
    "Library",
    "Park",
    "Square",
    "Museum",
    "Market",
    "Cafe",
    "Arena",
    "Pier",
    "Bridge",
    "Gallery",
    "Hall",
    "Tower",
    "Theatre",
    "Plaza",
    "Stadium",
    "Bakery",
    "Clinic",
    "School",
    "Harbor",
]
_ALBUM = [
    "Summer",
    "Winter",
    "Paris",
    "Camping",
    "Graduation",
    "Concert",
    "Kids",
    "Work",
    "Party",
    "Lake",
    "Snow",
    "Friends",
    "Baby",
    "Museum",
    "Cats",
    "Dogs",
    "Food",
    "City",
    "Roadtrip",
    "Spring",
    "Trip",
    "Beach",
]
_SUBJ_A = [
    "Budget",
    "Team",
    "Client",
    "Trip",
    "Lunch",
    "Quarterly",
    "Flight",
    "School",
    "Project",
    "Weekly",
    "Sales",
    "Holiday",
    "Office",
    "Family",
    "Contract",
    "Party",
    "Dinner",
    "Garden",
    "Launch",
]
_SUBJ_B = [
    "review",
    "notes",
    "details",
    "party",
    "report",
    "update",
    "plan",
    "invite",
    "agenda",
    "draft",
    "reminder",
    "photos",
    "budget",
    "schedule",
    "summary",
    "tickets",
]
_NOTE_WORDS = [
    "see you",
    "call me",
    "running late",
    "on my way",
    "bring",
    "got",
    "thanks for",
    "dinner",
    "lunch",
    "the tickets",
    "at noon",
    "tomorrow",
    "is ready",
    "tonight",
    "the keys",
    "soon",
    "later",
    "all set",
    "love you",
    "happy",
    "birthday",
    "meeting",
    "moved",
    "coffee",
    "the car",
    "is here",
    "done",
    "no rush",
    "good luck",
    "well done",
    "the kids",
    "home",
    "early",
    "at six",
    "by train",
    "cake",
    "milk",
    "the report",
    "sent",
    "lost",
    "found",
    "it",
    "please",
    "back",
]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _syllables(rng: random.Random, lo: int, hi: int) -> str:
    while True:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(lo, hi))
        )
        if 3 <= len(word) <= 9:
            return word[:1].upper() + word[1:]


def _composed(pool: str, rng: random.Random):
    """One value of an open-ended pool (the training side of `pool`)."""
    c = rng.choice
    if pool == "first":
        return _syllables(rng, 1, 2)
    if pool == "last":
        return _syllables(rng, 2, 3)
    if pool == "amount":
        return rng.choice([rng.randint(2, 99), rng.randint(100, 999), rng.randint(1000, 4999)])
    if pool == "item":
        return f"{c(_ADJ)} {c(_NOUNS)}"
    if pool == "dish":
        return f"{c(_DISH_ADJ)} {c(_DISH)}" if rng.random() < 0.8 else f"{c(_DISH_ADJ)} {c(_DISH)} and {c(_DISH)}"
    if pool == "song":
        return f"{c(_TITLE_A)} {c(_TITLE_B)}" if rng.random() < 0.8 else f"The {c(_TITLE_A)} {c(_TITLE_B)}"
    if pool == "place":
        return f"{c(_PLACE_A)} {c(_PLACE_B)}"
    if pool == "album":
        return (
            c(_ALBUM)
            if rng.random() < 0.4
            else c([f"{c(_ALBUM)} {rng.randint(2015, 2026)}", f"{c(_ALBUM)} {c(_ALBUM)}"])
        )
    if pool == "subject":
        return f"{c(_SUBJ_A)} {c(_SUBJ_B)}"
    if pool == "note":
        return " ".join(rng.sample(_NOTE_WORDS, rng.randint(2, 3)))
    if pool == "time":
        return f"{rng.randint(6, 22)}:{rng.choice(range(0, 60, 5)):02d}"
    if pool == "day":
        return c(POOLS["day"][0]) if rng.random() < 0.5 else f"{c(_MONTHS)} {rng.randint(1, 28)}"
    return c(POOLS[pool][0])


def is_held_out(pool: str, value) -> bool:
    """Whether `value` is, or contains as a word, a held-out value (amounts and times: equal to one)."""
    if pool in ("amount", "time"):
        return value in POOLS[pool][1]
    return value in POOLS[pool][1] or bool(_HELD_OUT_RE.search(str(value)))


def procedural(pool: str, rng: random.Random, exclude=()):
    """A training value of `pool`: from the fixed train pool with probability FIXED_SHARE, else composed;
    never a held-out value."""
    while True:
        value = rng.choice(POOLS[pool][0]) if rng.random() < FIXED_SHARE else _composed(pool, rng)
        if value not in exclude and not is_held_out(pool, value):
            return value


def check_train_values(train_values: str) -> str:
    if train_values not in TRAIN_VALUES:
        raise ValueError(f"train_values must be one of {', '.join(TRAIN_VALUES)}, got {train_values!r}")
    return train_values


class Values:
    """Draws slot values for one task from the train or the held-out pools (test and validation:
    validation tasks are other draws from the test distribution, used only to choose checkpoints)."""

    def __init__(self, rng: random.Random, split: str, train_values: str = "fixed"):
        if split not in ("train", "test", "validation"):
            raise ValueError(f"split must be train, test or validation, got {split!r}")
        self.rng, self.split = rng, split
        # procedural draws for training tasks only: held-out splits take the fixed code path either way
        self.procedural = check_train_values(train_values) == "procedural" and split == "train"

    def pick(self, pool: str, k: int = 1, exclude=()):
        if self.procedural:
            chosen: list = []
            while len(chosen) < k:
                chosen.append(procedural(pool, self.rng, exclude=[*exclude, *chosen]))
            return chosen[0] if k == 1 else chosen
        train, test = POOLS[pool]
        values = [v for v in (train if self.split == "train" else test) if v not in exclude]
        chosen = self.rng.sample(values, k)
        return chosen[0] if k == 1 else chosen

    def others(self, pool: str, k: int, exclude=()) -> list:
        """Distractor values: drawn from both pools, as a real screen shows anything (procedural
        training: half of them composed as the training values are)."""
        train, test = POOLS[pool]
        if self.procedural:
            out: list = []
            while len(out) < k:
                value = procedural(pool, self.rng) if self.rng.random() < 0.5 else self.rng.choice(train + test)
                if value not in exclude and value not in out:
                    out.append(value)
            return out
        values = [v for v in train + test if v not in exclude]
        return self.rng.sample(values, k)

    def person(self, exclude=()) -> str:
        while True:
            name = f"{self.pick('first')} {self.pick('last')}"
            if name not in exclude:
                return name

    def people(self, k: int, exclude=()) -> list[str]:
        out: list[str] = []
        while len(out) < k:
            if self.procedural and self.chance(0.5):
                name = f"{procedural('first', self.rng)} {procedural('last', self.rng)}"
            else:
                name = f"{self.others('first', 1)[0]} {self.others('last', 1)[0]}"
            if name not in out and name not in exclude:
                out.append(name)
        return out

    def shuffled(self, items: list) -> list:
        items = list(items)
        self.rng.shuffle(items)
        return items

    def chance(self, p: float) -> bool:
        return self.rng.random() < p
