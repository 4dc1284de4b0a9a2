"""The package's shape: imports point down a declared layer order, no import loops, small modules,
every task on the one protocol, a light public API.

The import walk reads every module with ``ast`` and counts every import statement: at the top level,
inside functions and under ``if TYPE_CHECKING``, with relative imports resolved. A module belongs to
the layer of :data:`LAYERS` whose prefix names it (the longest prefix wins). A module may import from
its own layer or a lower one; no modules and no packages (``train``, ``sweep``; and one level down,
``tasks.anchor``, ``analysis.mechanism``) may import each other in a loop.

Run as a script to print the package graph as the layer chart of docs/architecture.md, with the
count of upward imports and loops (and each offending edge)::

    python tests/test_structure.py                  # the chart: every package with the packages it imports
    python tests/test_structure.py train sweep      # the modules of train/ and sweep/ with their imports
    python tests/test_structure.py --write-docs     # rewrite the chart in docs/architecture.md
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from anchorlab.registry import TASKS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "anchorlab"
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 400

# Bottom to top: (layer, module prefixes under anchorlab, what it holds). "" is the package itself
# (anchorlab/__init__.py, the public API, which names everything it exports).
LAYERS: list[tuple[str, tuple[str, ...], str]] = [
    ("io", ("io", "progress", "registry", "metric_order", "run_status", "_version"),
     "atomic files, progress lines, name -> 'module:attr' registries, metric direction, run statuses, version"),
    ("config", ("config", "extras", "datasets"),
     "frozen dataclasses <-> YAML, one-line errors; optional packages; the data cache"),
    ("model", ("model",), "transformer with hook points, KV cache, init rate, parameter roles"),
    ("tasks", ("tasks",), "the Task protocol and the task families: data, loss, evaluation"),
    ("eval", ("eval",), "a run's solution, the phase rules and the metric vocabulary"),
    ("plots", ("plots",), "figures only: tables in, matplotlib Figure out, one saver"),
    ("train", ("train", "tracking"), "the one run lifecycle, single and stacked loops, checkpoints, tracking"),
    ("analysis", ("analysis",), "pure analyses of runs -> tables; the analysis registry"),
    ("sweep", ("sweep",), "grid, runner, executors, the results store, aggregation, reading a sweep back, the run "
                          "table (run dirs, sweep dirs and committed CSVs -> one row per run)"),
    ("report", ("report", "report_page"), "a sweep's HTML page"),
    ("bench", ("bench",), "the training benchmark: step times per path and shape, a new CPU read"),
    # The papers' layer (anchorlab.papers): nothing below it imports it (test_the_library_never_imports_the_papers).
    ("papers-judgement", ("papers.gammas", "papers.runs", "papers.eval", "papers.analysis", "papers.plots"),
     "the papers' run table, judgement (cell, readings, contrast, crossing, wd grid), the predictors study's fits, figures"),
    ("papers-figures", ("papers.reproduce", "papers.analyses"),
     "paper figures and the CPU studies: sweep per scale -> run table or sweep dir -> maker -> figure and readings; "
     "the figure registry (figures, claims, docs blocks)"),
    ("papers-studies", ("papers.robustness", "papers.demo", "papers.demo_journal", "papers"),
     "the robustness study, the CPU demo (journal and mirror task), the claims and their generated docs blocks, "
     "the papers' public names"),
    ("entry", ("cli", ""), "the command line and the public API"),
]


# ------------------------------------------------------------------ the walk
def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the anchorlab modules it imports: every import statement (top level, in functions, under
    TYPE_CHECKING), relative imports resolved; ``from pkg import sub`` counts as importing ``pkg.sub``."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t.startswith("anchorlab") and t != mod:
                    graph[mod].add(t)
    return graph


def layer_of(mod: str) -> int:
    """Index in :data:`LAYERS` of a module (longest matching prefix); KeyError if no layer names it."""
    rel = mod.removeprefix("anchorlab").removeprefix(".")
    best, best_len = None, -1
    for i, (_, prefixes, _) in enumerate(LAYERS):
        for p in prefixes:
            if (rel == p or rel.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise KeyError(f"{mod}: in no layer; add it to LAYERS in tests/test_structure.py")
    return best


def unlayered(graph: dict[str, set[str]]) -> list[str]:
    """Modules no layer names."""
    out = []
    for m in sorted(graph):
        try:
            layer_of(m)
        except KeyError:
            out.append(m)
    return out


def package_of(mod: str, depth: int = 1) -> str:
    """``anchorlab.train.run`` -> ``train`` (depth 2: ``train.run``); ``anchorlab.report`` -> ``report``;
    ``anchorlab`` -> ``anchorlab``; under ``anchorlab.papers`` one level deeper (``papers.eval``)."""
    rel = mod.removeprefix("anchorlab").removeprefix(".")
    if rel.startswith("papers."):   # the papers' layer is read one level down: its parts sit in three layers
        depth += 1
    return ".".join(rel.split(".")[:depth]) if rel else "anchorlab"


def package_graph(graph: dict[str, set[str]] | None = None, depth: int = 1) -> dict[str, set[str]]:
    """Package -> the other packages its modules import (depth 2: subpackages such as ``tasks.anchor``)."""
    graph = import_graph() if graph is None else graph
    out: dict[str, set[str]] = defaultdict(set)
    for mod, deps in graph.items():
        out[package_of(mod, depth)].update(package_of(d, depth) for d in deps)
    return {p: deps - {p} for p, deps in out.items()}


def upward_imports(graph: dict[str, set[str]] | None = None) -> list[str]:
    """``importer -> imported (layer -> higher layer)`` for every import that points up."""
    graph = import_graph() if graph is None else graph
    skip = set(unlayered(graph))       # reported by test_every_module_has_a_layer
    return [f"{m} -> {d} ({LAYERS[layer_of(m)][0]} -> {LAYERS[layer_of(d)][0]})"
            for m in sorted(graph) if m not in skip for d in sorted(graph[m] - skip) if layer_of(d) > layer_of(m)]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Loops of ``graph``, one at a time: find one, cut its first edge, repeat until none is left (so an
    empty list means the graph is acyclic, and every loop-making edge shows up in some listed loop)."""
    g = {k: set(v) for k, v in graph.items()}
    out = []
    while (c := find_cycle(g)) is not None:
        out.append(c)
        g[c[0]].discard(c[1])
    return out


