"""Early predictors of the solution a run will find on the anchor task (see docs/predictors.md).

At one init scale the same gamma can compose or memorize depending on the seeds alone. The
features here describe one model state (at step 0 or early in training) by the quantities the
papers' complexity story names, plus two direct probes of the held-out pair; the study scores
each by AUC (:mod:`.auc`) for "composes" vs "memorizes".

With ``pair = (4, 3)`` the held-out pair and ``mirror = (3, 4)`` its trained mirror, the keys of
:func:`run_features` are (every value a float, NaN where undefined):

- ``embed/cos_pair``: cosine of the embedding rows of the two anchors of ``pair``,
  ``cos(E[4], E[3])`` with ``E = embed.weight`` (vocab, d_model).
- ``embed/cos_a{a}_keys`` for each anchor ``a``: mean over key tokens ``x`` in
  ``value_min..value_max`` of ``cos(E[a], E[x])``.
- ``attn/l0_last_to_anchors_pair`` / ``attn/l0_last_to_anchors_trained``: in layer 0, the
  attention weight of the last position to the first anchor plus that to the second anchor
  (the mass on both anchors, in [0, 1]), averaged over heads and over the inputs of ``pair``
  (its two key-split groups) / the first ``n_per_group`` (64) inputs of every trained pair's
  ``train`` group. Only inputs whose key
  position is at most ``seq_len - 4`` count, so the last position is a filler, never an anchor.
- ``cond/wq0_<score>`` and ``cond/win0_<score>``: :func:`.condensation.condensation_scores` of
  ``blocks.0.attn.W_Q.weight`` (unsigned) and ``blocks.0.mlp.W_in.weight`` (signed) for the
  scores in :data:`COND_SCORES`.
- ``srank/<name>`` for each of :data:`SRANK_PARAMS` and ``srank/mean``, their mean
  (:func:`.spectra.stable_rank`).
- ``order/spearman`` and ``order/r2``: :func:`.embedding.ordinal_rank_correlation` and
  :func:`.embedding.ordinal_probe_r2` of the embedding rows of tokens 40..79.
- ``margin/pair``: mean over the inputs of ``pair`` of ``logit[inferential] - logit[symmetric]``
  at the last position: for (4, 3), ``logit[x - 10] - logit[x - 6]``. Positive leans to
  composing.
- ``grad/cos_mirror_rest`` (only when ``train_data`` is given): :func:`gradient_alignment`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import torch

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.tasks.anchor import AnchorData, AnchorTask
from anchorlab.analysis.attention import attention_patterns
from anchorlab.analysis.condensation import condensation_scores
from anchorlab.analysis.embedding import DEFAULT_TOKENS, ordinal_probe_r2, ordinal_rank_correlation
from anchorlab.analysis.spectra import as_param_dict, get_param, stable_rank

log = logging.getLogger(__name__)

PAIR: tuple[int, int] = (4, 3)
COND_SCORES: tuple[str, ...] = ("largest_group_frac", "mean_abs_cos", "effective_directions_frac")
SRANK_PARAMS: tuple[str, ...] = ("blocks.0.attn.W_Q.weight", "blocks.0.attn.W_K.weight",
                                 "blocks.0.mlp.W_in.weight", "embed.weight")

Groups = Mapping[tuple[tuple[int, int], str], AnchorData]


def _cos(u: torch.Tensor, v: torch.Tensor) -> float:
    """Cosine of two vectors (d,) in float64; NaN if either is zero."""
    u, v = u.double(), v.double()
    nu, nv = float(u.norm()), float(v.norm())
    return float(u @ v) / (nu * nv) if nu > 0 and nv > 0 else float("nan")


def anchor_embedding_features(E: torch.Tensor, task: AnchorTask, pair: tuple[int, int] = PAIR) -> dict[str, float]:
    """``embed/cos_pair`` and ``embed/cos_a{a}_keys`` of the embedding ``E`` (vocab, d_model)."""
    E = E.detach().to("cpu", torch.float64)
    a, b = pair
    out = {"embed/cos_pair": _cos(E[a], E[b])}
    keys = torch.arange(task.cfg.value_min, task.cfg.value_max + 1)
    K = E[keys]                                                          # (n_keys, d)
    kn = K.norm(dim=1)
    for anchor in sorted(task.cfg.anchors):
        v = E[int(anchor)]
        if float(v.norm()) == 0 or bool((kn == 0).any()):
            out[f"embed/cos_a{anchor}_keys"] = float("nan")
            continue
        out[f"embed/cos_a{anchor}_keys"] = float(((K @ v) / (kn * v.norm())).mean())
    return out


def _cat(groups: Sequence[AnchorData]) -> AnchorData:
    return AnchorData(*(torch.cat([getattr(g, f) for g in groups])
                        for f in ("tokens", "targets", "pair", "key", "key_pos")))


def pair_inputs(task: AnchorTask, eval_data: Groups, pair: tuple[int, int] = PAIR) -> AnchorData:
    """Every evaluation input of ``pair`` (both key splits; ``seen`` groups excluded)."""
    groups = [d for (p, s), d in eval_data.items() if tuple(p) == tuple(pair) and s in ("train", "test")]
    if not groups:
        raise ConfigError(f"pair: no evaluation group of pair {pair}; groups: {sorted({p for p, _ in eval_data})}")
    return _cat(groups)


def trained_inputs(task: AnchorTask, eval_data: Groups, n_per_group: int | None = 64) -> AnchorData:
    """The first ``n_per_group`` inputs (all if None) of the ``train`` key-split evaluation group of
    every trained pair, concatenated."""
    groups = [eval_data[(p, "train")] for p in task.trained_pairs if (p, "train") in eval_data]
    groups = [AnchorData(*(getattr(g, f)[:n_per_group] for f in ("tokens", "targets", "pair", "key", "key_pos")))
              for g in groups]
    if not groups:
        raise ConfigError("eval_data: no 'train' group of any trained pair")
    return _cat(groups)


def last_to_anchor_attention(model: torch.nn.Module, data: AnchorData, layer: int = 0) -> float:
    """Mean over heads and inputs of ``A[layer, b, h, T-1, p_b+1] + A[layer, b, h, T-1, p_b+2]``.

    ``A`` (L, B, H, T, T) is the post-softmax pattern (:func:`.attention.attention_patterns`), ``p_b``
    the key position of input b; only inputs with ``p_b <= T - 4`` count. NaN if none does.
    """
    T = data.tokens.shape[1]
    keep = data.key_pos <= T - 4
    if not bool(keep.any()):
        return float("nan")
    tokens, p = data.tokens[keep], data.key_pos[keep]
    A = attention_patterns(model, tokens)[layer].double()                # (B, H, T, T)
    rows = torch.arange(len(p))
    last = A[:, :, T - 1, :]                                             # (B, H, T)
    mass = last[rows, :, p + 1] + last[rows, :, p + 2]                   # (B, H)
    return float(mass.mean())


@torch.no_grad()
def logit_margin(model: torch.nn.Module, task: AnchorTask, data: AnchorData,
                 pair: tuple[int, int] = PAIR, batch_size: int = 4096) -> float:
    """Mean over inputs of ``logit[x + s_inf] - logit[x + s_sym]`` at the last position, where ``s_inf``
    and ``s_sym`` are ``pair``'s inferential and symmetric shifts (:meth:`PairRules.hypotheses`)."""
    hyp = task.hypotheses(tuple(pair))
    if hyp["symmetric"] is None:
        raise ConfigError(f"pair: {pair} has no symmetric hypothesis (its mirror is not trained)")
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    V = task.dims()["vocab_size"]
    out = []
    for i in range(0, len(data), batch_size):
        logits = model(data.tokens[i:i + batch_size].to(dev), last_only=True).double().cpu()   # (B, V)
        x = data.key[i:i + batch_size]
        inf = (x + hyp["inferential"]).clamp(0, V - 1)
        sym = (x + hyp["symmetric"]).clamp(0, V - 1)
        rows = torch.arange(len(x))
        out.append(logits[rows, inf] - logits[rows, sym])
    model.train(was)
    return float(torch.cat(out).mean())


