"""What every stage's settings share: the profile's name, the model's settings and the data's."""

from __future__ import annotations

from dataclasses import dataclass

from .data import DataSettings
from .model import ModelSettings
from .run import Named


@dataclass(frozen=True)
class StageSettings(ModelSettings, DataSettings, Named):
    """The name (which names a run's folders), the model and the data: what every stage and evaluation reads."""
