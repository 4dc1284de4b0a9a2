"""The figure registry drives the command line: every option a figure declares is a `reproduce` flag, and nothing
else is; a new figure's option becomes a flag without an edit to the CLI."""

import subprocess
import sys

from anchorlab.cli import build_parser
from anchorlab.papers.reproduce import FIGURES, Figure, Option, figure_options


def _flags(parser) -> set[str]:
    sub = next(a for a in parser._actions if a.dest == "cmd").choices["reproduce"]
    return {s.lstrip("-") for a in sub._actions for s in a.option_strings if s.startswith("--")}


BASE = {"help", "list", "scale", "out", "executor", "workers", "set", "from-table", "dry-run", "no-train",
        "no-progress", "verbose"}


def test_the_reproduce_flags_are_the_figures_options():
    declared = {o.name for f in FIGURES.values() for o in f.options}
    assert declared and _flags(build_parser()) == BASE | declared
    spec = figure_options()
    for f in FIGURES.values():
        for o in f.options:
            assert set(o.values) <= set(spec[o.name].values) and f.id in spec[o.name].help


def test_a_new_figures_option_is_a_flag(monkeypatch):
    fig = Figure("test-fig", "journal", "Fig. 0", "a test figure", {"cpu": "fig2_cpu"}, make=lambda *a: ({}, {}),
                 options=(Option("widths", {"64": {}, "128": {"model.d_model": 128}}, "64", "the width"),))
    monkeypatch.setitem(FIGURES, fig.id, fig)
    a = build_parser(["reproduce"]).parse_args(["reproduce", "test-fig", "--widths", "128"])
    assert a.widths == "128" and "widths" not in _flags(build_parser(["config"]))


def test_other_commands_start_without_the_figures():
    code = ("import sys; from anchorlab.cli import build_parser; build_parser(['config', 'demo/small']); "
            "print('anchorlab.papers.reproduce' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr[-2000:]
