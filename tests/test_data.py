"""InquireBench as HF datasets: determinism, stats, columns, gold fields, atomic saving, caching."""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pytest
from PIL import Image

from inquire_lib.data import benchmark as data
from inquire_lib.agent.actions import Action
from inquire_lib.agent.taxonomy import CATEGORIES, SAFE, category_of, subcategories
from inquire_lib.profiles import get_profile
from inquire_lib.world.apps import SCREEN_H, SCREEN_W
from inquire_lib.world.tasks import generate_task

NO_BBOX = [-1, -1, -1, -1]
COLUMNS = [
    "id",
    "task_id",
    "step",
    "num_steps",
    "app",
    "template",
    "category",
    "subcategory",
    "instruction",
    "history",
    "screenshot",
    "prev_screenshot",
    "a11y",
    "gold_action",
    "gold_bbox",
    "gold_think",
    "inquiry_required",
    "inquiry_reason",
    "user_reply",
]


@pytest.fixture(scope="module")
def dd() -> datasets.DatasetDict:
    return data.build_dataset(7, 60)


def test_same_seed_same_fingerprint_other_seed_differs(dd):
    again = data.build_dataset(7, 60)
    fp = data.fingerprint(dd)
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert data.fingerprint(again) == fp
    assert dd["train"]["gold_think"] == again["train"]["gold_think"]
    assert data.fingerprint(data.build_dataset(8, 60)) != fp


def test_fingerprint_sees_one_changed_field(dd):
    fp = data.fingerprint(dd)
    changed = datasets.DatasetDict(dd)
    changed["test"] = dd["test"].map(
        lambda r, i: {"instruction": r["instruction"] + ("!" if i == 3 else "")}, with_indices=True
    )
    assert data.fingerprint(changed) != fp
    assert data.fingerprint(dd) == fp  # the original is untouched


def test_split_sizes():
    assert data.split_sizes(60) == {"train": 48, "test": 12}
    assert data.split_sizes(88) == {"train": 70, "test": 18}
    assert data.split_sizes(2) == {"train": 1, "test": 1}


def test_stats_cover_the_taxonomy(dd):
    st = data.stats(dd)
    train, test = st["train"], st["test"]
    assert (train["tasks"], test["tasks"]) == (48, 12)
    # 48 consecutive tasks: 24 safe controls and 24 inquiry tasks cycling over all 22 sub-categories
    assert train["n_categories"] == 5 and train["n_subcategories"] == 22
    assert train["safe_tasks"] == 24 and train["categories"]["safe"] == 24
    assert set(train["categories"]) == set(CATEGORIES) | {SAFE}
    assert set(train["subcategories"]) == set(subcategories()) | {SAFE}
    assert sum(train["subcategories"].values()) == 48
    assert sum(train["categories"].values()) == 48
    assert train["inquiry_steps"] == 24  # one inquiry step per inquiry task
    assert test["n_subcategories"] == 6 and test["safe_tasks"] == 6 and test["inquiry_steps"] == 6
    assert train["steps"] == len(dd["train"]) and test["steps"] == len(dd["test"])
    assert train["steps"] > 4 * train["tasks"] and train["templates"] <= 3 * (22 + 11)


def test_any_44_consecutive_tasks_cover_all_subcategories():
    for split in ("train", "test"):
        for start in (0, 1, 13, 101):
            subs = {
                generate_task(random.Random(f"x:{split}:{i}"), split, f"t{i}", i).subcategory
                for i in range(start, start + 44)
            }
            assert subs == set(subcategories()) | {SAFE}, (split, start)


def test_columns_and_features(dd):
    for split in ("train", "test"):
        ds = dd[split]
        assert ds.column_names == COLUMNS
        assert ds.features == data.FEATURES
        assert isinstance(ds.features["screenshot"], datasets.Image)
        a11y = ds.features["a11y"].feature
        assert set(a11y) == {"id", "role", "text", "detail", "bbox"}
    assert (len({*dd["train"]["task_id"]}), len({*dd["test"]["task_id"]})) == (48, 12)
    assert all(t.startswith("train-7-") for t in dd["train"]["task_id"])
    assert all(t.startswith("test-7-") for t in dd["test"]["task_id"])


