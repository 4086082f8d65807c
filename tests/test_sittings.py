"""A shipped stage's sittings: each stretch of steps, the machine it ran on and its training seconds."""

from inquire_lib.training.shipped_stages import sittings

AVX512 = {"cpu_kind": "avx512_bf16"}
AVX2 = {"cpu_kind": "avx2"}


def test_a_first_sitting_counts_its_seconds_less_the_pause():
    assert sittings(None, 150, 7000.0, AVX512, paused=880.0) == [
        {"steps": [0, 150], "device": AVX512, "seconds": 6120.0, "paused_seconds": 880.0}
    ]


def test_a_sitting_that_goes_on_from_a_shipped_point_adds_only_its_own_seconds():
    previous = {"step": 300, "seconds": 9720.2, "device": AVX512, "seconds_note": "5,013 s paused are left out"}
    done = sittings(previous, 450, 9720.2 + 5600.0, AVX2, paused=1039.0)
    assert done == [
        {"steps": [0, 300], "device": AVX512, "seconds": 9720.2, "note": "5,013 s paused are left out"},
        {"steps": [300, 450], "device": AVX2, "seconds": 4561.0, "paused_seconds": 1039.0},
    ]
    # and the next one goes on from those, not from the first point's record
    again = sittings({"step": 450, "seconds": 14281.2, "sittings": done}, 600, 14281.2 + 3000.0, AVX2)
    assert [s["steps"] for s in again] == [[0, 300], [300, 450], [450, 600]] and again[-1]["seconds"] == 3000.0


def test_shipping_the_same_point_again_adds_no_sitting():
    previous = {"step": 300, "seconds": 9720.2, "device": AVX512}
    assert sittings(previous, 300, 9720.2, AVX2) == [{"steps": [0, 300], "device": AVX512, "seconds": 9720.2}]