# ------------------------------------------------------------------ the chart
def layer_chart(graph: dict[str, set[str]] | None = None) -> str:
    """The layer chart of docs/architecture.md: one block per layer, top first; each package with the
    packages it imports."""
    pg = package_graph(graph)
    by_layer: dict[int, list[str]] = defaultdict(list)
    lines = []
    for p in sorted(pg):
        try:
            by_layer[layer_of("anchorlab" if p == "anchorlab" else f"anchorlab.{p}")].append(p)
        except KeyError:
            lines.append(f"  {p:26s} -> {' '.join(sorted(pg[p])) or '-'}   (IN NO LAYER: add it to LAYERS)")
    for i in reversed(range(len(LAYERS))):
        name, _, what = LAYERS[i]
        if lines:
            lines.append("─" * 100)
        lines.append(f"{name:10s} {what}")
        for p in by_layer.get(i, []):
            shown = "anchorlab (the public API)" if p == "anchorlab" else p
            deps = textwrap.wrap(" ".join(sorted(pg[p])) or "-", 100 - 32)
            lines.append(f"  {shown:26s} -> {deps[0]}")
            lines += [" " * 32 + d for d in deps[1:]]
    return "\n".join(lines)


CHART_BEGIN, CHART_END = "<!-- layer chart: generated by `python tests/test_structure.py --write-docs` -->", \
    "<!-- end of layer chart -->"


def doc_chart() -> str:
    text = DOC.read_text()
    start, end = text.index(CHART_BEGIN) + len(CHART_BEGIN), text.index(CHART_END)
    return text[start:end].strip().removeprefix("```").removesuffix("```").strip("\n")


def write_doc_chart() -> None:
    text = DOC.read_text()
    start, end = text.index(CHART_BEGIN) + len(CHART_BEGIN), text.index(CHART_END)
    DOC.write_text(text[:start] + "\n```\n" + layer_chart() + "\n```\n" + text[end:])


def report() -> str:
    """Upward imports and loops, counted, with the offending edges."""
    graph = import_graph()
    up = upward_imports(graph)
    mod_loops = loops(graph)
    pkg_loops = loops(package_graph(graph)) + loops(package_graph(graph, depth=2))
    lib_papers = library_to_papers(graph)
    out = [f"{len(graph)} modules, {sum(map(len, graph.values()))} imports; "
           f"{len(up)} upward imports, {len(mod_loops) + len(pkg_loops)} loops "
           f"({len(mod_loops)} between modules, {len(pkg_loops)} between packages); "
           f"{len(lib_papers)} library -> papers imports"]
    out += [f"  in no layer: {m}" for m in unlayered(graph)]
    out += [f"  upward: {e}" for e in up]
    out += [f"  module loop: {' -> '.join(c)}" for c in mod_loops]
    out += [f"  package loop: {' -> '.join(c)}" for c in pkg_loops]
    out += [f"  library -> papers: {e}" for e in lib_papers]
    return "\n".join(out)


# ------------------------------------------------------------------ tests
def test_every_module_has_a_layer():
    missing = unlayered({m: set() for m in _modules()})
    assert not missing, f"modules in no layer (add them to LAYERS in tests/test_structure.py): {missing}"


def test_imports_point_down_the_layers():
    up = upward_imports()
    assert not up, f"{len(up)} upward imports (importer -> imported):\n" + "\n".join(up)


