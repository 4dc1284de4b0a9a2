"""Mechanism analyses: flow scores, attention-edge masking, similarity, projection, compute functions."""

import logging
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from anchorlab.analysis.attention import (attention_patterns, flow_scores, flow_summary, role_positions,
                                          sample_inputs)
from anchorlab.analysis.masking import (Edge, EdgeMask, edge_mask, mask_accuracy, masked_run, standard_masks)
from anchorlab.analysis.mechanism import (FlowOptions, MaskAnchor2Options, MaskKeyOptions, compare_runs,
                                          compute_flow, compute_mask_anchor2, compute_mask_key)
from anchorlab.analysis.projection import embed_2d, pca_2d, subsample_index
from anchorlab.analysis.similarity import (ao_similarity, cosine_heatmap, equal_target_contrast, filler_rows,
                                           probe_tokens, v_similarity)
from anchorlab.config import ConfigError, ModelConfig, dump_config, experiment_from_dict
from anchorlab.model.hooks import hooks, run_with_cache
from anchorlab.model.init import apply_init_rate
from anchorlab.model.transformer import build_model
from anchorlab.tasks.anchor import AnchorTask, AnchorTaskConfig
from anchorlab.train import init_model, load_run

TASK = AnchorTask(AnchorTaskConfig(n_train=256, n_eval_per_group=16))


def _model(arch="neurips", n_layers=2, seed=0):
    m = build_model(ModelConfig(arch=arch, n_layers=n_layers, d_model=32, n_heads=2, d_head=8, d_ff=48))
    apply_init_rate(m, 0.3, seed=seed)  # large-ish init: attention far from uniform
    return m.eval()


def _data(n=12, key_positions=(3,), seed=0, pairs=None):
    return sample_inputs(TASK, n, pairs or TASK.pairs, "train", np.random.default_rng(seed), key_positions)


# ----------------------------------------------------------------------- flow
def test_flow_scores_on_hand_built_pattern():
    L, B, H, T = 2, 2, 1, 7
    pat = torch.full((L, B, H, T, T), 0.01)
    key_pos = torch.tensor([0, 2])
    # sample 0: key 0, anchors 1, 2; sample 1: key 2, anchors 3, 4; last = 6
    pat[0, 0, 0, 6, 0], pat[0, 1, 0, 6, 2] = 0.3, 0.5      # layer 0 last->key: mean 0.4
    pat[0, 0, 0, 6, 1], pat[0, 1, 0, 6, 3] = 0.2, 0.2      # last->anchor1: 0.2
    pat[1, 0, 0, 2, 0], pat[1, 1, 0, 4, 2] = 0.9, 0.7      # layer 1 anchor2->key: 0.8
    pat[1, 0, 0, 2, 1], pat[1, 1, 0, 4, 3] = 0.0, 0.1      # layer 1 anchor2->anchor1: 0.05
    df = flow_scores(pat, key_pos)
    get = lambda l, e: float(df[(df.layer == l) & (df.edge == e)].score.iloc[0])  # noqa: E731
    assert get(0, "last->key") == pytest.approx(0.4)
    assert get(0, "last->anchor1") == pytest.approx(0.2)
    assert get(0, "last->anchor2") == pytest.approx(0.01)
    assert get(1, "anchor2->key") == pytest.approx(0.8)
    assert get(1, "anchor2->anchor1") == pytest.approx(0.05)
    assert get(1, "last->key") == pytest.approx(0.01)
    s = flow_summary(df).set_index(["layer", "edge"]).score
    assert s[(0, "last->anchors")] == pytest.approx(0.2 + 0.01)
    # per-group rows: group "b" is sample 1 alone
    g = flow_scores(pat, key_pos, group=["a", "b"])
    assert float(g[(g.group == "b") & (g.layer == 0) & (g.edge == "last->key")].score.iloc[0]) == pytest.approx(0.5)