def _pair_rows(data: AnchorData, pairs: Sequence[tuple[int, int]]) -> torch.Tensor:
    sel = torch.zeros(len(data), dtype=torch.bool)
    for a, b in pairs:
        sel |= (data.pair[:, 0] == a) & (data.pair[:, 1] == b)
    return torch.nonzero(sel).flatten()


def _loss_grad(model: torch.nn.Module, task: AnchorTask, data: AnchorData, idx: torch.Tensor) -> torch.Tensor:
    dev = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    loss = task.loss(lambda t, last_only=False: model(t, last_only=last_only),
                     {"tokens": data.tokens[idx].to(dev), "targets": data.targets[idx].to(dev)})
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1).double().cpu()
                      for g, p in zip(grads, params)])


def gradient_alignment(model: torch.nn.Module, task: AnchorTask, batch: AnchorData,
                       mirror: tuple[int, int] = (3, 4), n: int = 512) -> float:
    """Cosine between two loss gradients over all trainable parameters (flattened, concatenated).

    ``g_mirror``: gradient of the task loss (mean cross-entropy at the last position) on the first
    ``n`` rows of ``batch`` whose pair is ``mirror`` (the trained (3, 4) -> x-6 sequences);
    ``g_rest``: the same on the first ``n`` rows of every other trained pair. Returns
    ``<g_mirror, g_rest> / (|g_mirror| |g_rest|)`` in [-1, 1]: positive when a step on the mirror
    also lowers the loss of the composable pairs. Computed in eval mode; the model is unchanged.
    NaN if either side has no rows or a zero gradient. Meant for step 0 (any state works).
    """
    mi = _pair_rows(batch, [tuple(mirror)])[:n]
    rest = [p for p in task.trained_pairs if tuple(p) != tuple(mirror)]
    ri = _pair_rows(batch, rest)[:n]
    if len(mi) == 0 or len(ri) == 0:
        return float("nan")
    was = model.training
    model.eval()
    try:
        with torch.enable_grad():
            ga, gb = _loss_grad(model, task, batch, mi), _loss_grad(model, task, batch, ri)
    finally:
        model.train(was)
    na, nb = float(ga.norm()), float(gb.norm())
    return float(ga @ gb) / (na * nb) if na > 0 and nb > 0 else float("nan")


