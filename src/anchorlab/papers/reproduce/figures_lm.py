"""Language modelling: journal Fig. 7D (validation perplexity vs init rate on two data compositions)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.sweep.runtable import history_table
from anchorlab.papers.runs import run_table
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

GAMMA, PPL = "init.gamma", "final.val_ppl"   # the run table's names the tables carry
NAMES = {"python_stdlib": "code", "python_stdlib+python_docs": "code+prose",
         "RedPajamaGithub": "GitHub", "RedPajamaGithub+RedPajamaWikipedia": "GitHub+Wikipedia"}


def _composition(row: pd.Series) -> str:
    """A run's data composition, named by :data:`NAMES`, from its row's ``task.*`` columns."""
    from anchorlab.config.base import from_dict
    from anchorlab.sweep.runtable import row_section
    from anchorlab.tasks.lm.config import LMTaskConfig

    c = from_dict(LMTaskConfig, row_section(row, "task"))
    named = {frozenset(k.split("+")): v for k, v in NAMES.items()}   # the row holds the mix's keys sorted
    return named.get(frozenset(c.composition.split("+")), c.composition)


def lm_tables(rows: pd.DataFrame, history: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``finals``: one row per run of a run table under the run table's names (``composition``,
    ``init.gamma``, ``train.init_seed``, ``train.data_seed``, ``run_id``, ``final.val_ppl``, ``best_val_ppl``,
    ``final.val_loss``, ``tokens_seen``, ``steps``, ``status``, ``wall_seconds``); ``curves``: one row per
    evaluation of the history table (tokens seen = step x batch x seq_len).

    ``final.*`` is the run's last evaluation (as final.json's ``final``); ``best_val_ppl`` is the lowest
    validation perplexity after step 0 read from the history, not final.json's ``best.val_ppl``, which runs
    written before perplexity counted as lower-is-better hold as the maximum."""
    import pandas as pd

    from anchorlab.sweep.runtable import run_history

    out, curves = [], []
    for _, f in rows.iterrows():
        if f["task.name"] != "lm":
            continue
        comp = _composition(f)
        per_step = int(f["train.batch_size"]) * int(f["task.seq_len"])
        hist = run_history(history, f.run_id)
        last = hist[-1] if hist else {}
        out.append({"composition": comp, GAMMA: f[GAMMA],
                    "train.init_seed": f["train.init_seed"], "train.data_seed": f["train.data_seed"],
                    "run_id": f.run_id, PPL: last.get("val_ppl", math.nan),
                    "best_val_ppl": min((h["val_ppl"] for h in hist[1:] if h.get("val_ppl") is not None),
                                        default=math.nan),
                    "final.val_loss": last.get("val_loss", math.nan), "tokens_seen": (f.steps or 0) * per_step,
                    "steps": f.steps, "status": f.status, "wall_seconds": f.wall_seconds})
        curves += [{"composition": comp, GAMMA: f[GAMMA], "run_id": f.run_id, "step": h["step"],
                    "tokens": h["step"] * per_step, "val_ppl": h.get("val_ppl"), "train_loss": h.get("train_loss")}
                   for h in hist]
    finals_df = pd.DataFrame(out)
    if len(finals_df):
        finals_df = finals_df.sort_values(["composition", GAMMA, "train.init_seed", "train.data_seed"],
                                          ignore_index=True)
    return {"finals": finals_df, "curves": pd.DataFrame(curves)}


def summary(finals_df: pd.DataFrame) -> pd.DataFrame:
    """Composition x ``init.gamma``: seed-mean (``final_val_ppl``; ``ppl_min`` / ``ppl_max``) of the final
    validation perplexity, tokens seen, seeds (runs: one per init / data seed pair)."""
    g = finals_df.groupby(["composition", GAMMA])
    return g.agg(final_val_ppl=(PPL, "mean"), ppl_min=(PPL, "min"), ppl_max=(PPL, "max"), tokens_seen=("tokens_seen", "mean"),
                 seeds=("run_id", "nunique")).reset_index()


def make_fig7d(sweep_dir: Path, out: Path, scale: str) -> Made:
    import pandas as pd

    from anchorlab.papers.plots.lm import plot_perplexity_curves
    from anchorlab.plots.save import save_figure

    t = lm_tables(run_table([sweep_dir]), history_table([sweep_dir]))
    t["summary"] = summary(t["finals"]) if len(t["finals"]) else pd.DataFrame()
    files = {"fig7d.png": save_figure(plot_perplexity_curves(t["curves"], t["finals"]), out / "fig7d")[0]}
    return t, files


def smaller_init_lower_ppl(t: dict[str, pd.DataFrame]) -> float:
    """Fraction of compositions where the seed-mean final perplexity falls with every step up in gamma."""
    s = t["summary"]
    if s.empty:
        return math.nan
    ok = [bool((g.sort_values(GAMMA).final_val_ppl.diff().dropna() < 0).all()) for _, g in s.groupby("composition")]
    return sum(ok) / len(ok)


def ppl_ratio(t: dict[str, pd.DataFrame]) -> float:
    """Mean over compositions of final perplexity at the smallest gamma / at the largest gamma (> 1: small init wins)."""
    s = t["summary"]
    if s.empty:
        return math.nan
    r = [g.sort_values(GAMMA).final_val_ppl.iloc[0] / g.sort_values(GAMMA).final_val_ppl.iloc[-1]
         for _, g in s.groupby("composition")]
    return sum(r) / len(r)


register(Figure(
    id="journal-fig7d", cids=("C11",), paper="journal", number="Fig. 7D",
    shows="language modelling: validation perplexity vs training tokens per init rate, two data compositions",
    sweeps={"cpu": "lm_cpu", "paper": "lm_paper"}, make=make_fig7d,
    readings=(
        Reading("smaller init (larger gamma) gives lower perplexity on both compositions (fraction of compositions "
              "where final perplexity falls with every step up in gamma)", "1.0 (both)", smaller_init_lower_ppl),
        Reading("final perplexity, largest init / smallest init (mean over compositions)", "> 1", ppl_ratio),
    ),
    notes=("CPU scale: a 2-layer width-128 Hugging Face GPT-2 on offline real text (the CPython standard library; "
           "+ Python's documentation), one pass over the data; the paper: GPT-2 Medium on SlimPajama GitHub and "
           "GitHub+Wikipedia for 40B tokens (paper scale needs task.data_dir with the shards and "
           "task.tokenizer_dir with GPT-2's tokenizer files). Needs the hf and lm extras."),
    extra="hf,lm"))

register(Figure(
    id="journal-fig7d-seeds", cids=("C11",), paper="journal", number="Fig. 7D",
    shows="language modelling: validation perplexity vs init rate with the spread over three seeds (one composition)",
    sweeps={"cpu": "lm_seeds_cpu", "paper": "lm_paper"}, make=make_fig7d,
    readings=(
        Reading("smaller init (larger gamma) gives lower perplexity (fraction of compositions where the seed-mean "
              "final perplexity falls with every step up in gamma)", "1.0 (both)", smaller_init_lower_ppl),
        Reading("final perplexity, largest init / smallest init (seed means)", "> 1", ppl_ratio),
    ),
    notes=("CPU scale: the journal-fig7d model on the CPython standard library, one pass over 3M tokens, three "
           "seeds, embeddings N(0, 0.02) whatever gamma (init.embed_std, as the authors' GPT-2), gamma std-matched "
           "to GPT-2 Medium's width (init.ref_width 1024). Needs the hf and lm extras."),
    extra="hf,lm"))
