"""Mechanism analyses of a trained anchor-task run, as pure functions (tables out).

Each analysis is an options dataclass plus ``compute_<name>(run, opts) ->
{table name: DataFrame}`` (first table = the main one); figures live in
:mod:`anchorlab.plots.mechanism`, and :mod:`anchorlab.analysis.registry` ties
names, options, files and figures together. See ``docs/mechanism.md``.

  flow          information flow of one input          NeurIPS Fig. 3a,c       (.flow)
  flow-scores   mean role-to-role attention per layer  NeurIPS Fig. 3a,c       (.flow)
  mask-key      key token masked -> 2-D embedding      journal Fig. 4A,C       (.masks)
  mask-anchor2  second anchor masked -> cosine by g    journal Fig. 4B,D       (.masks)
  tsne-ao1      t-SNE of X_ao(1) at the last position  NeurIPS Fig. 3b         (.representations)
  cos-ao2       cosine of X_ao(2), equal-f boxes       NeurIPS Fig. 4a,b       (.representations)
  cos-v2        cosine of V(2) at anchor 1, equal-g    NeurIPS Fig. 4c         (.representations)

:func:`compare_runs` puts the headline numbers of several runs side by side.
"""

from anchorlab.analysis.mechanism.common import PAPER_EXAMPLE
from anchorlab.analysis.mechanism.compare import CompareRunsOptions, compare_runs, run_summary
from anchorlab.analysis.mechanism.flow import FlowOptions, FlowScoresOptions, compute_flow, compute_flow_scores
from anchorlab.analysis.mechanism.masks import MaskAnchor2Options, MaskKeyOptions, compute_mask_anchor2, compute_mask_key
from anchorlab.analysis.mechanism.representations import (CosAo2Options, CosV2Options, TsneAo1Options, compute_cos_ao2, compute_cos_v2,
                              compute_tsne_ao1)

__all__ = ["PAPER_EXAMPLE", "CompareRunsOptions", "compare_runs", "run_summary", "FlowOptions", "FlowScoresOptions", "compute_flow",
           "compute_flow_scores", "MaskKeyOptions", "MaskAnchor2Options", "compute_mask_key", "compute_mask_anchor2",
           "TsneAo1Options", "CosAo2Options", "CosV2Options", "compute_tsne_ao1", "compute_cos_ao2",
           "compute_cos_v2"]