def weight_features(params: Mapping[str, torch.Tensor] | torch.nn.Module) -> dict[str, float]:
    """``cond/*``, ``srank/*`` and ``order/*`` of a model's weights (see the module docstring)."""
    p = as_param_dict(params)
    out: dict[str, float] = {}
    for tag, name, signed in (("wq0", "blocks.0.attn.W_Q.weight", False), ("win0", "blocks.0.mlp.W_in.weight", True)):
        scores = condensation_scores(get_param(p, name), signed=signed)
        out.update({f"cond/{tag}_{k}": float(scores[k]) for k in COND_SCORES})
    ranks = [stable_rank(get_param(p, n)) for n in SRANK_PARAMS]
    out.update({f"srank/{n}": r for n, r in zip(SRANK_PARAMS, ranks)})
    out["srank/mean"] = float(torch.tensor(ranks, dtype=torch.float64).mean())
    E = get_param(p, "embed.weight").detach().to("cpu", torch.float64)
    out["order/spearman"] = ordinal_rank_correlation(E, DEFAULT_TOKENS)
    out["order/r2"] = ordinal_probe_r2(E, DEFAULT_TOKENS)
    return out


def run_features(model: torch.nn.Module, task: AnchorTask, eval_data: Groups, train_data: AnchorData | None = None,
                 pair: tuple[int, int] = PAIR, n_grad: int = 512, n_per_group: int | None = 64) -> dict[str, float]:
    """Every predictor of one model state as ``{feature: float}`` (keys: the module docstring).

    ``eval_data``: :meth:`AnchorTask.eval_data` groups (pair, split) -> :class:`AnchorData`;
    ``train_data``: the training set, for ``grad/cos_mirror_rest`` (left out when None); ``n_grad``:
    rows per side of :func:`gradient_alignment`; ``n_per_group``: inputs per trained pair for
    ``attn/l0_last_to_anchors_trained``.
    """
    with torch.no_grad():
        out = anchor_embedding_features(model.embed.weight, task, pair)
        out["attn/l0_last_to_anchors_pair"] = last_to_anchor_attention(model, pair_inputs(task, eval_data, pair))
        out["attn/l0_last_to_anchors_trained"] = last_to_anchor_attention(model, trained_inputs(task, eval_data, n_per_group))
        out.update(weight_features(model))
    out["margin/pair"] = logit_margin(model, task, pair_inputs(task, eval_data, pair), pair)
    if train_data is not None:
        out["grad/cos_mirror_rest"] = gradient_alignment(model, task, train_data, (pair[1], pair[0]), n_grad)
    return out


