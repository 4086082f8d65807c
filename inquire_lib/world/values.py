"""Slot values for task templates, split so that the test set holds out values never seen in training."""
from __future__ import annotations

import random

POOLS: dict[str, tuple[list, list]] = {
    # name: (train values, held-out test values)
    "first": (["Alice", "Ben", "Chloe", "David", "Emma", "Felix", "Grace", "Henry", "Iris", "Jack",
               "Kate", "Liam", "Mia", "Noah", "Olivia", "Paul", "Quinn", "Rosa", "Sam", "Tara",
               "Umar", "Vera", "Will", "Yara", "Zoe", "Omar", "Lena", "Hugo"],
              ["Aria", "Bruno", "Cleo", "Dante", "Elsa", "Finn", "Gina", "Ivan"]),
    "last": (["Chen", "Kim", "Wong", "Smith", "Garcia", "Patel", "Rossi", "Silva", "Novak",
              "Brown", "Lopez", "Khan", "Tanaka", "Dubois", "Berg"],
             ["Ortiz", "Haddad", "Nakamura", "Fischer", "Moreau"]),
    "amount": ([12, 15, 20, 25, 30, 35, 40, 45, 50, 60, 75, 80, 90, 100, 120, 150, 200, 250],
               [18, 27, 33, 64, 85, 140]),
    "item": (["running shoes", "blue t-shirt", "coffee mug", "desk lamp", "phone case", "yoga mat",
              "water bottle", "backpack", "headphones", "notebook", "umbrella", "wool socks",
              "sunglasses", "rain jacket", "board game", "tea kettle", "bike helmet", "wall clock"],
             ["travel pillow", "garden gloves", "reading light", "picnic blanket", "chess set"]),
    "dish": (["margherita pizza", "pad thai", "chicken curry", "veggie burger", "sushi set",
              "caesar salad", "beef tacos", "ramen bowl", "falafel wrap", "pasta carbonara"],
             ["poke bowl", "lentil soup", "fish and chips"]),
    "song": (["Blue Morning", "City Lights", "Paper Boats", "Golden Hour", "Slow River", "Night Drive",
              "Summer Rain", "Open Road", "Quiet Storm", "Northern Sky"],
             ["Velvet Moon", "Silver Lining", "Echo Valley"]),
    "place": (["Central Station", "City Library", "Riverside Park", "Old Town Square", "Airport",
               "Science Museum", "Harbor Market", "Main Street Cafe", "Sports Arena", "Botanic Garden"],
              ["Lakeside Pier", "Art Gallery", "Union Bridge"]),
    "album": (["Holiday 2024", "Family", "Screenshots", "Beach Trip", "Birthday", "Receipts", "Pets",
               "Hiking"], ["Wedding", "Garden", "Road Trip"]),
    "subject": (["Team meeting", "Invoice April", "Trip plan", "Lunch on Friday", "Project update",
                 "Weekend plans", "Book club", "Rent reminder"],
                ["Quarterly report", "Flight details", "Dinner party"]),
    "time": (["9:00", "10:30", "12:00", "13:30", "15:00", "18:00", "19:30"], ["8:15", "16:45", "20:15"]),
    "day": (["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"], ["Saturday", "Sunday"]),
    "size": (["S", "M", "L"], ["XL"]),
    "note": (["running late", "on my way", "see you soon", "call me later", "thanks a lot",
              "happy birthday", "meeting moved"], ["dinner is ready", "got the tickets"]),
}


class Values:
    """Draws slot values for one task from the train or the held-out pools (test and validation:
    validation tasks are other draws from the test distribution, used only to choose checkpoints)."""

    def __init__(self, rng: random.Random, split: str):
        if split not in ("train", "test", "validation"):
            raise ValueError(f"split must be train, test or validation, got {split!r}")
        self.rng, self.split = rng, split

    def pick(self, pool: str, k: int = 1, exclude=()):
        train, test = POOLS[pool]
        values = [v for v in (train if self.split == "train" else test) if v not in exclude]
        chosen = self.rng.sample(values, k)
        return chosen[0] if k == 1 else chosen

    def others(self, pool: str, k: int, exclude=()) -> list:
        """Distractor values: drawn from both pools, as a real screen shows anything."""
        train, test = POOLS[pool]
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
