"""`tools/structure_stats.py` counts what it says on a tree it is given."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import structure_stats  # noqa: E402


def _tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_it_counts_fields_signatures_recipes_assets_and_docs_of_an_older_checkout(tmp_path):
    files = {
        "inquire_lib/profiles.py": "class Profile:\n    a: int = 1\n    b: str = 'x'\n    def f(self, profile): ...\n",
        "inquire_lib/x.py": "def g(profile, n=1):\n    def inner(*, profile=None): ...\n\ndef h(other): ...\n",
        "inquire_lib/y.py": "def k(p): ...\n",
        "inquire_lib/recipes/one.yaml": "a: 1\nb: x\n",
        "assets/w.bin": "12345",
        "docs/guide.md": "one\ntwo\n",
        "docs/lab/log.md": "a\nb\nc\n",
    }
    _tree(tmp_path, files)
    s = structure_stats.stats(tmp_path)
    assert s["profile_fields"] == 2
    assert (s["signatures_taking_the_profile"], s["files_with_such_signatures"]) == (3, 2)
    assert s["settings_code_lines"] == 4 and s["recipe_lines"] == {"one": 2}
    assert s["assets_bytes"] == 5 and s["docs_lines"] == {"lab": 3, "reference": 2}
    assert "| `Profile` fields | 2 |" in structure_stats.table(s)


def test_it_counts_each_settings_object_and_the_signatures_taking_one(tmp_path):
    files = {
        "inquire_lib/profiles/sft.py": "class SFTSettings:\n    a: int = 1\n    b: int = 2\n",
        "inquire_lib/profiles/profile.py": "class Profile(SFTSettings):\n    x = 1\n\n\ndef get(profile): ...\n",
        "inquire_lib/x.py": "def g(profile: SFTSettings): ...\ndef h(s: Profile): ...\ndef k(profile: 'Profile'): ...\n",
    }
    _tree(tmp_path, files)
    s = structure_stats.stats(tmp_path)
    assert s["settings_objects"] == {"SFTSettings": 2} and s["profile_fields"] == 2
    assert (s["signatures_taking_the_profile"], s["files_with_such_signatures"]) == (3, 2)
    assert s["signatures_taking_one_stages_settings"] == 1
    assert s["settings_code_lines"] == 3 + 5 and s["settings_module_lines"] == {"profile": 5, "sft": 3}
    assert "| fields per settings object | SFTSettings 2 |" in structure_stats.table(s)
