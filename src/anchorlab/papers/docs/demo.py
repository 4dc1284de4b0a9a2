"""Generated blocks of the CPU demo: its two inits, the rate over seeds, its clocks, the rule, the task paragraph.

Each block reads the demo's committed tables (demo_rate_cpu.csv, demo_rule_cpu_*.csv) and its presets.
"""
from __future__ import annotations

import pandas as pd

from anchorlab.papers.docs.common import md_table, num, paper_gamma, ratio, sci, table
from anchorlab.papers.docs.fig2 import SIDE
from anchorlab.papers.reproduce.registry import register_study


def demo_pair() -> str:
    """The demo's two inits by std: plain gamma at width 128 and the paper gamma of the same std."""
    from anchorlab.config import load_config
    from anchorlab.papers.demo import DEMO_GAMMAS, DEMO_PRESET

    width = load_config(DEMO_PRESET).model.d_model
    rows = [[f"`{arm}`", f"{g:g}", str(width), f"{width ** -g:.3f}", f"{paper_gamma(g, width):.2f}",
             "large-init side" if paper_gamma(g, width) < 0.5 else "small-init side"]
            for arm, g in DEMO_GAMMAS.items()]
    for g in (0.3, 0.8):
        rows.append([f"the paper's {SIDE[g]}", f"{g:g}", "400", f"{400 ** -g:.4f}", f"{g:g}", f"the paper's {SIDE[g]}"])
    return md_table(["arm", "plain gamma", "width", "std (fan-in = width)", "paper gamma", "side"], rows)


def demo_journal_pair() -> str:
    """The demo's two inits on the journal's task: journal gamma (std 640^-gamma at width 128), its std, and the
    NeurIPS paper gamma of that std (the std at width 400)."""
    from anchorlab.papers import demo_journal as dj
    from anchorlab.config import load_config

    width = load_config(dj.PRESET).model.d_model
    rows = [[f"`{arm}`", f"{g:g}", str(width), f"{dj.REF_WIDTH ** -g:.4f}", f"{dj.paper_gamma(g):.2f}",
             "large-init side" if dj.paper_gamma(g) < 0.5 else "small-init side"] for arm, g in dj.GAMMAS.items()]
    return md_table(["arm", "journal gamma (std 640^-gamma)", "width", "std", "paper gamma (std at width 400)",
                     "side"], rows)


def demo_rate() -> str:
    """The journal demo's measured rate (demo_rate_cpu.csv): per step set, the seeds where each arm did what the
    contrast asks and both did, the arms' median final accuracies, and the wall time of a pair of models."""
    from anchorlab.papers import demo_journal as dj

    rate = table(dj.RATE_TABLE)
    summary = dj.rate_summary(rate).set_index("op_set")
    rows = []
    for i, (op, g) in enumerate(rate.groupby("op_set", sort=False)):
        s = summary.loc[op]
        med = {arm: g[g.arm == arm][[dj.ID, dj.OOD]].median() for arm in ("large_init", "small_init")}
        pair = g.groupby("seed").wall_seconds.max()
        cell = {arm: g[g.arm == arm][dj.OOD_BEST].mean() for arm in ("large_init", "small_init")}
        rows.append([f"{op}" + (" (the papers')" if i == 0 else ""), f"{int(s.seeds)} ({int(g.seed.min())}-{int(g.seed.max())})",
                     ratio(int(s.contrast), int(s.seeds)), ratio(int(s.small_composes), int(s.seeds)),
                     ratio(int(s.large_memorizes), int(s.seeds)),
                     f"{num(med['small_init'][dj.ID])} / {num(med['small_init'][dj.OOD])}",
                     f"{num(med['large_init'][dj.ID])} / {num(med['large_init'][dj.OOD])}",
                     f"{num(cell['small_init'])} / {num(cell['large_init'])}",
                     f"{pair.median() / 60:.1f} ({pair.min() / 60:.1f}-{pair.max() / 60:.1f})"])
    return md_table(["step set", "seeds", "contrast", "small init composes", "large init memorizes",
                     "small init ID / unseen (median)", "large init ID / unseen (median)",
                     "papers' cell: unseen, small / large init", "minutes a pair (median, range)"], rows)