def test_role_positions_and_bad_input():
    kp = torch.tensor([0, 4])
    assert role_positions("anchor2", kp, 9).tolist() == [2, 6]
    assert role_positions("last", kp, 9).tolist() == [8, 8]
    assert role_positions(-2, kp, 9).tolist() == [7, 7]
    with pytest.raises(ConfigError, match="role"):
        role_positions("anchor3", kp, 9)
    with pytest.raises(ConfigError):
        role_positions("anchor2", torch.tensor([7]), 9)  # past the end


def test_sample_inputs_respects_key_positions_and_task_layout():
    d = _data(n=50, key_positions=(1, 4))
    assert len(d) == 50 and set(d.key_pos.tolist()) <= {1, 4}
    rows = torch.arange(50)
    assert torch.equal(d.tokens[rows, d.key_pos], d.key)
    assert torch.equal(d.tokens[rows, d.key_pos + 1], d.pair[:, 0])


def test_attention_patterns_match_cache_and_are_causal():
    m, d = _model(), _data(n=5)
    p = attention_patterns(m, d.tokens, batch_size=2)
    assert p.shape == (2, 5, 2, 9, 9)
    _, c = run_with_cache(m, d.tokens)
    assert torch.allclose(p[1], c["blocks.1.attn.hook_pattern"])
    assert torch.allclose(p.sum(-1), torch.ones(()), atol=1e-5) and (p.triu(1) == 0).all()


# -------------------------------------------------------------------- masking
@pytest.mark.parametrize("arch", ["neurips", "gpt2"])
def test_empty_mask_is_identity(arch):
    m, d = _model(arch), _data()
    ref = m(d.tokens)
    for masks in ([], [EdgeMask(0, ()), EdgeMask(1, ())]):
        logits, _ = masked_run(m, d, masks)
        assert torch.equal(logits, ref)


def _execution_order(model, tokens):
    order = []
    with hooks(model, [(lambda n: True, lambda t, n: order.append(n))]):
        model(tokens)
    return order


def test_mask_changes_nothing_upstream_and_something_downstream():
    m, d = _model(), _data(key_positions=(3,))
    order = _execution_order(m, d.tokens)
    _, ref = run_with_cache(m, d.tokens)
    masks = [EdgeMask(1, (Edge("last", "key"),))]
    _, new = masked_run(m, d, masks)
    target = order.index("blocks.1.attn.hook_pattern")
    for name in order[:target]:
        assert torch.equal(ref[name], new[name]), name
    pat_r, pat_n = ref["blocks.1.attn.hook_pattern"], new["blocks.1.attn.hook_pattern"]
    assert (pat_n[:, :, 8, 3] == 0).all() and (pat_r[:, :, 8, 3] > 0).all()
    keep = torch.ones(9, 9, dtype=torch.bool)
    keep[8, 3] = False
    assert torch.equal(pat_r[:, :, keep], pat_n[:, :, keep])  # no renormalization
    assert not torch.allclose(ref["hook_logits"][:, -1], new["hook_logits"][:, -1], atol=1e-4)


def test_mask_one_layer_later_respects_causality():
    # mask anchor1 <- key in layer 0; in layer 1 positions before anchor1 (4) cannot see the change
    m, d = _model(), _data(key_positions=(3,))
    _, ref = run_with_cache(m, d.tokens)
    _, new = masked_run(m, d, [EdgeMask(0, [("anchor1", "key")])])
    a, b = ref["blocks.1.hook_ao"], new["blocks.1.hook_ao"]
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert ((a[:, 4:] - b[:, 4:]).abs().amax(-1) > 1e-4).all()  # anchor1 and everything after it change
    # in layer 0 only the masked query row changed
    a0, b0 = ref["blocks.0.hook_ao"], new["blocks.0.hook_ao"]
    others = [p for p in range(9) if p != 4]
    assert torch.allclose(a0[:, others], b0[:, others], atol=1e-6)
    assert not torch.allclose(ref["hook_logits"][:, -1], new["hook_logits"][:, -1], atol=1e-4)


