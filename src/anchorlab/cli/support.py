"""What the command line tells a user besides each command's own output (used by :mod:`anchorlab.cli`).

The workflow shown by ``anchorlab -h`` and the help formatter that shows every
default; arguments checked in one line (a sweep spec or a sweep directory where
a config or a run is expected, with the command to run instead; the anchor-only
studies, demo and robustness, on another task); errors that name the flag the
user typed; the lr schedule's peak; dry runs with their estimated cost; what
re-running does after an interrupt; and the removal of folders a failed command
created and left empty.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from pathlib import Path

from anchorlab.config import ConfigError

DESCRIPTION = ("anchorlab: reasoning versus memorizing in transformers, and the init rate that decides it.\n"
               "Every command works for every task family (task.name in the config).")

WORKFLOW = """\
workflow:
  anchorlab config --list                            the config presets
  anchorlab config demo/small --set init.gamma=0.45  a resolved config, its run id and peak lr
  anchorlab train demo/small --out runs/small        train one model (re-running resumes it)
  anchorlab eval runs/small                          its metrics and tables
  anchorlab analyze --list                           analyses of trained runs
  anchorlab sweep --list                             the sweep presets
  anchorlab sweep fig2_cpu --dry-run                 the runs of a sweep and their estimated cost
  anchorlab sweep fig2_cpu --out runs/fig2           run (or resume) a sweep, then: anchorlab report runs/fig2
  anchorlab status runs/fig2                         how far a running sweep is: runs done / running / left, ETA
  anchorlab reproduce --list                         every paper figure, its runs and compute
  anchorlab demo --out demo_out --dry-run            the demo's two runs and their estimated time here
  anchorlab demo --out demo_out                      large vs small init on the journal's task, then a plain verdict

Every command takes -v (log at INFO level) and -h. Configs: docs/config_reference.md
(`anchorlab config --reference`)."""


def peak_line(cfg) -> str:
    """The lr schedule in one line: where optim.lr sits and what the peak is."""
    o = cfg.optim
    how = ("optim.peak_lr" if o.peak_lr is not None
           else f"optim.lr x optim.warmup_multiplier = {o.lr:g} x {o.warmup_multiplier:g}")
    return (f"peak lr {o.peak:.3g} ({how}): lr rises from optim.lr {o.lr:g} to the peak over {o.warmup_epochs:g} "
            f"warmup epochs, then a cosine to optim.min_lr {o.min_lr:g} over {o.cosine_epochs:g} epochs")


def preset_lines(presets: Mapping[str, Path]) -> str:
    """One line per preset: its name, then its description (the first comment line of its YAML)."""
    from anchorlab.config.base import preset_summary

    width = max((len(n) for n in presets), default=0)
    return "\n".join(f"  {name:{width}s}  {preset_summary(path)}".rstrip() for name, path in presets.items())


def config_arg(spec: str, cmd: str) -> str:
    """A config argument, refused in one line when it names a sweep spec or a sweep directory instead."""
    from anchorlab.config.base import PRESET_DIR
    from anchorlab.sweep.presets import sweep_presets

    p = Path(spec)
    if p.is_dir() and (p / "results.sqlite").exists():
        raise ConfigError(f"{spec}: is a sweep directory, not a config; `anchorlab report {spec}` draws its "
                          f"figures, `anchorlab sweep {p / 'sweep.yaml'} --out {spec}` resumes it, and "
                          f"`anchorlab {cmd} ...` takes a config (or eval a run: {p / 'runs' / '<run_id>'})")
    if p.is_dir() and (p / "config.yaml").exists():
        raise ConfigError(f"{spec}: is a run directory, not a config; `anchorlab eval {spec}` evaluates it and "
                          f"`anchorlab train {p / 'config.yaml'} --out {spec}` resumes it")
    name = spec if spec.endswith(".yaml") else f"{spec}.yaml"
    is_sweep = spec.removesuffix(".yaml") in sweep_presets() and not (PRESET_DIR / name).is_file() and not p.exists()
    if p.is_file() and p.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError:
            data = None
        is_sweep = isinstance(data, dict) and ("axes" in data or "zip" in data or "base" in data)
    if is_sweep:
        raise ConfigError(f"{spec}: is a sweep spec, not a config; run it with `anchorlab sweep {spec}` "
                          f"(`--dry-run` lists its runs)")
    return spec


def anchor_only(cmd: str, base: str, overrides: Collection[str]) -> None:
    """Refuse, in one line, a demo or robustness study whose config is not on the anchor task: its contrast is
    read on the anchor's held-out pair (4,3) and its mirror, which other task families do not have."""
    from anchorlab.config import load_yaml

    name, src = None, ""
    for ov in overrides:
        key, eq, value = ov.partition("=")
        if eq and key.strip() == "task.name":
            name, src = value.strip(), f" (from --set {ov})"
    if name is None:
        task = load_yaml(base).get("task") or {}
        name, src = (task.get("name", "anchor") if isinstance(task, dict) else "anchor"), f" (in {base})"
    if name != "anchor":
        raise ConfigError(f"{cmd}: anchor task only (it compares large and small init on the anchor's held-out "
                          f"pair and its mirror); task.name is {name!r}{src}; for other tasks use "
                          f"`anchorlab train` or `anchorlab sweep`")


