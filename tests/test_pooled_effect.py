"""A training effect pooled over seeds: Newcombe's interval against the published values, seeds' counts
pooled, and each CPU kind reported on its own."""

import pytest

from inquire_lib.evaluation.pooled import newcombe, pooled_effect


@pytest.mark.parametrize(
    "k1, n1, k2, n2, lo, hi",
    [
        # Newcombe (1998), Statistics in Medicine 17:873-890, table II, method 10
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (6, 7, 2, 7, 0.0582, 0.8062),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (0, 10, 0, 20, -0.1611, 0.2775),
    ],
)
def test_the_difference_interval_is_newcombes(k1, n1, k2, n2, lo, hi):
    out = newcombe(k1, n1, k2, n2)
    assert out["diff"] == pytest.approx(k1 / n1 - k2 / n2)
    # the table rounds to 4 places with z = 1.959964; the workbench's intervals use z = 1.96
    assert out["lo"] == pytest.approx(lo, abs=1e-4) and out["hi"] == pytest.approx(hi, abs=1e-4)
    assert out["excludes_zero"] == (lo > 0)
    assert newcombe(1, 2, 0, 0)["diff"] is None


def _metrics(name, k, n, kind=None):
    body = {"checkpoint": name, "overall": {"inquiry_recall": {"value": k / n, "k": k, "n": n}}}
    return body | ({"manifest": {"device": {"cpu_kind": kind}}} if kind else {})


def test_seeds_are_pooled_and_each_cpu_kind_stands_apart():
    # avx512: three GRPO seeds 20/25 + 18/22 + 18/23 = 56/70 from a start at 48/80: Newcombe's first example
    starts = [_metrics("sft_weak", 48, 80, "avx512"), _metrics("sft_weak", 9, 30, "avx2")]
    trained = [
        _metrics("grpo_weak_s0", 20, 25, "avx512"),
        _metrics("grpo_weak_s1", 18, 22, "avx512"),
        _metrics("grpo_weak_s2", 18, 23, "avx512"),
        _metrics("grpo_weak_s0", 14, 20, "avx2"),
        _metrics("grpo_weak_s1", 13, 20, "avx2"),
        _metrics("grpo_weak_s0", 3, 10),
    ]  # no manifest: a kind of its own
    out = pooled_effect(starts, trained)
    assert out["rate"] == "inquiry_recall" and "Newcombe" in out["interval"]
    kinds = out["by_cpu_kind"]
    assert list(kinds) == ["avx2", "avx512", "unknown"]
    a = kinds["avx512"]
    assert (a["trained"]["k"], a["trained"]["n"], a["start"]["k"], a["start"]["n"]) == (56, 70, 48, 80)
    assert a["diff"] == pytest.approx(0.2)
    assert a["lo"] == pytest.approx(0.0524, abs=1e-4) and a["hi"] == pytest.approx(0.3339, abs=1e-4)
    assert a["excludes_zero"] and [r["k"] for r in a["runs"]["trained"]] == [20, 18, 18]
    # avx2: 27/40 against 9/30, i.e. 0.675 - 0.3
    b = kinds["avx2"]
    assert b["diff"] == pytest.approx(0.375) and b["diff"] == pytest.approx(newcombe(27, 40, 9, 30)["diff"])
    assert (b["lo"], b["hi"]) == (newcombe(27, 40, 9, 30)["lo"], newcombe(27, 40, 9, 30)["hi"])
    # runs that name no kind have no start to compare with
    u = kinds["unknown"]
    assert u["diff"] is None and u["trained"]["k"] == 3 and u["start"]["n"] == 0


def test_a_rate_the_metrics_do_not_count_is_refused():
    with pytest.raises(KeyError, match="no counts for 'isr'"):
        pooled_effect([_metrics("sft_weak", 1, 2)], [], rate="isr")


def test_the_kind_a_metrics_file_names_itself_comes_first():
    from inquire_lib.evaluation.pooled import cpu_kind_of

    own = {"device": {"cpu_kind": "avx2"}, "manifest": {"device": {"cpu_kind": "avx512_bf16"}}}
    assert cpu_kind_of(own) == "avx2"
    assert cpu_kind_of({"manifest": {"device": {"cpu_kind": "amx"}}}) == "amx"
    assert cpu_kind_of({}) == "unknown"


def test_a_stage_effect_is_stated_on_each_rate():
    from inquire_lib.evaluation.pooled import STAGE_RATES, stage_effects
    from inquire_lib.viz import plots

    def step(name, isr, needless, safe):
        counts = lambda k, n: {"value": k / n, "k": k, "n": n}
        overall = {
            "inquiry_recall": counts(*isr),
            "needless_rate": counts(*needless),
            "safe_step_accuracy": counts(*safe),
        }
        return {"checkpoint": name, "device": {"cpu_kind": "avx512_bf16"}, "overall": overall}

    start = step("sft_weak", (9, 30), (1, 100), (80, 100))
    seeds = [step("grpo_weak", (14, 20), (3, 100), (78, 100)), step("grpo_weak_s1", (13, 20), (5, 100), (79, 100))]
    effects = stage_effects(start, seeds)
    assert list(effects) == list(STAGE_RATES)
    isr = effects["inquiry_recall"]["by_cpu_kind"]["avx512_bf16"]
    assert isr["diff"] == pytest.approx(27 / 40 - 9 / 30) and isr["excludes_zero"]
    needless = effects["needless_rate"]["by_cpu_kind"]["avx512_bf16"]
    assert (needless["trained"]["k"], needless["trained"]["n"]) == (8, 200)
    table = plots.pooled_table({"grpo_weak": effects})
    row = table.loc[("grpo_weak", "step ISR", "avx512_bf16")]
    assert row["runs"] == 2 and bool(row["excludes 0"])
    assert row["change, points (95%)"].startswith("+37.5 (")
    assert row["trained, seeds pooled"].endswith(" 27/40") and row["start"].endswith(" 9/30")