def test_edge_mask_resolves_roles_per_sample_and_renormalizes():
    kp = torch.tensor([0, 3])
    mk = edge_mask([Edge("all", "anchor2"), Edge("last", 0)], kp, 9)
    assert mk.shape == (2, 9, 9)
    assert mk[0, :, 2].all() and mk[1, :, 5].all() and not mk[1, :, 2].any()
    assert mk[:, 8, 0].all() and int(mk[0].sum()) == 9 + 1
    m, d = _model(), _data(key_positions=(2,))
    _, c = masked_run(m, d, [EdgeMask(0, [("all", "key")], renormalize=True)],
                      names_filter=lambda n: n.endswith("hook_pattern"))
    p = c["blocks.0.attn.hook_pattern"]
    assert (p[:, :, :, 2] == 0).all()
    rows = p[:, :, 3:].sum(-1)  # rows that had the key in view (and other sources) sum to 1 again
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


@pytest.mark.parametrize("role,offset", [("key", 0), ("anchor2", 2)])
def test_masking_a_token_in_every_layer_removes_its_information(role, offset):
    m, d = _model(), _data(n=16, key_positions=(1,))
    other = d.tokens.clone()
    pos = 1 + offset
    other[:, pos] = d.tokens[:, pos] + 7 if role == "key" else torch.where(d.tokens[:, pos] == 1, 4, 1)
    masks = standard_masks(role, 2, renormalize=True)
    assert not torch.allclose(m(d.tokens)[:, -1], m(other)[:, -1], atol=1e-4)  # it matters unmasked
    a, _ = masked_run(m, d.tokens, masks, key_pos=d.key_pos, cache=False)
    b, _ = masked_run(m, other, masks, key_pos=d.key_pos, cache=False)
    assert torch.allclose(a[:, -1], b[:, -1], atol=1e-5)
    # masking only layer 0 does not: layer 1 reads the token from its own position
    one = standard_masks(role, 2, layers=[0], renormalize=True)
    a1, _ = masked_run(m, d.tokens, one, key_pos=d.key_pos, cache=False)
    b1, _ = masked_run(m, other, one, key_pos=d.key_pos, cache=False)
    assert not torch.allclose(a1[:, -1], b1[:, -1], atol=1e-4)


def test_mask_accuracy_matches_plain_predictions():
    m, d = _model(), _data(n=64, key_positions=(0, 1, 2))
    df = mask_accuracy(m, TASK, d, {"none": [], "key": standard_masks("key", 2)})
    assert set(df["mask"]) == {"none", "key"}
    pred = m(d.tokens)[:, -1].argmax(-1)
    for pair in {tuple(p) for p in d.pair.tolist()}:
        sel = (d.pair[:, 0] == pair[0]) & (d.pair[:, 1] == pair[1])
        want = float((pred[sel] == d.key[sel] + TASK.inferential_shift(pair)).float().mean())
        got = df[(df["mask"] == "none") & (df.pair == f"{pair[0]}{pair[1]}") & (df.hypothesis == "inferential")]
        assert float(got.acc.iloc[0]) == pytest.approx(want)
    with pytest.raises(ConfigError, match="layer"):
        masked_run(m, d, [EdgeMask(5, [("last", "key")])])


# ----------------------------------------------------------------- similarity
def test_cosine_heatmap_matches_torch():
    g = torch.Generator().manual_seed(0)
    A, B = torch.randn(5, 7, generator=g), torch.randn(3, 7, generator=g)
    want = torch.nn.functional.cosine_similarity(A[:, None], B[None], dim=-1)
    assert torch.allclose(cosine_heatmap(A, B).float(), want, atol=1e-6)