def resume_note(run_dir: Path, command: str) -> str:
    """What re-running will do after a run stopped: resume from its checkpoint, or start over."""
    from anchorlab.train.checkpoint import load_checkpoint

    try:
        ck = load_checkpoint(run_dir, map_location="cpu") if run_dir.is_dir() else None
    except Exception:  # noqa: BLE001 - an unreadable checkpoint: say so, never fail while reporting
        ck = None
    if ck is None:
        return f"{run_dir}: no checkpoint yet; re-running starts from step 0"
    return f"{run_dir}: checkpoint at step {int(ck['step']):,}; `{command}` resumes from it"


def run_arg(path: str) -> str:
    """A run directory argument, refused in one line when it is a sweep directory or a spec."""
    p = Path(path)
    if p.is_dir() and (p / "results.sqlite").exists() and not (p / "config.yaml").exists():
        raise ConfigError(f"{path}: is a sweep directory, not a run; `anchorlab report {path}` draws its figures "
                          f"and tables, or eval one of its runs: `anchorlab eval {p / 'runs' / '<run_id>'}`")
    if p.is_file():
        raise ConfigError(f"{path}: is a file; eval takes a run directory (the --out of `anchorlab train`)"
                          + (f"; a sweep spec runs with `anchorlab sweep {path}`" if p.suffix in (".yaml", ".yml")
                             else ""))
    if not p.exists():
        from anchorlab.sweep.presets import sweep_presets

        if path.removesuffix(".yaml") in sweep_presets():
            raise ConfigError(f"{path}: is a sweep spec, not a run directory; `anchorlab sweep {path}` runs it")
        raise ConfigError(f"run {path}: no such directory, so not a run directory (the --out of `anchorlab train`)")
    return path


def dry_run(spec, out: Path, workers: int, done_elsewhere: Collection[str] = ()) -> int:
    """Print a sweep's runs, what would be done and the estimated compute of the runs to do; train nothing.
    ``done_elsewhere``: run ids completed on another machine (skipped, status ``elsewhere``)."""
    import pandas as pd

    from anchorlab.papers.reproduce.estimate import ASSUMPTIONS, describe_compute, sweep_compute
    from anchorlab.sweep.grid import expand, load_sweep
    from anchorlab.sweep.runner import plan_sweep

    spec = load_sweep(spec)
    plan = plan_sweep(spec, out, done_elsewhere=done_elsewhere)
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 30):
        print(plan.to_string(index=False))
    todo = set(plan.run_id[plan.action != "skip"]) if len(plan) else set()
    print(f"{len(plan)} runs; {len(todo)} to do; out: {out}")
    cfgs = [r.config for r in expand(spec) if r.run_id in todo]
    c = sweep_compute(cfgs, max(workers, 1))
    print(f"estimated for the runs to do with {max(workers, 1)} worker(s): {describe_compute(c)}")
    print(f"(assumes {ASSUMPTIONS})")
    from anchorlab.sweep.probe import describe_probe

    print(describe_probe(cfgs, max(workers, 1)) + "; nothing was trained")
    return 0


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written (the workflow), every option with its default.

    A help that states its default itself, a switch (off by default) and an
    option without one (None, an empty list) are left as written.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "default" in text or d is None or d is False or d is argparse.SUPPRESS or d == []:
            return text
        return super()._get_help_string(action)


def will_create(a: argparse.Namespace, out: Path) -> None:
    """Note the folders an output directory will add, so that a failure removes them if they stay empty."""
    out = out.absolute()
    if out.exists():
        return
    while not out.parent.exists():
        out = out.parent
    a.created = [*getattr(a, "created", []), out]


def check_out(a: argparse.Namespace) -> None:
    """Refuse, in one line, an ``--out`` that cannot be a folder (it is a file, a parent of it is a file, or it
    cannot be created); without ``--dry-run`` create it now (noted for removal if the command fails)."""
    import os

    out = getattr(a, "out", None)
    if not out:
        return
    p = Path(out).absolute()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"out_dir {out}: is a file, not a folder")
    q = p
    while not q.exists():
        q = q.parent
    if not q.is_dir():
        raise ConfigError(f"out_dir {out}: {q} is a file, not a folder, so {out} cannot be made there")
    if q != p and not os.access(q, os.W_OK | os.X_OK):
        raise ConfigError(f"out_dir {out}: cannot be created ({q} is not writable)")
    if getattr(a, "dry_run", False) or p.exists():
        return
    will_create(a, p)
    try:
        p.mkdir(parents=True)
    except OSError as e:
        raise ConfigError(f"out_dir {out}: cannot be created ({e.strerror or e})") from None


def remove_if_empty(path: Path) -> None:
    """Remove the folder tree ``path`` when no file was written in it."""
    if not path.is_dir() or any(f.is_file() or f.is_symlink() for f in path.rglob("*")):
        return
    for d in sorted((q for q in path.rglob("*") if q.is_dir()), key=lambda q: len(q.parts), reverse=True):
        d.rmdir()
    path.rmdir()


def name_flags(msg: str, a: argparse.Namespace) -> str:
    """Point an error about a dotted key at the ``--set KEY=VALUE`` (or ``--option``) the user typed for it."""
    head = msg.split(":", 1)[0].split("[", 1)[0].strip()
    if head.startswith("out_dir ") and getattr(a, "out", None):
        return f"--out {msg.removeprefix('out_dir ')}"
    for flag in ("set", "option"):
        for ov in getattr(a, flag, None) or []:
            key = ov.split("=", 1)[0].strip() if isinstance(ov, str) else ""
            if key and (head == key or head.startswith(key + ".") or key.startswith(head + ".")):
                return f"{msg} (from --{flag} {ov})"
    return msg


def cleanup(a: argparse.Namespace) -> None:
    for path in getattr(a, "created", []):
        remove_if_empty(path)
