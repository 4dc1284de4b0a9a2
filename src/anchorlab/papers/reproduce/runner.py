"""``anchorlab reproduce``: one paper figure, end to end, resumably.

``reproduce(fig, scale, out)`` runs the figure's sweep for the scale into
``out/sweep`` (the one sweep runner: process pool / Ray, stacking, resume,
``results.sqlite``), calls the figure's maker, and writes into ``out/<figure id>/``, so figures sharing one
``out`` (and so its runs) never overwrite each other's tables. A figure
with a run-table maker (``Figure.tables``) reads its runs as one run table
(:func:`anchorlab.sweep.runtable.run_table`) of ``out/sweep`` and of the committed
run tables ``from_tables``: ``--from-table docs/figures/X.csv --no-train`` redraws a
committed figure without training, and a partly run sweep merges with committed
rows (a run found in ``out/sweep`` wins). Options (``Figure.options``, e.g. the
clock) change the sweep spec before it runs::

    out/<figure id>/
    <figure files>            the figure (PNG/PDF) and its tables (CSV)
    paper_vs_ours.csv         each claim of the paper: its value beside ours
    README.md                 what was run, at which scale, and the claims table

Re-running the same command skips finished runs and resumes interrupted ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anchorlab.config import ConfigError
from anchorlab.datasets import DownloadError, no_downloads
from anchorlab.io import atomic_write, portable_paths, write_text
from anchorlab.papers.reproduce.estimate import ASSUMPTIONS, describe_compute, sweep_compute
from anchorlab.papers.reproduce.registry import FIGURES, Figure

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
SCALES = ("demo", "cpu", "paper")


def figure_spec(fig: Figure, scale: str, overrides: list[str] | tuple[str, ...] = (),
                options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The sweep spec of a figure at a scale, as a mapping: its options' changes (:func:`apply_options`,
    each option at its default unless ``options`` names a value), then the extra ``set`` overrides."""
    import yaml

    from anchorlab.sweep.grid import parse_set, resolve_sweep

    if scale not in fig.sweeps:
        raise ConfigError(f"--scale: figure {fig.id} has scales {', '.join(fig.sweeps)}, got {scale!r}")
    src = fig.sweeps[scale]
    spec = dict(src) if isinstance(src, dict) else yaml.safe_load(resolve_sweep(src).read_text())
    spec["set"] = [e if isinstance(e, str) else {e[0]: e[1]} for e in parse_set(spec.get("set"))]
    spec = apply_options(fig, scale, spec, options or {})
    spec["set"] = spec["set"] + list(overrides)
    return spec


def apply_options(fig: Figure, scale: str, spec: dict[str, Any], chosen: Mapping[str, str]) -> dict[str, Any]:
    """``spec`` with each of the figure's options applied at its chosen value (else its default): a key that
    is an axis of the spec gets the option's values as the axis (a ``slice``: that part of the axis as the
    options before it left it), any other key is set on every run. An
    unknown option or value, or a value other than the default at a scale the option does not apply to, is
    refused with a one-line error."""
    known = {o.name: o for o in fig.options}
    for name in chosen:
        if name not in known:
            raise ConfigError(f"--{name}: figure {fig.id} has no such option"
                              + (f"; its options: {', '.join('--' + k for k in known)}" if known else ""))
    spec = {**spec, "set": list(spec.get("set") or []), "axes": dict(spec.get("axes") or {})}
    for o in fig.options:
        value = str(chosen.get(o.name, o.default))
        if value not in o.values:
            raise ConfigError(f"--{o.name}: must be one of {', '.join(o.values)}, got {value!r}")
        if scale not in o.scales:
            if value != o.default:
                raise ConfigError(f"--{o.name}: applies at scale {', '.join(o.scales)} of {fig.id}, not {scale}")
            continue
        for key, v in o.values[value].items():
            if key in spec["axes"]:   # a slice keeps part of the axis as an earlier option left it
                spec["axes"][key] = spec["axes"][key][v] if isinstance(v, slice) else list(v)
            elif any(key in z for z in spec.get("zip") or []):
                raise ConfigError(f"option --{o.name}: {key} varies in a zip group of {fig.id}'s spec")
            else:
                spec["set"].append({key: v})
    if not spec["axes"]:
        del spec["axes"]
    return spec


