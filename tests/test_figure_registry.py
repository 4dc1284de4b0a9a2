"""One figure registry drives the command line, the docs blocks and the results' status table: a new figure is one
module (its figure, claim, readings and blocks), one sweep file and one test."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

import anchorlab.papers.docs  # noqa: F401  (registers the claims and their blocks)
from anchorlab.papers.reproduce import registry
from anchorlab.papers.reproduce.registry import (BLOCKS, CLAIMS, FIGURES, STUDIES, Claim, Figure, claim_figures,
                                                 register, register_blocks, register_study, unread_claims)

ROOT = Path(__file__).resolve().parents[1]

# A figure of a study that does not exist, written the way a figure module is: it registers itself, its claim and
# their blocks; it reuses a bundled sweep preset (a real figure adds its own preset file).
THROWAWAY = '''
from anchorlab.papers.reproduce.registry import Claim, Figure, Option, Reading, register, register_claim

register(Figure(
    id="study-throwaway", cids=("C99",), paper="study", number="throwaway",
    shows="a figure that exists only in a test",
    sweeps={"cpu": "predictors_cpu"},
    tables=lambda runs, out, scale: ({"runs": runs}, {}),
    readings=(Reading("the runs it read", "-", lambda t: float(len(t["runs"]))),),
    options=(Option("throwaway-knob", {"a": {}, "b": {"train.epochs": 1}}, "a", "a knob of the throwaway figure"),),
    blocks={"throwaway-table": lambda: "| a |\\n|---|\\n| 1 |"},
))
register_claim(Claim("C99", "a throwaway claim (a test's)", "the throwaway holds", lambda: "it holds here",
                     lambda: "reproduced", ("predictors_cpu", "predictors_cpu"),
                     blocks={"c99-evidence": lambda: "the throwaway's evidence"}))
'''


@pytest.fixture
def restore_registry():
    """Whatever a test registers is gone after it."""
    before = {name: dict(getattr(registry, name)) for name in ("FIGURES", "CLAIMS", "BLOCKS", "STUDIES")}
    yield
    for name, saved in before.items():
        d = getattr(registry, name)
        d.clear()
        d.update(saved)


def _load(tmp_path: Path, text: str, name: str = "throwaway_figure"):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _docs_tool():
    spec = importlib.util.spec_from_file_location("anchorlab_docs_tool_registry", ROOT / "tools" / "docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_new_figure_module_reaches_the_flags_the_blocks_and_the_status_table(tmp_path, capsys, restore_registry):
    from anchorlab.cli import build_parser
    from anchorlab.papers.docs.status import status_table
    from anchorlab.papers.reproduce import figure_options

    _load(tmp_path, THROWAWAY)
    # the command line: its option is a reproduce flag
    assert "throwaway-knob" in figure_options()
    args = build_parser(["reproduce"]).parse_args(["reproduce", "study-throwaway", "--throwaway-knob", "b"])
    assert args.throwaway_knob == "b"
    # the docs: the figure's block and the claim's are declared, with their owners; tools/docs.py lists them
    assert BLOCKS["throwaway-table"].owner == "study-throwaway" and BLOCKS["c99-evidence"].owner == "C99"
    assert _docs_tool().main(["--list"]) == 0
    listed = dict(line.split() for line in capsys.readouterr().out.splitlines())
    assert listed["throwaway-table"] == "study-throwaway" and listed["c99-evidence"] == "C99"
    assert BLOCKS["throwaway-table"].render().startswith("| a |")
    # the claim and its figure: each names the other, and the results' status table has its row
    assert claim_figures("C99") == ("study-throwaway",) and unread_claims() == []
    table = status_table()
    assert "| [C99](#c99) | a throwaway claim (a test's) | the throwaway holds | it holds here |" in table
    assert table.splitlines()[-1].endswith("| **reproduced** |")          # after the registered claims


def test_every_figure_names_registered_claims_and_every_claim_its_figures():
    assert list(CLAIMS) == [f"C{i}" for i in range(1, 14)] + ["EV"]     # the results page's order
    assert unread_claims() == []
    assert all(f.cids for f in FIGURES.values()), [f.id for f in FIGURES.values() if not f.cids]
    assert claim_figures("C2") == ("neurips-fig2",)
    assert all(STUDIES.values())                                        # a study says what it is
    owners = set(FIGURES) | set(CLAIMS) | set(STUDIES)
    assert all(b.owner in owners for b in BLOCKS.values())


def test_a_duplicate_or_malformed_block_name_is_an_error(restore_registry):
    with pytest.raises(ValueError, match="'c1-clock' is already declared by C1"):
        register_blocks("study-x", {"a-new-one": lambda: "", "c1-clock": lambda: ""})
    assert "a-new-one" not in BLOCKS                                   # nothing of a refused set is added
    with pytest.raises(ValueError, match="not letters, digits"):
        register_blocks("study-x", {"no spaces": lambda: ""})
    fig = Figure(id="study-dup", cids=("C1",), paper="study", number="dup", shows="-", sweeps={"cpu": "predictors_cpu"},
                 tables=lambda runs, out, scale: ({}, {}), blocks={"claims-status": lambda: ""})
    with pytest.raises(ValueError, match="'claims-status' is already declared by results"):
        register(fig)
    assert "study-dup" not in FIGURES
    with pytest.raises(ValueError, match="say what it is"):
        register_study("study-y", "", {"y": lambda: ""})


def test_an_unknown_block_in_a_page_is_an_error():
    from anchorlab.papers.docs import DocsError, render

    with pytest.raises(DocsError, match="unknown block 'no-such-block'"):
        render("<!-- generated: no-such-block -->\nx\n<!-- end generated -->\n", "page.md", {})


def test_a_claim_no_figure_names_must_say_why(restore_registry):
    from anchorlab.papers.reproduce.registry import register_claim

    register_claim(Claim("C98", "unread", "-", lambda: "", lambda: "", ("predictors_cpu", "predictors_cpu")))
    assert unread_claims() == ["claim C98: no registered figure names it, and it does not say why (no_figure)"]
    del CLAIMS["C98"]
    register_claim(Claim("C97", "a study of the demo", "-", lambda: "", lambda: "", ("predictors_cpu", "predictors_cpu"),
                         no_figure="the demo's runs, outside the figure registry"))
    assert unread_claims() == []
    with pytest.raises(ValueError, match="not a claim id"):
        Figure(id="study-bad", cids=("c1",), paper="study", number="-", shows="-", sweeps={"cpu": "predictors_cpu"},
               tables=lambda runs, out, scale: ({}, {}))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