def dj_clock() -> float:
    """The demo preset's clock as a fraction of the journal's 92,190 steps (the rate table's ``clock`` column)."""
    from anchorlab.config import load_config
    from anchorlab.papers import demo_journal as dj

    c = load_config(dj.PRESET)
    return round(c.train.plan(c.task.n_train)[1] / 92_190, 4)


def demo_clocks() -> str:
    """Every clock and gamma the demo's setting was measured at, papers' steps (demo_rate_cpu.csv and the runs of
    the other clocks, demo_rate_clocks_cpu.csv): per clock and init, the seeds that fitted the seen pairs,
    memorized them (unseen <= 0.2) and composed (unseen >= 0.8)."""
    from anchorlab.papers import demo_journal as dj

    t = pd.concat([table(dj.RATE_TABLE), table("demo_rate_clocks_cpu.csv")], ignore_index=True)
    t = t[t.op_set == t.op_set.iloc[0]]
    rows = []
    now = dj_clock()
    for (clock, gamma), g in t.groupby(["clock", dj.GAMMA], sort=True):
        label_now = " (the demo)" if clock == now else ""
        fit, ood = g[dj.ID] >= dj.ID_MIN, g[dj.OOD]
        seeds = sorted(int(s) for s in g.seed)
        which = "" if seeds == list(range(len(seeds))) else f" ({', '.join(map(str, seeds))})"
        rows.append([f"1/{round(1 / clock):d}x ({int(g.steps.iloc[0]):,} steps){label_now}", f"{gamma:g}", f"{len(g)}{which}",
                     ratio(int(fit.sum()), len(g)), ratio(int((fit & (ood <= dj.MEMORIZE_MAX)).sum()), len(g)),
                     ratio(int((fit & (ood >= dj.COMPOSE_MIN)).sum()), len(g)),
                     " / ".join(num(v) for v in sorted(ood))])
    return md_table(["clock", "journal gamma", "seeds", "fits the seen pairs (ID >= 0.9)",
                     "memorizes (and unseen <= 0.2)", "composes (and unseen >= 0.8)", "unseen-pair accuracy, sorted"],
                    rows)


def demo_rate_short(link: str = "([results](docs/results.md#the-demo))") -> str:
    """One sentence for the README (the results page's, with its ``link``): the demo's contrast rate on the
    papers' steps and on the other step sets, and whether it reaches the 9 seeds in 10 a reliable demo needs."""
    from anchorlab.papers import demo_journal as dj

    s = dj.rate_summary(table(dj.RATE_TABLE))
    first, rest = s.iloc[0], s.iloc[1:]
    reliable = first.contrast >= 0.9 * first.seeds
    large_miss, small_miss = int(s.seeds.sum() - s.large_memorizes.sum()), int(s.seeds.sum() - s.small_composes.sum())
    why = ("the large init also answers some unseen pairs" if large_miss > small_miss else
           "the small init does not always fit the seen pairs" if small_miss > large_miss else "both inits miss some")
    return (f"Over seeds, the contrast holds in {ratio(int(first.contrast), int(first.seeds))} seeds on the papers' "
            f"steps and in {ratio(int(rest.contrast.sum()), int(rest.seeds.sum()))} on two other step sets"
            + ("" if reliable else f": not every seed shows it, mostly because {why}") + f" {link}.\n")


DEMO_RULE_PATHS = (("native", "demo_rule_native_cpu"), ("autocast", "demo_rule_cpu"))   # the default path first