def test_equal_target_contrast_on_synthetic_vectors():
    rng = np.random.default_rng(0)
    targets = np.repeat(np.arange(6), 4)  # 6 targets, 4 inputs each
    eq = targets[:, None] == targets[None]
    off = ~np.eye(len(targets), dtype=bool)
    # orthogonal per target -> equal cos 1, others 0 -> contrast exactly 1
    V = np.eye(6)[targets] * rng.uniform(0.5, 2.0, size=(len(targets), 1))
    assert equal_target_contrast(cosine_heatmap(V, V), eq, off) == pytest.approx(1.0)
    # random (non-orthogonal) direction per target, scaled: equal-target ones parallel
    U = rng.normal(size=(6, 20)) + 0.5
    V = U[targets] * rng.uniform(0.5, 2.0, size=(len(targets), 1))
    Un = U / np.linalg.norm(U, axis=1, keepdims=True)
    G = Un @ Un.T
    other = np.mean([G[targets[i], targets[j]] for i in range(24) for j in range(24) if targets[i] != targets[j]])
    assert equal_target_contrast(cosine_heatmap(V, V), eq, off) == pytest.approx(1 - other)
    # no structure -> near 0
    W = rng.normal(size=(240, 50))
    t2 = np.repeat(np.arange(60), 4)
    assert abs(equal_target_contrast(cosine_heatmap(W, W), t2[:, None] == t2[None], ~np.eye(240, dtype=bool))) < 0.03
    # the diagonal would inflate the contrast if not excluded
    assert equal_target_contrast(cosine_heatmap(W, W), t2[:, None] == t2[None]) > 0.1


def test_probe_tokens_share_fillers():
    f = filler_rows(TASK, 2, seed=1)
    assert f.shape == (2, 9) and ((f >= 20) & (f <= 99)).all()
    tok = probe_tokens(f[0], [30, 31, 32], [(1, 2), (3, 3), (4, 1)], key_pos=2)
    assert tok[:, 2].tolist() == [30, 31, 32] and tok[:, 3].tolist() == [1, 3, 4] and tok[:, 4].tolist() == [2, 3, 1]
    keep = [0, 1, 5, 6, 7, 8]
    assert (tok[:, keep] == f[0, keep]).all()
    with pytest.raises(ConfigError, match="key_pos"):
        probe_tokens(f[0], [30], [(1, 2)], key_pos=7)


def test_equal_target_cells_follow_the_papers_examples():
    m = _model()
    ao = ao_similarity(m, TASK, n_draws=2)
    low, up = ao[ao.block == "lower"], ao[ao.block == "upper"]
    # NeurIPS: f(36; 3,3) = f(30; 2,2) -> rows (y;3,3), cols (x;2,2): y = x + 6
    assert ((low[low.equal].row_key - low[low.equal].col_key) == 6).all() and low.equal.sum() == 5
    # (y; 1,2) vs (x; 1,3): y + 6 = x + 3
    assert ((up[up.equal].col_key - up[up.equal].row_key) == 3).all() and up.equal.sum() == 8
    assert low[low.equal].shown.all() and up[up.equal].shown.all()
    assert ao.cosine.between(-1 - 1e-9, 1 + 1e-9).all()
    v = v_similarity(m, TASK, keys=range(30, 38), n_draws=1)
    lo = v[(v.block == "lower") & v.equal]  # rows anchor 4 (-8) vs cols anchor 3 (-2)
    assert ((lo.row_key - lo.col_key) == 6).all() and len(lo) > 0


def test_v_similarity_reads_the_first_anchor_position():
    m = _model()
    v = v_similarity(m, TASK, keys=[30, 31], blocks={"lower": (1, 2), "upper": (1, 2)}, key_pos=2, n_draws=1, seed=3)
    f = filler_rows(TASK, 1, seed=3)[0]
    _, c = run_with_cache(m, torch.cat([probe_tokens(f, [30, 31], [(1, 1)] * 2, 2),
                                         probe_tokens(f, [30, 31], [(2, 2)] * 2, 2)]))
    vv = c["blocks.1.attn.hook_v"][:, :, 3].reshape(4, -1)
    want = cosine_heatmap(vv[:2], vv[2:])
    got = v[v.block == "lower"].pivot(index="row_key", columns="col_key", values="cosine").to_numpy()
    assert np.allclose(got, want.numpy(), atol=1e-6)


