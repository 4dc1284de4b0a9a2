"""The package's shape: no import cycles, small modules, every task on the one protocol, a light public API."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "anchorlab"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def import_graph() -> dict[str, set[str]]:
    """Module -> anchorlab modules it imports (any import statement, also inside functions;
    ``if TYPE_CHECKING`` blocks excluded)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
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


def test_no_import_cycles_between_modules():
    graph = import_graph()
    # a package's __init__ re-exporting its submodules is not a dependency of those submodules
    for mod, deps in graph.items():
        graph[mod] = {d for d in deps if not mod.startswith(d + ".")}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_modules_stay_small_or_say_why():
    long = []
    for mod, path in _modules().items():
        text = path.read_text()
        n = text.count("\n")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if n > MAX_LINES and f"over {MAX_LINES} lines" not in doc:
            long.append(f"{mod} ({n} lines)")
    assert not long, f"modules over {MAX_LINES} lines without a reason in their docstring: {long}"


@pytest.mark.parametrize("name", ["anchor", "scan", "cogs", "pairs", "addition", "prontoqa", "lm"])
def test_every_registered_task_implements_the_protocol(name):
    from anchorlab.registry import TASKS, load
    from anchorlab.tasks.base import Task

    cls = load(TASKS[name].impl)
    for attr in ("dims", "train_data", "eval_data", "loss", "evaluate", "headline", "stackable", "name"):
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