def describe_options(fig: Figure) -> str:
    """``--clock 0.5|1|2 (default 0.5; cpu): ...`` for each option of a figure, ``; ``-joined."""
    return "; ".join(f"--{o.name} {'|'.join(o.values)} (default {o.default}; {', '.join(o.scales)}): {o.help}"
                     for o in fig.options)


def dry_run_text(fig: Figure, scale: str, spec: Mapping[str, Any], sweep_dir: Path, workers: int = 2,
                 done_elsewhere: Collection[str] = ()) -> str:
    """The runs a reproduce would train (one per line, with their action in ``sweep_dir``; a run that a
    committed table holds, ``done_elsewhere``, is skipped), the estimated compute of those still to train on
    this machine, and the figure's rule at this scale."""
    from anchorlab.sweep.grid import expand
    from anchorlab.sweep.runner import plan_sweep

    plan = plan_sweep(spec, sweep_dir, done_elsewhere=done_elsewhere)
    todo = set(plan.run_id[plan.action != "skip"]) if len(plan) else set()
    cfgs = [r.config for r in expand(spec) if r.run_id in todo]
    c = sweep_compute(cfgs, workers)
    held = int((plan.status == "elsewhere").sum()) if len(plan) else 0
    lines = [plan.to_string(index=False) if len(plan) else "(no runs)", "",
             f"{len(plan)} runs, {len(todo)} to train" + (f" ({held} held by the committed tables)" if held else "")
             + f"; {describe_compute(c) if cfgs else 'nothing to train'} ({workers} worker{'s' * (workers != 1)})"]
    if cfgs:
        from anchorlab.sweep.probe import describe_probe
        lines.append(describe_probe(cfgs, workers))
    if fig.rules.get(scale):
        lines.append(f"scale rule ({scale}): {fig.rules[scale]}")
    if fig.options:
        lines.append(f"options: {describe_options(fig)}")
    return "\n".join(lines)


def describe_figures(scale: str | None = None, workers: int = 2) -> str:
    """A table of every figure: what it shows, its runs and estimated compute per scale."""
    import json
    import re

    from anchorlab.sweep.grid import expand

    lines = [f"{len(FIGURES)} figures; runs and estimated training compute per scale ({workers} CPU workers).",
             f"Estimates count transformer FLOPs: {ASSUMPTIONS}.", ""]
    seen: dict[str, str] = {}   # figures that share a sweep expand it once

    def order(fig: Figure) -> tuple:
        n = re.findall(r"\d+", fig.number)
        return (fig.paper != "NeurIPS 2024", int(n[0]) if n else 0, fig.number)

    for fig in sorted(FIGURES.values(), key=order):
        lines.append(f"{fig.id:18s} {fig.paper} {fig.number}: {fig.shows}")
        for sc in (SCALES if scale is None else (scale,)):
            if sc not in fig.sweeps:
                continue
            try:
                spec = figure_spec(fig, sc)
            except ConfigError as e:
                lines.append(f"{'':18s}   {sc:5s} (cannot expand here: {e})")
                continue
            key = json.dumps(spec, sort_keys=True, default=str)
            if key not in seen:
                try:
                    with no_downloads():
                        runs = expand(spec)
                    c = sweep_compute([r.config for r in runs], workers)
                    seen[key] = f"{c['runs']:5d} runs  {describe_compute(c)}"
                except DownloadError:
                    seen[key] = "(needs the dataset files here: task.data_dir or ANCHORLAB_DATA_DIR)"
                except ConfigError as e:
                    seen[key] = f"(cannot expand here: {e})"
            lines.append(f"{'':18s}   {sc:5s} {seen[key]}")
        if fig.cids:
            lines.append(f"{'':18s}   claims: {', '.join(fig.cids)}")
        if fig.notes:
            lines.append(f"{'':18s}   note: {fig.notes}")
        if fig.options:
            lines.append(f"{'':18s}   options: {describe_options(fig)}")
        if fig.extra:
            lines.append(f"{'':18s}   needs: pip install 'anchorlab[{fig.extra}]'")
    return "\n".join(lines)


