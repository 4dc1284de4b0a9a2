"""Edge contributions to the last position's output, and the embedding's spectrum share and step lattice."""

import math

import pytest
import torch

from anchorlab.analysis.attention import flow_scores, flow_summary, output_contributions
from anchorlab.analysis.embedding import step_directions, top_variance_fraction
from anchorlab.config import ConfigError


def _causal(T, rows):
    """(T, T) attention with given rows; other rows attend to themselves."""
    A = torch.eye(T)
    for q, w in rows.items():
        A[q] = torch.tensor(w, dtype=torch.float)
    return A


def test_contribution_follows_the_last_layer_back_to_the_edges_it_reads():
    T = 4   # key 0, anchor1 1, anchor2 2, last 3
    l0 = _causal(T, {1: [1, 0, 0, 0], 2: [1, 0, 0, 0], 3: [0, 0.5, 0.5, 0]})   # anchors read the key; last merges
    l1 = _causal(T, {3: [0, 0.5, 0.5, 0]})                                     # last reads the anchors
    pats = torch.stack([l0, l1])[:, None, None]                                # (L, B, H, T, T)
    plain = output_contributions(pats, residual=0.0)
    # layer 1: only the last position's row counts, at its attention weight
    assert torch.allclose(plain[1, 0, 0, 3], l1[3].double()) and plain[1, 0, 0, :3].abs().sum() == 0
    # layer 0, no skip path: anchor a's row is weighted by how much the last position reads a in layer 1
    assert math.isclose(float(plain[0, 0, 0, 1, 0]), 0.5) and math.isclose(float(plain[0, 0, 0, 2, 0]), 0.5)
    assert float(plain[0, 0, 0, 3].sum()) == 0.0          # the last token's layer-0 merge never reaches it
    skip = output_contributions(pats, residual=0.5)       # with the skip path, half of it does
    assert math.isclose(float(skip[0, 0, 0, 3, 1]), 0.5 * 0.5) and math.isclose(float(skip[0, 0, 0, 1, 0]), 0.25)
    s = flow_summary(flow_scores(skip.float(), torch.tensor([0])))
    row = s.set_index(["layer", "edge"]).score
    assert math.isclose(row[(0, "anchors->key")], 0.25, abs_tol=1e-6) and math.isclose(row[(1, "last->anchors")], 1.0)
    with pytest.raises(ConfigError, match="residual"):
        output_contributions(pats, residual=2.0)


def test_top_variance_and_step_directions_tell_two_arms_a_line_and_noise_apart():
    g = torch.Generator().manual_seed(0)
    arms = torch.zeros(100, 16)          # +3 moves along one axis, +4 along another, from token 40
    for i, t in enumerate((40, 43, 46, 49)):
        arms[t, 0] = float(i)
    for i, t in enumerate((44, 48), 1):
        arms[t, 1] = float(i)
    two = step_directions(arms, [40, 43, 46, 49, 44, 48])
    assert math.isclose(two["consistency_3"], 1.0) and math.isclose(two["consistency_4"], 1.0)
    assert math.isclose(two["angle_deg"], 90.0, abs_tol=1e-6) and math.isclose(two["share_3"], 1.0)
    ids = list(range(40, 80))
    line = torch.zeros(100, 16)
    line[ids, 0] = torch.tensor(ids, dtype=torch.float)
    line += torch.randn(100, 16, generator=g) * 1e-3
    on_line = step_directions(line, ids)
    assert on_line["consistency_3"] > 0.99 and on_line["angle_deg"] < 5          # one direction
    assert top_variance_fraction(line, ids, 2) > 0.99
    noise = torch.randn(100, 16, generator=g)
    assert top_variance_fraction(noise, ids, 2) < 0.4 and step_directions(noise, ids)["consistency_3"] < 0.5
    with pytest.raises(ConfigError, match="steps"):
        step_directions(line, [40, 41, 42], steps=(3,))


def test_cosine_levels_read_equal_and_unequal_cells_apart():
    import pandas as pd

    from anchorlab.analysis.similarity import cosine_levels

    df = pd.DataFrame({"equal": [True, True, False, False, False], "cosine": [0.9, 0.7, -0.2, 0.1, 0.4],
                       "include": [True, True, True, True, False]})
    lv = cosine_levels(df)
    assert math.isclose(lv["equal_mean"], 0.8) and math.isclose(lv["unequal_mean"], -0.05)
    assert math.isclose(lv["unequal_abs"], 0.15) and math.isclose(lv["equal_abs"], 0.8)
    assert math.isnan(cosine_levels(df[~df.equal])["equal_mean"])