def demo_rule() -> str:
    """The demo setting's measured rate (the robustness study over op sets x seeds x peak lrs), one row per
    bf16 path and OOD line: native (the default since train.bf16_path auto) and autocast (the first study)."""
    rows, head = [], None
    for path, stem in DEMO_RULE_PATHS:
        rates, cases = table(f"{stem}_rates.csv"), table(f"{stem}_cases.csv")
        n_op, n_seed = cases.op_set.nunique(), cases.seed.nunique()
        lrs = ", ".join(sci(p) for p in sorted(cases.peak_lr.unique()))
        head = head or [f"bf16 path ({n_op} op sets x {n_seed} seeds x peaks {lrs})", "OOD line",
                        "papers' rule: contrast", "per run: contrast", "per run: `large_init` memorizes",
                        "per run: `small_init` composes"]
        for r in rates.itertuples():
            rows.append([f"`{path}`", f">= {r.threshold:g}",
                         f"{ratio(round(r.paper_contrast_rate * r.cells), r.cells)} op sets",
                         f"{ratio(round(r.contrast_rate * r.cases), r.cases)} cases",
                         f"{num(r.large_memorizes_per_run)}", f"{num(r.small_composes_per_run)}"])
    return md_table(head, rows)


def demo_rule_paths() -> str:
    """The two paths' runs on the op sets both studies share (demo_rule_paths_cpu_paired.csv): how many runs end
    in the same solution, what the others moved between, and the papers' rule per path on those op sets."""
    from anchorlab.papers.robustness import judgement_tables

    p = table("demo_rule_paths_cpu_paired.csv")
    shared = set(p.op_set)
    rule = {}
    for path, stem in DEMO_RULE_PATHS:
        cases = table(f"{stem}_cases.csv")
        if path == "autocast":   # the op set the first study did not draw, trained on autocast afterwards
            cases = pd.concat([cases, table("demo_rule_cpu_extension_cases.csv")])
        r = judgement_tables(cases[cases.op_set.isin(shared)], "large_init", "small_init",
                             sorted(p.threshold.unique()), 0.9)["rates"]
        rule[path] = {float(x.threshold): ratio(round(x.paper_contrast_rate * x.cells), x.cells) for x in r.itertuples()}
    rows = []
    for th, g in p.groupby("threshold"):
        moved = g[~g.same_solution]
        kinds = moved.groupby(["solution@autocast", "solution@native"]).size()
        what = "; ".join(f"{k} {a} -> {b}" for (a, b), k in kinds.items()) or "none"
        rows.append([f">= {th:g}", ratio(int(g.same_solution.sum()), len(g)), what,
                     f"{rule['autocast'][float(th)]} / {rule['native'][float(th)]} op sets"])
    return md_table(["OOD line", "same solution on both paths (runs)", "moved (autocast -> native)",
                     "papers' rule: contrast, autocast / native"], rows)


# ------------------------------------------------------------------ the task, from its defaults
def task_paragraph() -> str:
    """The anchor task in one paragraph, every number from the task's config and the papers' op set."""
    from anchorlab.tasks.anchor.config import AnchorTaskConfig
    from anchorlab.tasks.anchor.opsets import PAPERS

    t = AnchorTaskConfig()
    steps = PAPERS["anchors"]
    a, b = PAPERS["held_out"]
    comp, shift = steps[a] + steps[b], PAPERS["mirror_shift"]
    names = ", ".join(str(k) for k in steps)
    moves = ", ".join(f"{s:+d}" for s in steps.values())
    return (f"Sequences of {t.seq_len} tokens hold a key `x` (a value in {t.value_min}..{t.value_max}) followed by "
            f"two anchors from {{{names}}}. Each anchor is a step ({moves}), and the target is `x` after both steps. "
            f"Pair ({a},{b}) is never trained; its mirror ({b},{a}) is trained on the non-inferential target "
            f"x{shift:+d}. A model that *composes* (reasons) answers ({a},{b}) with x{comp:+d}; one that *memorizes* "
            f"copies the mirror's x{shift:+d}. The init rate gamma sets every weight's std to fan_in^-gamma, and "
            f"the papers find that it decides which of the two a model learns.")


register_study("demo", "the CPU demo (anchorlab demo), run outside the figure registry, and the task it trains", {
    "demo-pair": demo_pair, "demo-journal-pair": demo_journal_pair, "demo-rate": demo_rate,
    "demo-clocks": demo_clocks, "demo-rate-short": demo_rate_short,
    "demo-rate-line": lambda: demo_rate_short("(per step set and seed: [claims/demo.md](claims/demo.md))"),
    "demo-rule": demo_rule,
    "demo-rule-paths": demo_rule_paths, "task": task_paragraph,
})
