"""``anchorlab reproduce``: one paper figure, end to end, resumably.

``reproduce(fig, scale, out)`` runs the figure's sweep for the scale into
``out/sweep`` (the one sweep runner: process pool / Ray, stacking, resume,
``results.sqlite``), calls the figure's maker, and writes into ``out``::

    <figure files>            the figure (PNG/PDF) and its tables (CSV)
    paper_vs_ours.csv         each claim of the paper: its value beside ours
    README.md                 what was run, at which scale, and the claims table

Re-running the same command skips finished runs and resumes interrupted ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import ConfigError
from ..datasets import DownloadError, no_downloads
from ..io import atomic_write, write_text
from .estimate import ASSUMPTIONS, describe_compute, sweep_compute
from .registry import FIGURES, Figure

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
SCALES = ("cpu", "paper")


def figure_spec(fig: Figure, scale: str, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The sweep spec of a figure at a scale, as a mapping (with extra ``set`` overrides appended)."""
    import yaml

    from ..sweep.grid import parse_set, resolve_sweep

    if scale not in fig.sweeps:
        raise ConfigError(f"--scale: figure {fig.id} has scales {', '.join(fig.sweeps)}, got {scale!r}")
    src = fig.sweeps[scale]
    spec = dict(src) if isinstance(src, dict) else yaml.safe_load(resolve_sweep(src).read_text())
    spec["set"] = [e if isinstance(e, str) else {e[0]: e[1]} for e in parse_set(spec.get("set"))] + list(overrides)
    return spec


def describe_figures(scale: str | None = None, workers: int = 2) -> str:
    """A table of every figure: what it shows, its runs and estimated compute per scale."""
    import json
    import re

    from ..sweep.grid import expand

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
        if fig.notes:
            lines.append(f"{'':18s}   note: {fig.notes}")
        if fig.extra:
            lines.append(f"{'':18s}   needs: pip install 'anchorlab[{fig.extra}]'")
    return "\n".join(lines)


def claims_table(fig: Figure, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for c in fig.claims:
        try:
            ours = c.ours(tables)
        except (KeyError, ValueError, IndexError, ConfigError) as e:
            log.warning("claim %r: cannot compute ours (%s)", c.text, e)
            ours = float("nan")
        rows.append({"claim": c.text, "paper": c.paper, "ours": ours})
    return pd.DataFrame(rows, columns=["claim", "paper", "ours"])


def reproduce(figure: str, scale: str, out: str | Path, *, executor: str = "process", workers: int | None = None,
              dry_run: bool = False, progress: bool = False, overrides: list[str] | tuple[str, ...] = (),
              train: bool = True) -> dict[str, Path]:
    """Run figure ``figure`` at ``scale`` into ``out``; return the files written (see the module docstring).

    ``train=False`` trains nothing: the figure is drawn from the completed runs ``out/sweep`` holds,
    whatever spec they came from (a sweep run with other settings, or one still running)."""
    from ..sweep.results import finals
    from ..sweep.runner import plan_sweep, run_sweep

    if figure not in FIGURES:
        raise ConfigError(f"figure: must be one of {', '.join(FIGURES)}, got {figure!r}")
    if scale not in SCALES:
        raise ConfigError(f"scale: must be one of {', '.join(SCALES)}, got {scale!r}")
    fig = FIGURES[figure]
    out = Path(out)
    spec = figure_spec(fig, scale, overrides)
    sweep_dir = out / "sweep"
    if dry_run:
        plan = plan_sweep(spec, sweep_dir)
        print(plan.to_string(index=False))
        return {}
    if not train and not (sweep_dir / "runs").is_dir():
        raise ConfigError(f"--no-train: {sweep_dir} holds no runs; run the figure without --no-train, or put "
                          f"(or link) a sweep directory there")
    if fig.extra:  # before training, not after it
        from ..extras import require_extra
        require_extra(fig.extra, f"reproduce {figure}")
    out.mkdir(parents=True, exist_ok=True)

    def done(run, status: str) -> None:
        if progress:
            print(f"  run {run.run_id} {run.values}: {status}", flush=True)

    if train:
        df = run_sweep(spec, sweep_dir, executor=executor, max_workers=workers, on_result=done)
        bad = df.drop_duplicates("run_id")
        bad = bad[bad.status.isin(["failed"])]
        if len(bad):
            log.warning("%d run(s) failed; the figure uses the others: %s", len(bad), list(bad.run_id))
        runs_line = f"Sweep: {spec.get('name')} ({df.run_id.nunique()} runs) in `sweep/`; "
    else:
        runs_line = f"Sweep: the {len(finals(sweep_dir))} completed runs found in `sweep/` (drawn with --no-train); "
    tables, files = fig.make(sweep_dir, out, scale)
    for name, t in tables.items():
        files.setdefault(f"{name}.csv", atomic_write(out / f"{name}.csv", lambda p, t=t: t.to_csv(p, index=False)))
    claims = claims_table(fig, tables)
    files["paper_vs_ours.csv"] = atomic_write(out / "paper_vs_ours.csv", lambda p: claims.to_csv(p, index=False))
    readme = [f"# {fig.paper} {fig.number} ({fig.id}) at scale `{scale}`", "", fig.shows, "",
              runs_line + f"`anchorlab report {sweep_dir}` draws the sweep's generic report.", ""]
    if fig.notes:
        readme += [f"Note: {fig.notes}", ""]
    readme += ["| claim | paper | ours |", "|---|---|---|"]
    for r in claims.itertuples():
        ours = f"{r.ours:.3g}" if isinstance(r.ours, float) else str(r.ours)
        readme.append(f"| {r.claim} | {r.paper} | {ours} |")
    readme += ["", "Files: " + ", ".join(sorted(str(Path(p).relative_to(out)) for p in files.values()))]
    files["README.md"] = write_text(out / "README.md", "\n".join(readme) + "\n")
    return files