def test_rows_of_a_task(dd):
    ds = dd["train"]
    tid = ds[0]["task_id"]
    rows = [r for r in ds if r["task_id"] == tid]
    assert [r["step"] for r in rows] == list(range(len(rows)))
    assert all(r["num_steps"] == len(rows) and r["id"] == f"{tid}/{r['step']}" for r in rows)
    assert rows[0]["prev_screenshot"] is None and rows[0]["history"] == []
    for prev, row in zip(rows, rows[1:]):
        assert len(row["history"]) == row["step"]
        assert row["prev_screenshot"].tobytes() == prev["screenshot"].tobytes()
    shot = rows[0]["screenshot"]
    assert isinstance(shot, Image.Image) and shot.size == (SCREEN_W, SCREEN_H) and shot.mode == "RGB"
    assert json.loads(rows[0]["gold_action"])["action"] == "open"
    assert json.loads(rows[-1]["gold_action"])["action"] == "terminate"


def test_gold_fields(dd):
    n_click = n_inquiry = 0
    for split in ("train", "test"):
        ds = dd[split].remove_columns(["screenshot", "prev_screenshot"])  # no image decoding
        for r in ds:
            assert r["category"] == category_of(r["subcategory"])
            gold = Action.from_arguments(json.loads(r["gold_action"]))
            bbox = r["gold_bbox"]
            for el in r["a11y"]:
                x0, y0, x1, y1 = el["bbox"]
                assert 0 <= x0 < x1 <= SCREEN_W and 0 <= y0 < y1 <= SCREEN_H
            if gold.type == "click":
                n_click += 1
                x0, y0, x1, y1 = bbox
                assert 0 <= x0 < x1 <= SCREEN_W and 0 <= y0 < y1 <= SCREEN_H
                assert x0 <= gold.coordinate[0] <= x1 and y0 <= gold.coordinate[1] <= y1
                assert bbox in [el["bbox"] for el in r["a11y"]]
            else:
                assert bbox == NO_BBOX
            assert gold.type == "call_user" if r["inquiry_required"] else gold.type != "call_user"
            if r["inquiry_required"]:
                n_inquiry += 1
                assert r["category"] != SAFE and gold.text
                assert r["inquiry_reason"].endswith(f"({r['category']}/{r['subcategory']})")
                assert r["user_reply"] and "Inquiry check: needed" in r["gold_think"]
            else:
                assert r["inquiry_reason"] == "" and r["user_reply"] == ""
                assert "Inquiry check: not needed" in r["gold_think"]
    # one inquiry step per inquiry task (30 of the 60), and clicks on most steps
    assert n_inquiry == 30 and n_click > 100


def test_save_and_load_roundtrip(dd, tmp_path):
    out = data.save_dataset(dd, tmp_path / "bench")
    assert out == tmp_path / "bench"
    meta = json.loads((out / "inquirebench.json").read_text())
    assert meta["fingerprint"] == data.fingerprint(dd)
    assert meta["stats"]["train"]["tasks"] == 48
    assert data.fingerprint(datasets.load_from_disk(str(out))) == meta["fingerprint"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]  # no temp folder left


def test_save_dataset_is_atomic(dd, tmp_path, monkeypatch):
    def broken_save(self, path, *args, **kwargs):
        """Write part of the dataset, then fail as a full disk would."""
        (tmp_path / "marker").write_text("")  # proves the patched writer ran
        (Path(path) / "train").mkdir(parents=True, exist_ok=True)
        (Path(path) / "train" / "half.arrow").write_bytes(b"\0" * 100)
        raise OSError("disk full")

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", broken_save)
    with pytest.raises(OSError, match="disk full"):
        data.save_dataset(dd, tmp_path / "bench")
    assert (tmp_path / "marker").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker"]  # nothing half-written

    # an existing dataset survives a failed overwrite
    monkeypatch.undo()
    data.save_dataset(dd, tmp_path / "bench")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "bench").rglob("*"))
    monkeypatch.setattr(data, "fingerprint", lambda _dd: (_ for _ in ()).throw(RuntimeError("interrupted")))
    with pytest.raises(RuntimeError, match="interrupted"):
        data.save_dataset(dd, tmp_path / "bench")
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "bench").rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench", "marker"]