def claims_table(fig: Figure, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for c in fig.readings:
        try:
            ours = c.ours(tables)
        except (KeyError, ValueError, IndexError, ConfigError) as e:
            log.warning("claim %r: cannot compute ours (%s)", c.text, e)
            ours = float("nan")
        rows.append({"claim": c.text, "paper": c.paper, "ours": ours})
    return pd.DataFrame(rows, columns=["claim", "paper", "ours"])


def reproduce(figure: str, scale: str, out: str | Path, *, executor: str = "process", workers: int | None = None,
              dry_run: bool = False, progress: bool = False, overrides: list[str] | tuple[str, ...] = (),
              train: bool = True, options: Mapping[str, str] | None = None,
              from_tables: Sequence[str | Path] = ()) -> dict[str, Path]:
    """Run figure ``figure`` at ``scale`` into ``out``; return the files written (see the module docstring).

    ``train=False`` trains nothing: the figure is drawn from the completed runs ``out/sweep`` holds,
    whatever spec they came from (a sweep run with other settings, or one still running), and from the
    committed run tables ``from_tables`` (figures with a run-table maker only). ``options``: the figure's
    options by name (``{"clock": "1"}``); ``dry_run`` prints :func:`dry_run_text`."""
    from anchorlab.papers.runs import run_table

    if figure not in FIGURES:
        raise ConfigError(f"figure: must be one of {', '.join(FIGURES)}, got {figure!r}")
    if scale not in SCALES:
        raise ConfigError(f"scale: must be one of {', '.join(SCALES)}, got {scale!r}")
    fig = FIGURES[figure]
    out = Path(out)
    spec = figure_spec(fig, scale, overrides, options)
    sweep_dir = out / "sweep"
    if from_tables and fig.tables is None:
        raise ConfigError(f"--from-table: figure {figure} is drawn from its sweep directory only (it has no "
                          "run-table maker)")
    for t in from_tables:
        if not Path(t).is_file():
            raise ConfigError(f"--from-table {t}: no such file (a committed run table CSV)")
    from anchorlab.sweep.results import done_ids

    done = done_ids(from_tables)   # runs a committed table holds: never trained again
    if dry_run:
        print(dry_run_text(fig, scale, spec, sweep_dir, workers or 2, done))
        return {}
    if not train and not (sweep_dir / "runs").is_dir() and not from_tables:
        raise ConfigError(f"--no-train: {sweep_dir} holds no runs; run the figure without --no-train, put "
                          f"(or link) a sweep directory there, or give committed rows with --from-table")
    if fig.extra:  # before training, not after it
        from anchorlab.extras import require_extra
        require_extra(fig.extra, f"reproduce {figure}")
    out.mkdir(parents=True, exist_ok=True)
    fdir = out / fig.id      # the figure's own files: figures sharing one --out (and its sweep/) never overwrite
    fdir.mkdir(exist_ok=True)

    runs_line = (_train(fig, spec, sweep_dir, executor, workers, progress, done) if train else
                 f"Sweep: the {len(run_table([sweep_dir])) if (sweep_dir / 'runs').is_dir() else 0} completed runs "
                 f"found in `sweep/` (drawn with --no-train); ")
    if fig.tables is not None:
        tables, files, more = _from_rows(fig, spec, scale, sweep_dir, fdir, from_tables)
        runs_line += more
    else:
        tables, files = fig.make(sweep_dir, fdir, scale)
    return _write(fig, scale, out, fdir, sweep_dir, tables, files, runs_line)


def _train(fig: Figure, spec: Mapping[str, Any], sweep_dir: Path, executor: str, workers: int | None,
           progress: bool, done: Collection[str]) -> str:
    """Run the figure's sweep into ``sweep_dir`` (with the live display); the README's line on its runs."""
    from anchorlab.sweep.watch import run_watched

    df = run_watched(spec, sweep_dir, fig.id, progress, workers, keys=("id_acc", "ood_inferential_acc",
                                                                        "ood_symmetric_acc"),
                     executor=executor, done_elsewhere=done)
    bad = df.drop_duplicates("run_id")
    bad = bad[bad.status.isin(["failed"])]
    if len(bad):
        log.warning("%d run(s) failed; the figure uses the others: %s", len(bad), list(bad.run_id))
    return f"Sweep: {spec.get('name')} ({df.run_id.nunique()} runs) in `sweep/`; "


def _from_rows(fig: Figure, spec: Mapping[str, Any], scale: str, sweep_dir: Path, fdir: Path,
               from_tables: Sequence[str | Path]) -> tuple[dict, dict[str, Path], str]:
    """A run-table maker's tables and files from ``sweep_dir``'s runs and the committed ``from_tables``; the
    README's words on where the rows came from. A table the maker cannot read is refused in one line."""
    from anchorlab.papers.runs import run_table

    rows = run_table(([sweep_dir] if (sweep_dir / "runs").is_dir() else []) + [Path(t) for t in from_tables])
    said = ""
    if from_tables:
        committed = int((rows.source != str(sweep_dir)).sum())
        said += (f"{committed} committed rows from {', '.join(f'`{t}`' for t in from_tables)} "
                 "(a run found in `sweep/` wins); ")
    if fig.design_only:
        from anchorlab.sweep.grid import expand

        ids = {r.run_id for r in expand(spec)}
        keep = rows.run_id.astype(str).isin(ids)
        said += (f"{int(keep.sum())} of them are runs of this figure's design "
                 f"({len(ids)} runs; {int((~keep).sum())} others left out); ")
        rows = rows[keep].reset_index(drop=True)
    try:
        tables, files = fig.tables(rows, fdir, scale)
    except (KeyError, ConfigError) as e:
        if not from_tables:
            raise
        what = f"no column {e.args[0]!r}" if isinstance(e, KeyError) else str(e).split(";")[0][:160]
        raise ConfigError(f"--from-table {', '.join(str(t) for t in from_tables)}: not a run table that figure "
                          f"{fig.id} can draw ({what}); docs/figures/README.md names each figure's tables") from None
    return tables, files, said


def _write(fig: Figure, scale: str, out: Path, fdir: Path, sweep_dir: Path, tables: dict, files: dict[str, Path],
           runs_line: str) -> dict[str, Path]:
    """Write the figure's tables (no machine paths), its claims beside the paper's and its README into ``fdir``."""
    for name, t in tables.items():
        t = portable_paths(t, out)       # no machine path in a table that may be committed
        files.setdefault(f"{name}.csv", atomic_write(fdir / f"{name}.csv", lambda p, t=t: t.to_csv(p, index=False)))
    claims = claims_table(fig, tables)
    files["paper_vs_ours.csv"] = atomic_write(fdir / "paper_vs_ours.csv", lambda p: claims.to_csv(p, index=False))
    readme = [f"# {fig.paper} {fig.number} ({fig.id}) at scale `{scale}`", "", fig.shows, "",
              runs_line + f"`anchorlab report {sweep_dir}` draws the sweep's generic report.", ""]
    if fig.rules.get(scale):
        readme += [f"Scale rule ({scale}): {fig.rules[scale]}", ""]
    if fig.notes:
        readme += [f"Note: {fig.notes}", ""]
    readme += ["| claim | paper | ours |", "|---|---|---|"]
    for r in claims.itertuples():
        ours = f"{r.ours:.3g}" if isinstance(r.ours, float) else str(r.ours)
        readme.append(f"| {r.claim} | {r.paper} | {ours} |")
    readme += ["", "Files: " + ", ".join(sorted(str(Path(p).relative_to(fdir)) for p in files.values()))]
    files["README.md"] = write_text(fdir / "README.md", "\n".join(readme) + "\n")
    return files
