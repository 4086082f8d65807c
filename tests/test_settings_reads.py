"""Each function that names one stage's settings class reads only that class's fields and hands the settings on
only to functions that take that class or a base of it (`tools/settings_reads.py`, read from the source)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import settings_reads  # noqa: E402

from inquire_lib.profiles import (  # noqa: E402
    SETTINGS,
    DataSettings,
    EvalSettings,
    ModelSettings,
    Profile,
    SFTSettings,
    fields_affecting,
)


def test_the_library_reads_no_setting_beyond_the_class_it_names():
    lib = settings_reads.Library()
    assert settings_reads.violations(lib) == []
    # and none takes more than it reads: `python tools/settings_reads.py --apply` names the class
    assert [f"{p.module}:{p.function} could take {cls}" for p, cls in settings_reads.candidates(lib)] == []
    narrow = [p for p in lib.params if p.annotation not in ("", "Profile")]
    assert len(narrow) >= 100  # what `--apply` narrowed; a new function names its class or takes the profile
    assert {p.annotation for p in narrow} >= {"ModelSettings", "DataSettings", "EvalSettings", "GRPOSettings"}


def test_a_profile_is_every_stages_settings_and_their_fields_part_it():
    assert all(issubclass(Profile, c) for c in SETTINGS)
    own = [
        set(c.__dataclass_fields__) - {f for b in c.__mro__[1:] for f in getattr(b, "__dataclass_fields__", {})}
        for c in SETTINGS
    ]
    every = {f.name for f in dataclasses.fields(Profile)}
    assert sum(map(len, own)) == len(set().union(*own)) == len(every) and set().union(*own) == every  # each in one
    assert issubclass(SFTSettings, ModelSettings) and not issubclass(SFTSettings, EvalSettings)
    # the data's settings are every field that decides which tasks and steps a data set holds
    assert own[SETTINGS.index(DataSettings)] == set(fields_affecting("data"))
    assert (
        "max_episode_steps" in EvalSettings.__dataclass_fields__ and "sft_lr" not in EvalSettings.__dataclass_fields__
    )


def _library(tmp_path, source: str):
    pkg = tmp_path / "lib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(source)
    return settings_reads.Library(pkg)


def test_a_read_a_wider_hand_on_and_an_escape_are_each_caught(tmp_path):
    lib = _library(
        tmp_path,
        "def wide(profile: Profile): ...\n"
        "def fine(profile: ModelSettings):\n    return profile.use_think, profile.is_tiny\n"
        "def reads(profile: ModelSettings):\n    return profile.sft_lr\n"
        "def hands(profile: ModelSettings):\n    return wide(profile)\n"
        "def narrower(profile: SFTSettings):\n    return fine(profile)\n"
        "def escapes(profile: EvalSettings):\n    return [profile]\n"
        "def whole(profile):\n    return fine(profile), profile.sft_lr\n",
    )
    bad = settings_reads.violations(lib)
    assert bad == [
        "lib.m:reads(profile: ModelSettings): reads sft_lr",
        "lib.m:hands(profile: ModelSettings): line 7: hands it to lib.m:wide, which takes Profile",
        "lib.m:escapes(profile: EvalSettings): line 11: hands it on beyond the library's functions",
    ]
    whole = next(p for p in lib.params if p.function == "whole")
    assert lib.narrowest(whole) == "SFTSettings"  # reads sft_lr and hands it to a ModelSettings parameter
    wide = next(p for p in lib.params if p.function == "wide")
    assert lib.narrowest(wide) is None  # neither read nor handed on: nothing says which class


def test_no_module_name_twice_in_the_library():
    """A name names one place: no module or package of `inquire_lib` shares its name with another, in any layer."""
    root = Path(__file__).resolve().parents[1] / "inquire_lib"
    names = [p.stem for p in root.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts]
    names += [p.name for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__" and "samples" not in p.parts]
    assert sorted({n for n in names if names.count(n) > 1}) == []
