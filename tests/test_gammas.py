"""The papers' gamma conventions live in one module: convert between widths, read a run in a convention."""

import math

from anchorlab.papers.gammas import JOURNAL_WIDTH, PAPER_WIDTH, convert, read_at


def test_convert_keeps_the_std():
    for g, w in ((0.45, 128), (0.8, 640), (0.3, 64)):
        assert math.isclose(w ** -g, PAPER_WIDTH ** -convert(g, w), rel_tol=1e-12)
    assert round(convert(0.4, JOURNAL_WIDTH), 3) == 0.431 and convert(0.5, PAPER_WIDTH) == 0.5


def test_read_at_names_a_run_only_in_its_own_convention():
    assert read_at(0.8, 400, 128) == 0.8 and read_at(0.8, None, 400) == 0.8     # a reference, or the width itself
    assert math.isnan(read_at(0.8, None, 128)) and math.isnan(read_at(0.8, 640, 128))
    assert read_at(0.4, 640, 128, JOURNAL_WIDTH) == 0.4 and math.isnan(read_at(0.4, float("nan"), 128, JOURNAL_WIDTH))


def test_convention_names_the_width_a_gamma_is_read_at():
    from anchorlab.papers.gammas import convention

    assert [convention(w) for w in (400, 640.0, "400", None, float("nan"), 128)] == \
        ["paper", "journal", "paper", "plain", "plain", "plain"]
