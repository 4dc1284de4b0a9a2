"""A plain install (no extras): every module imports, every CLI command works or names its extra in one line.

The optional packages are hidden from a subprocess (tests/plain_cli.py wraps
every meta-path finder so they look uninstalled), which is how CI checks the
plain install without a second environment.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"

IMPORT_ALL = """
import sys, json, pkgutil, importlib, traceback
sys.path.insert(0, {tests!r})
import plain_cli
plain_cli.hide_extras()
import anchorlab
failed = {{}}
names = ["anchorlab"] + [m.name for m in pkgutil.walk_packages(anchorlab.__path__, "anchorlab.")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc().strip().splitlines()[-1]
leaked = sorted({{m.split(".")[0] for m in sys.modules}} & set(plain_cli.HIDDEN))
print(json.dumps({{"n": len(names), "failed": failed, "leaked": leaked}}))
"""


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    env["MPLBACKEND"] = "Agg"
    return env


def test_every_module_imports_without_the_extras():
    r = subprocess.run([sys.executable, "-c", IMPORT_ALL.format(tests=str(TESTS))], capture_output=True, text=True,
                       env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["n"] == len(list((SRC / "anchorlab").rglob("*.py")))   # every module under src/anchorlab was tried
    assert res["failed"] == {}
    assert res["leaked"] == []                # nothing even tried to load an extra's package


def test_every_cli_command_works_or_names_its_extra(tmp_path):
    sys.path.insert(0, str(TESTS))
    try:
        import plain_cli
    finally:
        sys.path.remove(str(TESTS))
    out = tmp_path / "res.json"
    quick = [] if os.environ.get("ANCHORLAB_SLOW") == "1" else ["--quick"]   # the full table is slow
    r = subprocess.run([sys.executable, str(TESTS / "plain_cli.py"), str(tmp_path), "--hide-extras", *quick,
                        "--json", str(out)],
                       capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert out.exists(), r.stderr[-3000:]
    res = {x["label"]: x for x in json.loads(out.read_text())}
    bad = {k: v for k, v in res.items() if not v["ok"]}
    assert not bad, r.stdout
    for label, x in res.items():
        extra = plain_cli.NEEDS.get(label)
        if extra is None:
            assert x["rc"] == 0, (label, x)
        else:                                  # exactly one line, naming the extra that brings the package
            assert x["rc"] == 2 and x["stderr_lines"] == 1 and f"pip install 'anchorlab[{extra}]'" in x["stderr"], x
    assert {"config", "train", "eval", "sweep", "report", "analyze stable-rank", "reproduce --dry-run"} <= set(res)
    assert r.returncode == 0


@pytest.mark.parametrize("extra, modules", [("analysis", {"scipy", "sklearn"}), ("parquet", {"pyarrow"}),
                                            ("ray", {"ray"}), ("tracking", {"mlflow", "tensorboard"})])
def test_each_extra_is_declared_in_pyproject(extra, modules):
    import tomllib

    from anchorlab.extras import EXTRAS

    declared = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pkgs = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in declared[extra]}
    for m in modules:
        pkg, e = EXTRAS[m]
        assert e == extra and pkg in pkgs, (m, pkg, pkgs)
