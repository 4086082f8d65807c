"""A profile's ablation grid (`profiles.ABLATION_GRIDS`): the variants outside it are skipped with the reason."""

from __future__ import annotations

from inquire_lib import ablations
from inquire_lib.profiles import ABLATION_GRIDS, get_profile


def test_quick_runs_its_two_points_and_names_why_it_skips_the_rest():
    quick = get_profile("quick")
    runs = [v for v in ablations.RUN_ORDER if not ablations.skip_reason(quick, v)]
    assert runs == ["sft_baseline", "sft_weak_share"] == list(ABLATION_GRIDS["quick"])
    why = ablations.skip_reason(quick, "chain_task")
    assert why.startswith("outside the quick profile's grid (sft_baseline, sft_weak_share;")
    # at the stage's own budget both points are the recipe's stages (shipped), never trained again
    assert quick.ablation_sft_steps == quick.sft_steps
    assert [ablations.is_stage(quick, ablations.VARIANTS[v], 0) for v in runs] == [True, True]
    assert [ablations.VARIANTS[v].stage for v in runs] == ["sft_full", "sft_weak"]
    assert not ablations.is_stage(quick, ablations.VARIANTS["sft_baseline"], 1)  # another seed trains
    assert not ablations.is_stage(get_profile("cpu"), ablations.VARIANTS["sft_baseline"], 0)  # a shorter budget
    # every grid names known variants, each reference of a grid's variants is in the grid too
    for grid in ABLATION_GRIDS.values():
        assert set(grid) <= set(ablations.VARIANTS)
        assert {ablations.VARIANTS[v].reference for v in grid} <= set(grid)


def test_a_profile_without_a_grid_runs_every_variant_it_can_express():
    cpu = get_profile("cpu")
    assert "cpu" not in ABLATION_GRIDS
    skipped = {v for v in ablations.VARIANTS if ablations.skip_reason(cpu, v)}
    assert skipped == {"sft_no_prev_screenshot", "sft_full_weights"}  # the cpu profile's own settings