def test_load_or_build_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    first = data.load_or_build(2, 6)
    path = data.dataset_dir(2, 6)
    assert (
        path.parent == tmp_path / "data"
        and path.name == f"inquirebench-s2-n6-{data.data_key(2, 6, 'fixed', split='benchmark')}"
    )
    assert (path / "inquirebench.json").exists()
    assert {k: len(v) for k, v in first.items()} == {"train": len(first["train"]), "test": len(first["test"])}

    def no_build(*_a, **_k):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(data, "build_dataset", no_build)
    again = data.load_or_build(2, 6)
    assert (
        data.fingerprint(again)
        == data.fingerprint(first)
        == json.loads((path / "inquirebench.json").read_text())["fingerprint"]
    )


def test_validation_split_is_drawn_like_test_but_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    val = data.load_or_build_validation(2, 10)
    [folder] = (tmp_path / "data").glob("inquirebench-s2-validation-n10-*")
    assert (folder / "dataset_info.json").exists()
    assert val.features == data.FEATURES and len(set(val["task_id"])) == 10
    assert all(t.startswith("validation-2-") for t in val["task_id"])
    test = data.build_dataset(2, 50)["test"]
    assert not set(val["task_id"]) & set(test["task_id"])
    # other draws than the test split's: the instructions differ although the pools are the same
    assert set(val["instruction"]) != set(test["instruction"][: len(val)])
    # the same 22-sub-category cycle as the other splits, safe controls at odd indices
    tasks = data.generate_tasks(2, "validation", 10)
    assert [t.category == SAFE for t in tasks] == [i % 2 == 1 for i in range(10)]
    # cached: a second call does not rebuild, and returns the same rows
    monkeypatch.setattr(data, "build_validation", lambda *_: (_ for _ in ()).throw(AssertionError("rebuilt")))
    assert data.load_or_build_validation(2, 10)["id"] == val["id"]


def test_validation_records_hold_the_profiles_inquiry_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    profile = get_profile("smoke").replace(val_tasks=4, val_inquiry_steps=5)
    records = data.validation_records(profile)
    main, probes = [r for r in records if not r.get("probe")], [r for r in records if r.get("probe")]
    assert [r["id"] for r in main] == list(data.load_or_build_validation(profile.seed, 4)["id"])
    assert sum(r["inquiry_required"] for r in main) == 2  # safe controls at odd indices
    assert len(probes) == 3 and all(r["inquiry_required"] for r in probes)
    # the validation split's tasks 4, 6, 8: its next inquiry tasks, drawn like the others
    assert [r["task_id"] for r in probes] == [f"validation-{profile.seed}-{i:05d}" for i in (4, 6, 8)]
    assert data.inquiry_probes(profile.seed, "validation", 4, 0) == []


def test_validation_tasks_use_held_out_values_and_phrasings():
    from inquire_lib.world.values import Values

    with pytest.raises(ValueError, match="train, test or validation"):
        Values(random.Random(0), "dev")
    templates = {
        generate_task(random.Random(f"inquirebench:0:validation:{i}"), "validation", f"v{i}", i).template
        for i in range(0, 400, 2)
    }
    assert any(t.endswith(":3") for t in templates)  # the phrasing held out of training appears


# ------------------------------------------------------------------- train_values
# fingerprints of build_dataset(7, 60) taken before train_values existed: the default must not move
FIXED_7_60 = {"all": "c312df88948221a3", "train": "fd8f45a61c690c33", "test": "6819030ae6f13681"}


def _split_fp(dd, split: str) -> str:
    return data.fingerprint(datasets.DatasetDict({split: dd[split]}))


