"""The commands over many runs: ``demo``, ``robustness``, ``sweep`` and ``report``."""

from __future__ import annotations

import argparse
from pathlib import Path

from anchorlab.cli.support import anchor_only, dry_run, preset_lines, will_create


def cmd_demo(a: argparse.Namespace) -> int:
    if a.task == "journal":
        return _demo_journal(a)
    from anchorlab.config import ConfigError

    if a.seed != 0 or a.op_set != 0:
        raise ConfigError("--seed / --op-set: --task journal only (the mirror task's demo takes --seeds and "
                          "--set train.init_seed=N)")
    return _demo_neurips(a)


def _demo_journal(a: argparse.Namespace) -> int:
    import pandas as pd

    from anchorlab.papers import demo_journal as dj
    from anchorlab.config import ConfigError

    if a.peak_lrs or a.thresholds != [0.5, 0.8]:
        raise ConfigError("--peak-lrs / --thresholds: --task neurips only (the journal demo trains at the "
                          "preset's peak lr and judges by its fixed bars; see docs/demo.md)")
    anchor_only("demo", dj.PRESET, a.set)
    spec = dj.spec(a.set, a.seeds, a.seed, a.op_set)
    if a.dry_run:
        print(dj.expected_line(a.seeds, a.workers, a.set))
        return dry_run(spec, Path(a.out), a.workers)
    print(f"anchorlab demo: two models on the journal's task ((3,4) and (4,3) unseen, no mirror trained), "
          f"preset {dj.PRESET}: large_init journal gamma {dj.GAMMAS['large_init']:g} and small_init "
          f"{dj.GAMMAS['small_init']:g} (std 640^-gamma), seed {a.seed}"
          + (f"..{a.seed + a.seeds - 1}" if a.seeds > 1 else "")
          + (f", step set {a.op_set}" if a.op_set else "") + f", {a.workers} worker process(es)", flush=True)
    print(dj.expected_line(a.seeds, a.workers, a.set), flush=True)
    will_create(a, Path(a.out))

    table = dj.run(a.out, a.set, workers=a.workers, seeds=a.seeds, first_seed=a.seed, op_set=a.op_set,
                   progress=not a.no_progress)
    cols = ["arm", "seed", dj.GAMMA, "paper_gamma", dj.ID, dj.OOD, "answer_composition",
            "answer_trained_target", "answer_other", "wall_seconds"]
    shown = {dj.GAMMA: "journal_gamma", dj.ID: "id_acc", dj.OOD: "ood_acc", "answer_composition": "ans_composed",
             "answer_trained_target": "ans_seen_target", "answer_other": "ans_other"}   # short headers for the terminal
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[cols].rename(columns=shown)
              .to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("ID: seen pairs on ID-test keys; OOD: the unseen pairs (3,4) and (4,3) answered x + s3 + s4 (both unseen "
          "pairs share that target: the steps add); ans_*: the share of unseen-pair answers that are the "
          "composition, a seen pair's target, or other")
    for r in table.itertuples(index=False):
        print(f"  {r.arm} (seed {r.seed}): {r.verdict}; top answer on the unseen pairs {r.top_answer}")
    print(f"rule: {dj.RULE}")
    print("this setting's measured rate (docs/figures/demo_rate_cpu.csv, docs/results.md#the-demo):")
    print("\n".join(dj.measured_lines()))
    print(dj.plain_sentence(table))
    print(f"\nwrote {Path(a.out) / 'summary.json'} and {Path(a.out) / 'demo.png'}")
    return 0


def _demo_neurips(a: argparse.Namespace) -> int:
    import pandas as pd

    from anchorlab.papers.demo import DEMO_GAMMAS, DEMO_PRESET, measured_line, plain_verdict, run_demo

    anchor_only("demo", DEMO_PRESET, a.set)
    if a.dry_run:
        from anchorlab.papers.demo import demo_spec

        return dry_run(demo_spec(a.set, a.seeds, a.peak_lrs), Path(a.out), a.workers)
    print(f"anchorlab demo: training a large-init and a small-init model on the 'neurips' anchor task "
          f"(preset {DEMO_PRESET}, gammas {DEMO_GAMMAS}) in {a.workers} worker process(es)...", flush=True)
    will_create(a, Path(a.out))
    table = run_demo(a.out, a.set, workers=a.workers, progress=not a.no_progress, seeds=a.seeds,
                     peak_lrs=a.peak_lrs, thresholds=a.thresholds)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        shown = table.drop(columns=["final.train_acc", "run_dir"] + (["train.init_seed"] if a.seeds == 1 else [])
                           + ([] if a.peak_lrs else ["peak_lr"]), errors="ignore")
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", formatters={"peak_lr": "{:g}".format}))
    r = table.attrs["rates"]
    print(f"\ncontrast (large init: symmetric >= 0.8, small init: inferential >= 0.8, ID >= 0.9 both) in "
          f"{r['contrast_rate']:.0%} of {r['cases']} seed(s)" + (" x lr(s)" if a.peak_lrs else ""))
    print("\n".join(table.attrs["summary"]))
    print(measured_line(a.set))
    print(plain_verdict(table))
    print(f"\nwrote {Path(a.out) / 'summary.json'} and {Path(a.out) / 'ood_over_training.png'}")
    return 0


