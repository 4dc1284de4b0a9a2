"""Complexity analyses of a trained run, as files: ``anchorlab analyze RUN <name>``.

Names: ``condensation`` (cosine heatmap of a matrix's rows, reordered into
condensed blocks, + scores), ``embedding`` (PCA of token embeddings with value
labels + ordinal scores), ``cov-spectrum`` (eigenvalues of the covariance of the
token embeddings of the final weights; for the trajectory over training use
``train.log_complexity``), ``stable-rank`` (every matrix's stable rank). Each writes
``<out>/<name>.png`` and ``<out>/<name>.csv`` and returns the paths.
:func:`complexity_summary` gives the scalar scores of several runs side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from ..config import ConfigError
from ..io import atomic_write

NAMES = ("condensation", "embedding", "cov-spectrum", "stable-rank")
DEFAULT_MATRIX = "blocks.0.attn.W_Q.weight"


def _csv(df: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda p: df.to_csv(p, index=False))


def run_complexity_analysis(run_dir: str | Path, name: str, out_dir: str | Path | None = None,
                            param: str = DEFAULT_MATRIX, tokens: Sequence[int] = range(40, 80),
                            threshold: float = 0.9) -> dict[str, Path]:
    from ..plots.complexity import (plot_cosine_heatmap, plot_covariance_spectrum, plot_embedding_pca)
    from ..plots.training import save_figure
    from ..train.loop import load_run
    from .condensation import condensation_order, condensation_scores, cosine_matrix
    from .embedding import covariance_spectra_by_step, embedding_pca
    from .spectra import as_param_dict, get_param, stable_rank_table

    if name not in NAMES:
        raise ConfigError(f"analysis: {name!r} is not a complexity analysis; choose from {', '.join(NAMES)}")
    res = load_run(run_dir)
    out = Path(out_dir) if out_dir else Path(run_dir) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    params = as_param_dict(res.model)
    E = get_param(params, "embed.weight", "embedding")
    paths: dict[str, Path] = {}
    if name == "condensation":
        W = get_param(params, param, "param")
        C = cosine_matrix(W)
        order = condensation_order(C)
        scores = condensation_scores(W, threshold=threshold)
        paths["csv"] = _csv(pd.DataFrame([{"param": param, **scores}]), out / "condensation.csv")
        fig = plot_cosine_heatmap(C, order=order, title=f"{param}: cosine of rows (reordered)")
        paths["png"] = save_figure(fig, out / "condensation", formats=("png",))[0]
    elif name == "embedding":
        df = embedding_pca(E, list(tokens))
        paths["csv"] = _csv(df, out / "embedding.csv")
        paths["png"] = save_figure(plot_embedding_pca(df, arrow_steps=(3, 4)), out / "embedding", formats=("png",))[0]
    elif name == "cov-spectrum":
        spectra = covariance_spectra_by_step({int(res.final.get("steps", 0) or 0): E}, list(tokens))
        paths["csv"] = _csv(spectra, out / "cov-spectrum.csv")
        paths["png"] = save_figure(plot_covariance_spectrum(spectra), out / "cov-spectrum", formats=("png",))[0]
    elif name == "stable-rank":
        table = stable_rank_table(params)
        paths["csv"] = _csv(table, out / "stable-rank.csv")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, max(3, 0.22 * len(table))))
        ax.barh(table["name"], table["stable_rank"])
        ax.set_xlabel("stable rank ||W||_F^2 / ||W||_2^2")
        ax.invert_yaxis()
        fig.tight_layout()
        paths["png"] = save_figure(fig, out / "stable-rank", formats=("png",))[0]
    return paths


def complexity_summary(run_dirs: Sequence[str | Path], param: str = DEFAULT_MATRIX,
                       tokens: Sequence[int] = range(40, 80), threshold: float = 0.9) -> pd.DataFrame:
    """One row per run: gamma, condensation scores of ``param``, its stable rank, ordinal scores."""
    from ..train.loop import config_of, load_run
    from .condensation import condensation_scores
    from .embedding import difference_consistency, ordinal_probe_r2, ordinal_rank_correlation
    from .spectra import as_param_dict, get_param, stable_rank

    rows = []
    for rd in run_dirs:
        cfg = config_of(rd)
        p = as_param_dict(load_run(rd).model)
        W, E = get_param(p, param, "param"), get_param(p, "embed.weight", "embedding")
        s = condensation_scores(W, threshold=threshold)
        dc = difference_consistency(E, list(tokens), steps=(3, 4))
        rows.append({"run": str(rd), "gamma": cfg.init.gamma, "d_model": cfg.model.d_model,
                     "weight_decay": cfg.optim.weight_decay,
                     "stable_rank": stable_rank(W), "largest_group_frac": s["largest_group_frac"],
                     "effective_directions": s["effective_directions"], "mean_abs_cos": s["mean_abs_cos"],
                     "ordinal_spearman": ordinal_rank_correlation(E, list(tokens)),
                     "ordinal_r2": ordinal_probe_r2(E, list(tokens)),
                     **{f"diff_consistency_{k}": v for k, v in dc.items()}})
    return pd.DataFrame(rows)


def sweep_stable_ranks(sweep_dir: str | Path, param: str = DEFAULT_MATRIX) -> pd.DataFrame:
    """Stable rank of ``param`` (default: the merged first-layer query weights,
    all heads) for every finished run of a sweep: DataFrame(run_id, stable_rank)."""
    from ..train.loop import load_run
    from .spectra import as_param_dict, get_param, stable_rank

    rows = []
    for rd in sorted((Path(sweep_dir) / "runs").glob("*")):
        if not (rd / "model.safetensors").exists():
            continue
        W = get_param(as_param_dict(load_run(rd).model), param, "param")
        rows.append({"run_id": rd.name, "stable_rank": stable_rank(W)})
    return pd.DataFrame(rows, columns=["run_id", "stable_rank"])