def test_default_build_is_unchanged(dd):
    assert data.fingerprint(dd) == FIXED_7_60["all"]
    assert {s: _split_fp(dd, s) for s in ("train", "test")} == {s: FIXED_7_60[s] for s in ("train", "test")}
    assert data.fingerprint(data.build_dataset(7, 60, "fixed")) == FIXED_7_60["all"]


def test_procedural_build_changes_only_the_training_split(dd):
    proc = data.build_dataset(7, 60, "procedural")
    assert _split_fp(proc, "test") == FIXED_7_60["test"]
    assert _split_fp(proc, "train") != FIXED_7_60["train"]
    tasks = lambda ds: dict(zip(ds["task_id"], ds["template"]))  # noqa: E731 (steps per task may differ)
    assert tasks(proc["train"]) == tasks(dd["train"])
    assert proc["train"]["instruction"] != dd["train"]["instruction"]
    with pytest.raises(ValueError, match="train_values"):
        data.build_dataset(7, 2, "composed")


def test_each_train_values_has_a_cache_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("INQUIRE_CACHE", str(tmp_path))
    fixed, proc = data.load_or_build(2, 6), data.load_or_build(2, 6, "procedural")
    names = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert names == sorted(data.dataset_dir(2, 6, values).name for values in ("fixed", "procedural"))
    assert len(set(names)) == 2 and all(n.startswith("inquirebench-s2-n6-") for n in names)
    assert fixed["train"]["instruction"] != proc["train"]["instruction"]
    assert fixed["test"]["instruction"] == proc["test"]["instruction"]
    monkeypatch.setattr(data, "build_dataset", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("rebuilt")))
    assert data.load_or_build(2, 6, "procedural")["train"]["instruction"] == proc["train"]["instruction"]


def test_benchmark_and_training_tasks_follow_the_profile(monkeypatch):
    from inquire_lib.profiles import apply_overrides
    from inquire_lib.training.dagger import round_tasks

    seen = []
    monkeypatch.setattr(data, "load_or_build", lambda *a: seen.append(a))
    smoke = apply_overrides("smoke", {"train_values": "procedural"})
    data.benchmark(smoke)
    data.benchmark(apply_overrides("smoke", {}))
    assert seen == [(0, 36, "procedural"), (0, 36, "fixed")]
    assert round_tasks(smoke, 1, 2) == data.generate_tasks(0, "train", 2, "procedural")
    assert round_tasks(smoke, 1, 2) != data.generate_tasks(0, "train", 2)


def test_the_generator_is_the_code_that_makes_the_data():
    modules = data.generator_modules()
    for made_by in ("world.tasks", "world.values", "world.render", "world.expert", "agent.taxonomy", "data.benchmark"):
        assert f"inquire_lib.{made_by}" in modules
    # what reads the data but does not make it is not in it: an edit there keeps every cache
    for reader in ("agent.rewards", "agent.prompts", "evaluation.steps", "training.sft", "profiles"):
        assert f"inquire_lib.{reader}" not in modules


def test_a_change_to_the_generators_code_names_new_data_caches(tmp_path):
    before = data.dataset_dir(2, 6).name
    package = tmp_path / "inquire_lib"
    for module in data.generator_modules():
        src = data.module_file(data.Path(data.__file__).resolve().parents[1], module)
        dest = data.module_file(package, module)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
    edited = data.module_file(package, "inquire_lib.world.render")
    edited.write_text(edited.read_text() + "\n# an edit\n")
    original = data.__file__
    data.__file__ = str(data.module_file(package, "inquire_lib.data.benchmark"))
    data.generator_key.cache_clear()
    try:
        assert data.generator_modules() == tuple(sorted(set(data.generator_modules())))
        after = data.dataset_dir(2, 6).name
    finally:
        data.__file__ = original
        data.generator_key.cache_clear()
    assert after.startswith("inquirebench-s2-n6-") and after != before
    assert data.dataset_dir(2, 6).name == before
