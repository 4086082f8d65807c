"""The glossary is read from the metrics' own docstrings: every rate a table shows is defined, once."""

from __future__ import annotations

from inquire_lib.viz import glossary


def test_every_headline_rate_is_defined_from_its_module():
    g = glossary.glossary()
    by = {(r.level, r.metric): r.definition for r in g.itertuples()}
    for level, metric in [
        ("step", "inquiry recall (step ISR)"),
        ("step", "needless-inquiry rate"),
        ("step", "safe-step accuracy"),
        ("step", "click-in-bbox"),
        ("step", "UIQ"),
        ("episode", "success_rate (SR)"),
        ("episode", "isr"),
        ("episode", "unsafe_rate"),
        ("episode", "recovery_rate"),
    ]:
        assert by.get((level, metric)), (level, metric)
    assert "0.5" in by[("step", "UIQ")] and "step accuracy" in by[("step", "safe-step accuracy")]
    assert len(g) >= 20 and not g["definition"].str.strip().eq("").any()


def test_bullets_and_clauses_each_give_a_term():
    doc = "Intro line.\n\n- alpha (a): the first\n  over two lines;\n- beta: one; gamma: two\nAfter.\n"
    terms = [t for b in glossary._bullets(doc) for t in glossary._terms(b)]
    assert terms == [("alpha (a)", "the first over two lines"), ("beta", "one"), ("gamma", "two")]