# ----------------------------------------------------------------- projection
def test_pca_recovers_planar_geometry_and_subsampling():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(50, 2)) * [3.0, 1.0]
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    X = P @ Q[:2] + 5.0
    Y = pca_2d(X)
    d = lambda Z: np.linalg.norm(Z[:, None] - Z[None], axis=-1)  # noqa: E731
    assert np.allclose(d(Y), d(P), atol=1e-8)
    assert embed_2d(X, "pca", max_points=20).shape == (20, 2)
    idx = subsample_index(50, 20, seed=1)
    assert len(set(idx)) == 20 and np.array_equal(idx, subsample_index(50, 20, seed=1))
    with pytest.raises(ConfigError, match="method"):
        embed_2d(X, "umap")


def test_tsne_falls_back_to_pca_without_sklearn(monkeypatch, caplog):
    X = np.random.default_rng(0).normal(size=(30, 5))
    monkeypatch.setitem(sys.modules, "sklearn.manifold", None)  # import raises ImportError
    with caplog.at_level(logging.WARNING):
        Y = embed_2d(X, "tsne")
    assert "PCA" in caplog.text and np.allclose(Y, pca_2d(X))


def test_tsne_separates_far_clusters():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(20, 8)), rng.normal(size=(20, 8)) + 20.0])
    Y = embed_2d(X, "tsne", seed=0)
    c0, c1 = Y[:20].mean(0), Y[20:].mean(0)
    spread = max(np.linalg.norm(Y[:20] - c0, axis=1).max(), np.linalg.norm(Y[20:] - c1, axis=1).max())
    assert np.linalg.norm(c0 - c1) > spread


# ---------------------------------------------------------- analyses end to end
def _tiny_run(path, seed):
    from anchorlab.train.checkpoint import save_weights

    cfg = experiment_from_dict({}, [f"init.gamma={0.3 + 0.4 * seed}", "model.d_model=32", "model.d_head=16",
                                    "model.d_ff=64", f"train.init_seed={seed}", "task.n_train=256"])
    model, _ = init_model(cfg)
    path.mkdir()
    (path / "config.yaml").write_text(dump_config(cfg))
    save_weights(path / "model.safetensors", model)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two initialised (untrained) runs on disk: gamma 0.3 and 0.7, no final.json."""
    base = tmp_path_factory.mktemp("runs")
    return [_tiny_run(base / "a", 0), _tiny_run(base / "b", 1)]


def test_flow_tables_describe_the_paper_example(runs):
    run = load_run(runs[0])
    t = compute_flow(run, FlowOptions())
    edges, inp = t["edges"], t["input"]
    assert list(t) == ["edges", "input"]
    assert edges.groupby(["layer", "query"]).weight.sum().between(0.999, 1.001).all()
    assert len(edges) == 2 * 9 * 10 // 2                              # layers x causal (query, source) pairs
    assert list(edges[edges.source_role == "key"].source_token.unique()) == [99]  # the NeurIPS example input
    assert inp.token.tolist() == [35, 63, 99, 4, 3, 38, 42, 36, 62]
    assert inp.role.tolist()[2:5] == ["key", "anchor1", "anchor2"] and inp.role.iloc[-1] == "last"
    assert inp.target.iloc[-1] == 99 + TASK.inferential_shift((4, 3)) and inp.target.iloc[:-1].isna().all()
    with torch.no_grad():
        want = run.model(torch.tensor([inp.token.tolist()]))[0].argmax(-1).tolist()
    assert inp.prediction.tolist() == want
    one_head = compute_flow(run, FlowOptions(head=0))["edges"]     # the only head: equals the mean
    assert run.cfg.model.n_heads == 1 and set(edges["head"]) == {"mean"} and set(one_head["head"]) == {"0"}
    assert np.allclose(one_head.weight, edges.weight)
    with pytest.raises(ConfigError, match="^head: must be in 0..0"):
        compute_flow(run, FlowOptions(head=1))
    with pytest.raises(ConfigError, match="^tokens: expected 9 tokens"):
        compute_flow(run, FlowOptions(tokens=(1, 2, 3), key_pos=0))


def test_flow_by_contribution_draws_only_what_reaches_the_last_output(runs):
    """NeurIPS Fig. 3 highlights the edges that reach the output: in the last layer only the last position's row
    is left (summing to 1), and an earlier layer's rows sum to the share of each stream the last output reads."""
    run = load_run(runs[0])
    e = compute_flow(run, FlowOptions(weight="contribution"))["edges"]
    sums = e.groupby(["layer", "query"]).weight.sum()
    last = e["query"].max()
    assert np.isclose(sums.loc[(1, last)], 1.0) and np.allclose(sums.loc[1].drop(last), 0.0)
    assert np.isclose(sums.loc[0].sum(), 1.0) and (sums.loc[0] >= 0).all()   # rollout with the skip path: r sums to 1
    assert not np.allclose(e.weight, compute_flow(run, FlowOptions())["edges"].weight)
    with pytest.raises(ConfigError, match="^weight: "):
        FlowOptions(weight="rollout")