def library_to_papers(graph: dict[str, set[str]] | None = None) -> list[str]:
    """``importer -> imported`` for every import of :mod:`anchorlab.papers` by the library (every module outside
    the papers' package and the command line, the public API ``anchorlab`` included)."""
    graph = import_graph() if graph is None else graph
    papers = lambda m: m == "anchorlab.papers" or m.startswith("anchorlab.papers.")  # noqa: E731
    library = [m for m in graph if not papers(m) and not m.startswith("anchorlab.cli")]
    return [f"{m} -> {d}" for m in sorted(library) for d in sorted(graph[m]) if papers(d)]


def test_the_library_never_imports_the_papers():
    found = library_to_papers()
    assert not found, f"{len(found)} library -> papers imports:\n" + "\n".join(found)
    assert library_to_papers({"anchorlab.sweep.runtable": {"anchorlab.papers.eval.judgement"},
                              "anchorlab.papers.eval.judgement": set()}) == [
        "anchorlab.sweep.runtable -> anchorlab.papers.eval.judgement"]


def test_no_import_cycles_between_modules():
    found = loops(import_graph())
    assert not found, f"{len(found)} module loops:\n" + "\n".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("depth", [1, 2])
def test_no_import_cycles_between_packages(depth):
    found = loops(package_graph(depth=depth))
    assert not found, f"{len(found)} package loops:\n" + "\n".join(" -> ".join(c) for c in found)


def test_structure_report_says_zero(capsys):
    text = report()
    with capsys.disabled():
        print("\n" + text)
    assert "0 upward imports, 0 loops" in text.splitlines()[0]


def test_the_walk_sees_function_level_type_checking_and_relative_imports():
    g = import_graph()
    # anchorlab/__init__.py imports everything only under TYPE_CHECKING; evaluate() imports .train in its body
    assert {"anchorlab.train", "anchorlab.sweep.runner"} <= g["anchorlab"]
    assert "anchorlab.papers.reproduce" in g["anchorlab.papers"]
    assert "anchorlab.io" in g["anchorlab.plots.save"]              # `from ..io import atomic_write` in a function


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert len(loops({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}})) == 2


def test_layers_are_checked():
    assert upward_imports({"anchorlab.io": {"anchorlab.train.run"}, "anchorlab.train.run": set()}) == [
        "anchorlab.io -> anchorlab.train.run (io -> train)"]
    assert LAYERS[layer_of("anchorlab")][0] == "entry" and LAYERS[layer_of("anchorlab.report_page")][0] == "report"


def test_docs_chart_is_the_generated_one():
    assert doc_chart() == layer_chart(), ("docs/architecture.md's layer chart differs from the code; "
                                          "regenerate it: python tests/test_structure.py --write-docs")


def test_modules_stay_small_or_say_why():
    long = []
    for mod, path in _modules().items():
        text = path.read_text()
        n = text.count("\n")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if n > MAX_LINES and f"over {MAX_LINES} lines" not in doc:
            long.append(f"{mod} ({n} lines)")
    assert not long, f"modules over {MAX_LINES} lines without a reason in their docstring: {long}"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_registered_task_implements_the_protocol(name):
    from anchorlab.registry import load
    from anchorlab.tasks.base import Task

    cls = load(TASKS[name].impl)
    for attr in ("dims", "train_data", "eval_data", "loss", "evaluate", "headline", "stackable", "name",
                 "write_run_files", "summary_lines"):
        assert hasattr(cls, attr), (name, attr)
    assert cls.name == name
    cfg_cls = load(TASKS[name].config)
    assert cfg_cls().name == name
    if name == "anchor":
        assert isinstance(cls(cfg_cls()), Task)


def test_public_api_is_light_and_leaves_matplotlib_alone():
    code = ("import sys, anchorlab; "
            "assert 'matplotlib' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules); "
            "from anchorlab import load_config, train, load_run, evaluate, apply_init_rate, run_sweep, Task; "
            "assert 'matplotlib.pyplot' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_one_version_source():
    import tomllib

    import anchorlab
    from anchorlab.train.checkpoint import versions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "anchorlab._version.__version__"}
    assert versions()["anchorlab"] == anchorlab.__version__          # what final.json records


def test_sweep_aggregation_leaves_torch_alone():
    code = "import sys, anchorlab.sweep.aggregate; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def print_package_graph(packages: list[str] | None = None) -> None:
    """Print the layer chart (every package with the packages it imports) and the report; with
    ``packages`` (e.g. ``["train", "sweep"]``), each of their modules with the modules it imports."""
    graph = import_graph()
    if packages:
        for m in sorted(graph):
            if package_of(m) in packages:
                deps = " ".join(sorted(d.removeprefix("anchorlab.") for d in graph[m])) or "-"
                print(f"{m.removeprefix('anchorlab.'):40s} [{LAYERS[layer_of(m)][0]}] -> {deps}")
    else:
        print(layer_chart(graph))
    print()
    print(report())


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--write-docs" in args:
        write_doc_chart()
        print(f"wrote the layer chart into {DOC}")
    print_package_graph([a for a in args if not a.startswith("--")])
