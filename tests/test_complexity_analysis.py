"""Complexity analyses: stable rank, condensation, embedding structure, callback, per-run tables, plots."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from anchorlab.analysis.condensation import (condensation_groups, condensation_order, condensation_scores,
                                             cosine_matrix, effective_directions)
from anchorlab.analysis.embedding import (covariance_participation_ratio, covariance_spectra_by_step,
                                         covariance_spectrum, difference_consistency, embedding_pca,
                                         ordinal_probe_r2, ordinal_rank_correlation)
from anchorlab.analysis.spectra import ComplexityCallback, singular_values, stable_rank, stable_rank_table
from anchorlab.config import ConfigError, ModelConfig, experiment_from_dict


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=gen(seed), dtype=dtype)


def random_orthogonal(n: int, seed: int) -> torch.Tensor:
    q, r = torch.linalg.qr(randn(n, n, seed=seed))
    return q * torch.sign(torch.diagonal(r))


# ----------------------------------------------------------------------------- stable rank
def test_stable_rank_known_values():
    u, v = randn(30, 1, seed=1), randn(1, 50, seed=2)
    assert stable_rank(u @ v) == pytest.approx(1.0, rel=1e-9)
    assert stable_rank(torch.eye(17)) == pytest.approx(17.0, rel=1e-12)
    assert stable_rank(torch.diag(torch.tensor([3.0, 4.0]))) == pytest.approx(25 / 16)  # (9 + 16) / 16
    assert math.isnan(stable_rank(torch.zeros(4, 5)))


def test_stable_rank_invariances():
    W = randn(40, 24, seed=3)
    base = stable_rank(W)
    assert 1.0 < base < 24.0
    assert stable_rank(random_orthogonal(40, 4) @ W) == pytest.approx(base, rel=1e-9)
    assert stable_rank(W @ random_orthogonal(24, 5)) == pytest.approx(base, rel=1e-9)
    assert stable_rank(W.T) == pytest.approx(base, rel=1e-9)
    # tiny float32 weights (small init) must not underflow to NaN/0
    assert stable_rank((W * 1e-25).float()) == pytest.approx(base, rel=1e-5)


def test_singular_values_and_table():
    W = randn(6, 4, seed=6)
    s = singular_values(W)
    assert s.shape == (4,) and bool((s[:-1] >= s[1:]).all())
    params = {"a.weight": W, "a.bias": randn(6, seed=7), "b.weight": torch.eye(3)}
    df = stable_rank_table(params)
    assert list(df.name) == ["a.weight", "b.weight"]  # 1-D params skipped
    row = df.set_index("name").loc["a.weight"]
    assert row["shape"] == "6x4" and row["n_singular"] == 4
    assert row.frobenius == pytest.approx(float(torch.linalg.norm(W)))
    assert row.spectral == pytest.approx(float(torch.linalg.matrix_norm(W, ord=2)))
    assert df.set_index("name").loc["b.weight", "stable_rank"] == pytest.approx(3.0)
    assert list(stable_rank_table(params, names=["b.weight"]).name) == ["b.weight"]
    with pytest.raises(ConfigError, match="names"):
        stable_rank_table(params, names=["nope"])
    with pytest.raises(ConfigError, match="2-D"):
        stable_rank_table(params, names=["a.bias"])
    lin = torch.nn.Linear(5, 3)
    assert list(stable_rank_table(lin).name) == ["weight"]


# ----------------------------------------------------------------------------- condensation
def test_cosine_matrix_matches_sklearn_and_handles_zero_rows():
    W = randn(10, 7, seed=8)
    W[3] = 0.0
    C = cosine_matrix(W)
    ref = cosine_similarity(W.numpy())
    keep = [i for i in range(10) if i != 3]
    np.testing.assert_allclose(C.numpy()[np.ix_(keep, keep)], ref[np.ix_(keep, keep)], atol=1e-12)
    assert bool((C[3] == 0).all()) and bool((C[:, 3] == 0).all())
    assert torch.equal(C, C.T)
    s = condensation_scores(W)
    assert s["n_zero_rows"] == 1 and math.isfinite(s["effective_directions"])


def test_identical_rows_are_maximally_condensed():
    W = randn(1, 50, seed=9).repeat(32, 1) * torch.linspace(0.5, 2.0, 32)[:, None]  # same direction, various norms
    s = condensation_scores(W)
    assert s["largest_group_frac"] == 1.0 and s["n_groups"] == 1 and s["n_groups_cover"] == 1
    assert s["mean_abs_cos"] == pytest.approx(1.0)
    assert s["effective_directions"] == pytest.approx(1.0)


def test_sign_flips_count_as_condensed_unless_signed():
    u = randn(1, 30, seed=10)
    W = torch.cat([u.repeat(5, 1), -u.repeat(5, 1)])
    assert condensation_scores(W)["largest_group_frac"] == 1.0
    s = condensation_scores(W, signed=True)
    assert s["n_groups"] == 2 and s["largest_group_frac"] == 0.5


def test_random_rows_show_little_condensation():
    n, d = 64, 400
    s = condensation_scores(randn(n, d, seed=11))
    assert s["largest_group_frac"] == 1 / n
    assert s["n_groups_cover"] == math.ceil(0.9 * n)
    assert s["mean_abs_cos"] < 0.1                               # E|cos| ~ sqrt(2 / (pi d)) = 0.04
    assert s["effective_directions"] == pytest.approx(n * d / (n + d - 1), rel=0.1)


def test_orthogonal_groups_give_k_effective_directions():
    Q = random_orthogonal(20, 12)[:3]                             # 3 orthonormal directions
    W = Q.repeat_interleave(8, dim=0) * randn(24, 1, seed=13).abs().add(0.1)
    assert effective_directions(W) == pytest.approx(3.0, rel=1e-9)
    s = condensation_scores(W)
    assert s["n_groups"] == 3 and s["largest_group_frac"] == pytest.approx(1 / 3)


def test_two_planted_groups_form_contiguous_blocks():
    d = 60
    u = randn(2, d, seed=14)
    noise = 0.05 * randn(40, d, seed=15)
    W = torch.cat([u[0].expand(20, d), u[1].expand(20, d)]) + noise
    truth = torch.tensor([0] * 20 + [1] * 20)
    perm = torch.randperm(40, generator=gen(16))
    W, truth = W[perm], truth[perm]
    C = cosine_matrix(W)
    order = condensation_order(C)
    assert sorted(order.tolist()) == list(range(40))
    seq = truth[order]
    assert int((seq[1:] != seq[:-1]).sum()) == 1                 # exactly one boundary: two blocks
    labels = condensation_groups(C, threshold=0.9)
    assert len(set(labels.tolist())) == 2
    for g in (0, 1):                                              # groups == planted partition
        assert len(set(truth[labels == g].tolist())) == 1


def test_groups_respect_threshold():
    base = randn(4, 20, seed=17)
    W = base[torch.randint(0, 4, (60,), generator=gen(18))] + 0.6 * randn(60, 20, seed=19)
    C = cosine_matrix(W)
    for thr in (0.5, 0.8):
        labels = condensation_groups(C, threshold=thr)
        for g in labels.unique():
            idx = torch.nonzero(labels == g).flatten()
            assert float(C[idx][:, idx].abs().min()) >= thr - 1e-12
    with pytest.raises(ConfigError, match="threshold"):
        condensation_groups(C, threshold=1.5)


# ----------------------------------------------------------------------------- embedding
TOK = list(range(40, 80))


def linear_embedding(vocab=100, d=64, seed=20):
    u, c = randn(d, seed=seed), randn(d, seed=seed + 1)
    return torch.arange(vocab, dtype=torch.float64)[:, None] * u + c


def test_covariance_spectrum_recovers_known_eigenvalues():
    n, d, lam = 40, 12, torch.tensor([9.0, 4.0, 2.5, 1.0, 0.25], dtype=torch.float64)
    k = len(lam)
    Z = randn(n, k, seed=21)
    Z = Z - Z.mean(0)
    Z, _ = torch.linalg.qr(Z)                                     # centred orthonormal columns
    Z = Z * math.sqrt(n - 1)                                      # sample covariance of Z = I
    Q = random_orthogonal(d, 22)[:, :k]                           # eigenvectors
    X = Z * lam.sqrt() @ Q.T + randn(1, d, seed=23)               # cov(X) = Q diag(lam) Q^T exactly
    E = randn(100, d, seed=24)
    E[40:80] = X
    ev = covariance_spectrum(E, TOK)
    assert ev.shape == (d,)
    np.testing.assert_allclose(ev[:k].numpy(), lam.numpy(), rtol=1e-9)
    np.testing.assert_allclose(ev[k:].numpy(), 0.0, atol=1e-9)
    np.testing.assert_allclose(ev.numpy(), np.sort(np.linalg.eigvalsh(np.cov(X.numpy().T)))[::-1], atol=1e-9)
    assert covariance_spectrum(E, TOK, top_k=2).tolist() == pytest.approx([9.0, 4.0])
    pr = covariance_participation_ratio(E, TOK)
    assert pr == pytest.approx(float(lam.sum() ** 2 / (lam ** 2).sum()))
    tidy = covariance_spectra_by_step({100: E, 0: E}, TOK, top_k=3)
    assert list(tidy.columns) == ["step", "index", "eigenvalue"] and tidy.step.tolist()[0] == 0
    assert len(tidy) == 6


def test_linear_embedding_scores_one():
    E = linear_embedding()
    df = embedding_pca(E)
    assert list(df.columns) == ["token", "pc1", "pc2"] and df.token.tolist() == TOK
    assert df.attrs["explained_variance_ratio"][0] == pytest.approx(1.0)
    assert np.corrcoef(df.token, df.pc1)[0, 1] == pytest.approx(1.0)  # sign fixed: increases with value
    assert ordinal_rank_correlation(E) == pytest.approx(1.0)
    assert ordinal_probe_r2(E) == pytest.approx(1.0)
    dc = difference_consistency(E, steps=(3, 4))
    assert dc[3] == pytest.approx(1.0) and dc[4] == pytest.approx(1.0)


def test_random_embedding_scores_low():
    E = randn(100, 400, seed=25)
    assert ordinal_rank_correlation(E) < 0.45
    assert ordinal_probe_r2(E) < 0.25
    dc = difference_consistency(E)
    assert dc[3] < 0.2 and dc[4] < 0.2                         # ~0.05 measured over seeds
    assert covariance_participation_ratio(E) > 20                 # 40 points spread over ~39 directions


def test_grid_embedding_is_ordinal_in_the_plane_not_on_a_line():
    # E[v] = (v mod 5) u + (v // 5) w: value is affine in the 2-D position (R^2 = 1); +5 is always
    # the same move (w) while +1 wraps around every 5 tokens.
    q = random_orthogonal(32, 26)
    u, w = q[0] * 3.0, q[1] * 1.0
    v = torch.arange(100, dtype=torch.float64)
    E = (v % 5)[:, None] * u + (v // 5)[:, None] * w
    assert ordinal_probe_r2(E, n_components=2) == pytest.approx(1.0)
    assert ordinal_probe_r2(E, n_components=1) < 0.99
    dc = difference_consistency(E, steps=(1, 5))
    assert dc[5] == pytest.approx(1.0) and dc[1] < 0.9


def test_embedding_bad_inputs():
    E = randn(50, 8, seed=27)
    with pytest.raises(ConfigError, match="token_ids"):
        embedding_pca(E)                                          # 40..79 beyond vocab 50
    with pytest.raises(ConfigError, match="n_components"):
        embedding_pca(E, range(10, 20), n_components=9)
    with pytest.raises(ConfigError, match="steps"):
        difference_consistency(E, range(10, 20), steps=(0,))


# ----------------------------------------------------------------------------- callback
def test_callback_on_the_real_model_is_flat():
    from anchorlab.model.transformer import build_model

    torch.manual_seed(0)  # nn default init in the constructor; values only need to be generic
    model = build_model(ModelConfig())                            # d_model = 400
    cb = ComplexityCallback(every=2)
    assert cb(3, model) == {}
    cb(0, model)                                                  # warm-up (imports, allocations)
    out = cb(4, model)           # its cost is a benchmark figure (benchmarks/), never a timed assert
    for key in ("stable_rank/blocks.0.attn.W_Q.weight", "stable_rank/embed.weight",
                "condensation/largest_group_frac", "condensation/effective_directions",
                "embedding/ordinal_spearman", "embedding/ordinal_r2", "embedding/diff_consistency_3",
                "embedding/diff_consistency_4", "embedding/cov_participation_ratio"):
        assert key in out and isinstance(out[key], float) and math.isfinite(out[key]), key
    assert out["condensation/largest_group_frac"] < 0.05          # default init: not condensed

    with torch.no_grad():                                         # condense W_Q onto 2 directions
        W = model.blocks[0].attn.W_Q.weight
        dirs = randn(2, W.shape[1], seed=28).float()
        W.copy_(dirs[torch.arange(W.shape[0]) % 2] * 0.01)
    out2 = cb(6, model)
    assert out2["condensation/largest_group_frac"] == pytest.approx(0.5)
    assert out2["condensation/effective_directions"] < 2.1
    assert out2["stable_rank/blocks.0.attn.W_Q.weight"] < 2.0


def test_callback_errors():
    params = {"embed.weight": randn(30, 8, seed=29)}
    with pytest.raises(ConfigError, match="param_names"):
        ComplexityCallback()(0, params)
    with pytest.raises(ConfigError, match="token_ids"):
        ComplexityCallback(param_names=(), condensation_param=None)(0, params)
    with pytest.raises(ConfigError, match="every"):
        ComplexityCallback(every=0)
    out = ComplexityCallback(param_names=("embed.weight",), condensation_param="embed.weight",
                             embedding_param=None)(0, params)
    assert set(out) >= {"stable_rank/embed.weight", "condensation/mean_abs_cos"}


# ----------------------------------------------------------------------------- plots
def _png_ok(fig, path):
    fig.savefig(path, format="png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_plots_write_png(tmp_path):
    from anchorlab.plots.complexity import (plot_cosine_heatmap, plot_covariance_spectrum, plot_embedding_pca,
                                            plot_stable_rank_bars, plot_stable_rank_bubbles)

    C = cosine_matrix(randn(20, 10, seed=30))
    _png_ok(plot_cosine_heatmap(C, order=condensation_order(C)), tmp_path / "cos.png")
    _png_ok(plot_embedding_pca(embedding_pca(linear_embedding()), arrow_steps=(3, 4)), tmp_path / "pca.png")
    spec = covariance_spectra_by_step({s: randn(100, 16, seed=s) for s in (0, 10, 20)}, top_k=5)
    _png_ok(plot_covariance_spectrum(spec), tmp_path / "spec.png")
    runs = pd.DataFrame({"optim.weight_decay": [0.0, 0.0, 0.1, 0.1, 0.1], "init.gamma": [0.3, 0.3, 0.5, 0.5, 0.8],
                         "phase": [1, 1, 2, 3, 3], "stable_rank": [50.0, 54.0, 20.0, 10.0, 3.0]})
    fig = plot_stable_rank_bubbles(runs)
    assert len(fig.axes[0].collections[0].get_offsets()) == 3     # seeds averaged per cell
    _png_ok(fig, tmp_path / "bubbles.png")
    with pytest.raises(ConfigError, match="missing column"):
        plot_stable_rank_bubbles(runs.drop(columns="phase"))
    table = stable_rank_table({"a.weight": randn(6, 4, seed=31), "b.weight": torch.eye(3)})
    fig = plot_stable_rank_bars(table)
    assert [b.get_width() for b in fig.axes[0].patches] == pytest.approx(table.stable_rank.tolist())
    _png_ok(fig, tmp_path / "bars.png")


# ----------------------------------------------------------------------------- per-run tables
def _run(task: dict, vocab_size: int, seed: int = 0):
    """An initialised (untrained) RunResult of a small GPT-2 model; no files."""
    from anchorlab.tasks import build_task
    from anchorlab.train import RunResult, init_model

    cfg = experiment_from_dict({"task": task, "model": {"arch": "gpt2", "d_model": 16, "n_heads": 2, "d_head": 8,
                                                        "d_ff": 32, "vocab_size": vocab_size, "max_len": 9},
                                "train": {"init_seed": seed}})
    model, _ = init_model(cfg)
    return RunResult(model, build_task(cfg.task), cfg, {}, None)


def test_condensation_tables_hold_the_clustered_cosine_matrix():
    from anchorlab.analysis.complexity import CondensationOptions, compute_condensation

    run = _run({"name": "anchor"}, 201)
    t = compute_condensation(run, CondensationOptions(threshold=0.8))
    assert list(t) == ["scores", "cosine"]
    W = run.model.blocks[0].attn.W_Q.weight
    assert t["scores"].param.tolist() == ["blocks.0.attn.W_Q.weight"]
    assert t["scores"].iloc[0].to_dict() | {"param": None} == pytest.approx(
        {"param": None, **condensation_scores(W, threshold=0.8)})
    cos = t["cosine"]
    order = cos[cos.j == 0].sort_values("i").neuron_i.to_numpy()
    assert sorted(order) == list(range(16)) and np.array_equal(order, condensation_order(cosine_matrix(W)).numpy())
    C = cosine_matrix(W).numpy()
    M = cos.pivot(index="i", columns="j", values="cosine").to_numpy()
    np.testing.assert_allclose(M, C[np.ix_(order, order)])
    with pytest.raises(ConfigError, match="^param: no parameter"):
        compute_condensation(run, CondensationOptions(param="nope"))


def test_token_defaults_depend_on_the_task():
    from anchorlab.analysis.complexity import (MAX_DEFAULT_TOKENS, CovSpectrumOptions, EmbeddingOptions,
                                               compute_cov_spectrum, compute_embedding)

    anchor = _run({"name": "anchor"}, 201)
    t = compute_embedding(anchor, EmbeddingOptions())
    assert t["pca"].token.tolist() == TOK
    summ = t["summary"]
    assert summ[summ.metric == "diff_consistency"].step.tolist() == [3, 4]
    pairs = _run({"name": "pairs"}, 12)
    t = compute_embedding(pairs, EmbeddingOptions())
    assert t["pca"].token.tolist() == list(range(12))                # every token id
    assert "diff_consistency" not in set(t["summary"].metric)        # no +s arithmetic outside the anchor task
    big = _run({"name": "pairs"}, MAX_DEFAULT_TOKENS + 50)
    spec = compute_cov_spectrum(big, CovSpectrumOptions(top_k=5))["spectrum"]
    E = big.model.embed.weight
    assert spec.eigenvalue.tolist() == pytest.approx(covariance_spectrum(E, range(MAX_DEFAULT_TOKENS), 5).tolist())
    t = compute_embedding(pairs, EmbeddingOptions(tokens=(2, 3, 5, 7, 11), diff_steps=(2,)))
    assert t["pca"].token.tolist() == [2, 3, 5, 7, 11]
    assert t["summary"].set_index("metric").loc["diff_consistency", "step"] == 2