def test_masking_tables(runs):
    run = load_run(runs[0])
    t = compute_mask_key(run, MaskKeyOptions(n_per_pair=5, method="pca", n_accuracy=8))
    assert list(t) == ["embedding", "accuracy"]
    assert len(t["embedding"]) == 16 * 5 and (t["embedding"].groupby("pair").size() == 5).all()
    assert set(t["embedding"].hook) == {"blocks.1.hook_do"}
    assert set(t["accuracy"]["mask"]) == {"none", "key", "anchor2"}
    g = compute_mask_anchor2(run, MaskAnchor2Options(g_values=(40, 41, 42), n_draws=1, n_accuracy=8))
    assert list(g) == ["cosine", "summary", "accuracy"]
    assert sorted(g["cosine"].row_g.unique()) == [40, 41, 42] and len(g["cosine"]) == (3 * 4) ** 2
    assert g["summary"].metric.tolist() == ["equal_g_contrast"] and np.isfinite(g["summary"].value).all()


def test_compare_runs_side_by_side(runs):
    df = compare_runs(runs, n_inputs=32, n_draws=1)
    assert list(df.run) == [str(r) for r in runs]
    assert df.gamma.tolist() == pytest.approx([0.3, 0.7])
    assert df.ood_inferential_acc.isna().all()  # no final.json in these runs
    flow_cols = [c for c in df.columns if c.startswith("L0 ") or c.startswith("L1 ")]
    assert len(flow_cols) == 6
    assert df[flow_cols].apply(lambda s: s.between(0, 1)).all().all()
    contrast = [c for c in df.columns if c.startswith("contrast")]
    assert len(contrast) == 6 and np.isfinite(df[contrast].to_numpy()).all()
    # loaded runs give the same row as directories
    again = compare_runs([load_run(runs[1])], n_inputs=32, n_draws=1)
    pd.testing.assert_frame_equal(again, df.iloc[[1]].reset_index(drop=True))


def test_figure_titles_name_the_gamma_convention():
    """A figure's title says whether its gamma is plain or read at init.ref_width."""
    from types import SimpleNamespace

    from anchorlab.analysis.registry import run_label

    def run(w):
        return SimpleNamespace(run_dir="/x/abc", cfg=SimpleNamespace(init=SimpleNamespace(gamma=0.8, ref_width=w)))
    assert run_label(run(None)) == "abc (gamma=0.8, plain)"
    assert run_label(run(400)) == "abc (gamma=0.8 at width 400)"