def cmd_robustness(a: argparse.Namespace) -> int:
    import pandas as pd

    from anchorlab.cli.args import parse_setting, parse_vary
    from anchorlab.papers.robustness import DEFAULT_SETTINGS, run_study

    anchor_only("robustness", a.config, a.set)
    settings = [parse_setting(s) for s in a.setting] or list(DEFAULT_SETTINGS)
    vary = dict(parse_vary(v) for v in a.vary)
    seeds = list(range(a.seeds))
    out = Path(a.out)
    print(f"robustness: {a.op_sets} op sets x {len(seeds)} seeds x settings "
          f"{', '.join(f'{s.name} {s.overrides}' for s in settings)}; base {a.config}; out {out}"
          + (f"; regime map over {vary}" if vary else ""), flush=True)

    if a.dry_run:
        from anchorlab.papers.robustness import random_op_sets, study_spec

        ops = random_op_sets(a.op_sets, a.op_seed, include_papers=not a.no_papers_op_set)
        axes = {**vary, **({"optim.peak_lr": list(a.peak_lrs)} if a.peak_lrs else {})}
        return dry_run(study_spec(a.config, ops, seeds, settings, a.set, vary=axes or None), out, a.workers or 2)
    will_create(a, out)

    def done(run, status: str) -> None:
        if not a.no_progress:
            print(f"  run {run.run_id}: {status}", flush=True)

    res = run_study(str(out), a.config, a.op_sets, seeds, settings, a.set, a.op_seed, a.workers, a.executor,
                    done, include_papers=not a.no_papers_op_set, vary=vary, peak_lrs=a.peak_lrs,
                    thresholds=a.thresholds)
    accs = [c for c in res["judged"].columns if c.endswith(("id_acc", "_acc"))]
    cols = [*vary, "op_set", "seed", *(["peak_lr"] if a.peak_lrs else []), *accs, "contrast"]
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
        print(res["judged"][cols].to_string(index=False, float_format=lambda v: f"{v:.2f}",
                                            formatters={"peak_lr": "{:g}".format}))
    r = res["rates"]
    print(f"\ncontrast in {r['contrast_rate']:.0%} of {r['cases']} cases (large init memorizes "
          f"{r['large_memorizes_rate']:.0%}, small init composes {r['small_composes_rate']:.0%}); "
          f"tables in {out}")
    print("\n".join(res["summary"]))
    if vary:
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print("\nregime map (map.csv, regime_map.png):")
            print(res["map"].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


def cmd_sweep(a: argparse.Namespace) -> int:
    import dataclasses

    from anchorlab.cli.args import parse_stack
    from anchorlab.sweep.grid import load_sweep, resolve_sweep
    from anchorlab.sweep.presets import sweep_presets
    from anchorlab.sweep.runner import plan_sweep
    from anchorlab.sweep.watch import run_watched

    if a.list or not a.spec:
        print("sweep presets (name, or any sweep YAML path):")
        print(preset_lines(sweep_presets()))
        return 0
    spec = load_sweep(resolve_sweep(a.spec))
    if a.set:
        from anchorlab.sweep.grid import parse_set

        spec = dataclasses.replace(spec, set=spec.set + parse_set(list(a.set)))
    if a.only:
        from anchorlab.sweep.grid import restrict

        spec = restrict(spec, a.only)
    out = Path(a.out) if a.out else Path("runs") / spec.name
    from anchorlab.sweep.results import done_ids

    elsewhere = done_ids(a.done_in)
    if a.dry_run:
        return dry_run(spec, out, a.workers or 2, elsewhere)
    plan = plan_sweep(spec, out, done_elsewhere=elsewhere)
    will_create(a, out)
    todo = int((plan.action != "skip").sum())
    away = f", {int((plan.status == 'elsewhere').sum())} done elsewhere (--done-in)" if a.done_in else ""
    print(f"sweep {spec.name}: {len(plan)} runs, {todo} to do{away}, executor={a.executor}, out={out}", flush=True)
    df = run_watched(spec, out, spec.name, not a.no_progress, a.workers, executor=a.executor,
                     stack=parse_stack(a.stack), done_elsewhere=elsewhere)
    st = df.drop_duplicates("run_id").status.value_counts().to_dict()
    print(f"done: {st}; results in {out / 'results.sqlite'}; `anchorlab report {out}` draws the figures")
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    from anchorlab.config import ConfigError
    from anchorlab.sweep.watch import status_lines

    d = Path(a.dir)
    found = [p for p in (d, d / "sweep") if (p / "results.sqlite").is_file()]
    if not found:
        raise ConfigError(f"status {a.dir}: not a sweep folder (no results.sqlite in it or in its sweep/); give the "
                          f"--out of `anchorlab sweep`, `reproduce` or `demo`")
    print("\n".join(status_lines(found[0], a.workers)))
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from anchorlab.report import make_report, screenshot

    will_create(a, Path(a.sweep_dir) / "report")
    path = make_report(a.sweep_dir)
    print(f"wrote {path}")
    if a.screenshot:
        print(f"wrote {screenshot(path, a.screenshot)}")
    return 0