def features_at_init(cfg: ExperimentConfig, n_grad: int = 512, n_per_group: int | None = 64) -> dict[str, float]:
    """:func:`run_features` of the step-0 model of the run ``cfg`` names (an :class:`ExperimentConfig`):
    the init is a function of the config (``train.init_seed``), so a finished run's step-0 features need
    no checkpoint. Uses the run's data seed for the evaluation and training data."""
    from anchorlab.tasks.base import build_task
    from anchorlab.train import init_model

    task = build_task(cfg.task)
    model = init_model(cfg)[0]
    seed = cfg.train.data_seed
    return run_features(model, task, task.eval_data(seed), task.train_data(seed), PAIR, n_grad, n_per_group)


class PredictorCallback:
    """Logs :func:`run_features` (keys prefixed ``pred/``) at each evaluation; ``train.log_predictors``.

    Built by the run lifecycle as ``PredictorCallback(task, train_data, eval_data)`` and called as
    ``cb(step, model) -> {metric: float}``. A task without a held-out ``pair`` whose mirror is trained logs nothing.
    Given the run's ``last_step``, ``eval_every`` and ``cfg``, it also logs ``verdict/p_composes`` (the built-in
    early verdict, :mod:`anchorlab.papers.analysis.verdict`, when this install has one and the run is in the setting it
    was fitted in) at the evaluation nearest the verdict's fraction of training.
    """

    def __init__(self, task: AnchorTask, train_data: AnchorData | None = None, eval_data: Groups | None = None,
                 pair: tuple[int, int] = PAIR, n_grad: int = 512, until_step: float | None = None,
                 last_step: int | None = None, eval_every: int | None = None, cfg: ExperimentConfig | None = None) -> None:
        from anchorlab.extras import require
        require("scipy.cluster.hierarchy", "train.log_predictors (condensation clustering)")
        self.task, self.train_data, self.pair, self.n_grad = task, train_data, tuple(pair), n_grad
        self.eval_data = eval_data
        self.until_step, self.last_step = until_step, last_step   # train.predictors_until: log early, and at the end
        self.verdict, self.verdict_step = None, None
        if last_step and eval_every:
            from anchorlab.papers.analysis.verdict import default_model_path, load_verdict

            have = default_model_path().is_file()   # absent outside a clone (docs/figures): no verdict logged
            differs = load_verdict().differences(cfg) if have and cfg is not None else ["no config"]
            if have and differs:   # the model speaks for the setting it was fitted in, no other
                log.info("early verdict not logged: this run differs from its fitted setting (%s)", "; ".join(differs))
            elif have:
                self.verdict = load_verdict()
                target = self.verdict.at_fraction * last_step
                evals = [*range(0, last_step + 1, eval_every), last_step]
                self.verdict_step = min(evals, key=lambda s: abs(s - target))
        self.active = (isinstance(task, AnchorTask) and self.pair in task.held_out_pairs
                       and task.hypotheses(self.pair)["symmetric"] is not None)
        if not self.active:
            log.warning("train.log_predictors: the task has no held-out pair %s with a trained mirror; "
                        "no predictors are logged", self.pair)

    def __call__(self, step: int, model: torch.nn.Module) -> dict[str, float]:
        if not self.active:
            return {}
        if (self.until_step is not None and step > self.until_step and step != self.last_step
                and step != self.verdict_step):
            return {}
        data = self.eval_data if self.eval_data is not None else self.task.eval_data(0)   # data seed 0 if not given
        feats = run_features(model, self.task, data, self.train_data, self.pair, self.n_grad)
        out = {f"pred/{k}": v for k, v in feats.items()}
        if step == self.verdict_step and self.verdict is not None:
            try:
                out["verdict/p_composes"] = self.verdict.p_composes(feats)
                log.info("early verdict at step %d: p(composes) = %.2f", step, out["verdict/p_composes"])
            except ConfigError as e:   # a feature the model needs is undefined here: say so, keep training
                log.warning("early verdict at step %d not computed: %s", step, e)
        return out
