"""Every CLI command at tiny size, as a user of a plain install (no extras) runs it.

    python tests/plain_cli.py WORKDIR [--hide-extras] [--quick] [--json OUT.json]

prints one line per command: its label, return code, and the line it printed
to stderr when it did not succeed. A command passes when it returns 0, or 2
with exactly one stderr line naming the extra to install
(``pip install 'anchorlab[...]'``). ``--hide-extras`` makes the optional
packages unimportable (a meta-path blocker) so a full environment behaves as
a plain install; tests/test_plain_install.py runs it that way, and the
closing note of issue 17 ran it in a fresh venv with ``pip install torch -e .``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import traceback

HIDDEN = ("sklearn", "scipy", "pyarrow", "ray", "mlflow", "tensorboard", "tensorboardX", "transformers",
          "diffusers", "tokenizers", "zstandard", "wandb")
HIDDEN_DISTS = {"scikit-learn", "scipy", "pyarrow", "ray", "mlflow", "mlflow-skinny", "tensorboard", "tensorboardx",
                "transformers", "diffusers", "tokenizers", "zstandard", "wandb"}   # their distributions' names
EXTRA_HINT = "pip install 'anchorlab["

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=128", "train.epochs=1", "train.eval_every=4", "optim.lr=1e-3", "train.threads=1"]

# the subset the test suite runs (each command family once; the rest repeat code paths at more cost)
QUICK = ("config", "train", "eval", "analyze stable-rank", "analyze condensation", "sweep --dry-run", "sweep",
         "sweep --executor ray", "report", "reproduce --dry-run", "reproduce neurips-fig5", "train log_complexity",
         "train tracking=mlflow", "train tracking=tensorboard")

# label -> the extra it needs (None: must work on a plain install)
NEEDS = {"analyze condensation": "analysis", "train log_complexity": "analysis", "train tracking=mlflow": "tracking",
         "train tracking=tensorboard": "tracking", "sweep --executor ray": "ray", "reproduce neurips-fig5": "analysis"}


def hide_extras() -> None:
    """Make the optional packages absent for this process, as on a plain install.

    Every meta-path finder is wrapped to find nothing under the hidden names,
    so ``importlib.util.find_spec(name)`` returns None and ``import name``
    raises ModuleNotFoundError, exactly as when the package is not installed;
    their distributions' metadata is hidden too, and every other distribution's
    (anchorlab's own entry points among them) is found as on a plain install.
    """
    import importlib.abc

    class Hide(importlib.abc.MetaPathFinder):
        def __init__(self, inner):
            self.inner = inner

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                return None
            return self.inner.find_spec(name, path, target)

        def find_distributions(self, *args, **kwargs):
            found = getattr(self.inner, "find_distributions", None)
            for d in (found(*args, **kwargs) if found else ()):
                if (d.metadata["Name"] or "").lower().replace("_", "-") not in HIDDEN_DISTS:
                    yield d

        def invalidate_caches(self):
            if hasattr(self.inner, "invalidate_caches"):
                self.inner.invalidate_caches()

    for m in [m for m in sys.modules if m.split(".")[0] in HIDDEN]:
        del sys.modules[m]
    sys.meta_path[:] = [Hide(f) for f in sys.meta_path]


def commands(w: str) -> list[tuple[str, list[str]]]:
    sets = [x for s in TINY for x in ("--set", s)]
    spec = f"{w}/spec.yaml"
    with open(spec, "w") as f:
        f.write("name: plain\nbase: demo/small\nset:\n" + "".join(f"  - {s}\n" for s in TINY)
                + "axes:\n  init.gamma: [0.3, 0.6]\n")
    run, run2 = f"{w}/run", f"{w}/run2"
    return [
        ("config", ["config", "demo/small", "--set", "init.gamma=0.8"]),
        ("train", ["train", "demo/small", "--out", run, "--no-progress", *sets]),
        ("train (second run)", ["train", "demo/small", "--out", run2, "--no-progress", *sets, "--set", "init.gamma=0.8"]),
        ("eval", ["eval", run]),
        ("analyze --list", ["analyze", "--list"]),
        ("analyze stable-rank", ["analyze", run, "stable-rank"]),
        ("analyze embedding", ["analyze", run, "embedding"]),
        ("analyze cov-spectrum", ["analyze", run, "cov-spectrum"]),
        ("analyze flow-scores", ["analyze", run, "flow-scores"]),
        ("analyze tsne-ao1", ["analyze", run, "tsne-ao1", "--option", "max_points=60"]),
        ("analyze condensation", ["analyze", run, "condensation"]),
        ("analyze compare-runs", ["analyze", run, run2, "compare-runs"]),
        ("sweep --dry-run", ["sweep", spec, "--dry-run"]),
        ("sweep", ["sweep", spec, "--out", f"{w}/sweep", "--executor", "inprocess", "--no-progress"]),
        ("sweep --executor ray", ["sweep", spec, "--out", f"{w}/sweep_ray", "--executor", "ray", "--no-progress"]),
        ("report", ["report", f"{w}/sweep"]),
        ("reproduce --list", ["reproduce", "--list"]),
        ("reproduce --dry-run", ["reproduce", "neurips-fig2", "--dry-run"]),
        ("reproduce neurips-fig3", ["reproduce", "neurips-fig3", "--out", f"{w}/fig3", "--executor", "inprocess",
                                    "--no-progress", *sets]),
        ("reproduce neurips-fig5", ["reproduce", "neurips-fig5", "--out", f"{w}/fig5", "--executor", "inprocess",
                                    "--no-progress", *sets]),
        ("demo", ["demo", "--out", f"{w}/demo", "--workers", "1", "--no-progress", *sets]),
        ("train log_complexity", ["train", "demo/small", "--out", f"{w}/cx", "--no-progress", *sets,
                                  "--set", "train.log_complexity=true"]),
        ("train tracking=mlflow", ["train", "demo/small", "--out", f"{w}/ml", "--no-progress", *sets,
                                   "--set", "train.tracking=mlflow"]),
        ("train tracking=tensorboard", ["train", "demo/small", "--out", f"{w}/tb", "--no-progress", *sets,
                                        "--set", "train.tracking=tensorboard"]),
    ]


def run_all(w: str, quick: bool = False) -> list[dict]:
    from anchorlab.cli import main

    results = []
    for label, args in commands(w):
        if quick and label not in QUICK:
            continue
        out, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:
                rc = e.code
            except BaseException:  # noqa: BLE001 - a traceback is a failure of this check
                traceback.print_exc()
                rc = "exception"
        lines = [x for x in err.getvalue().splitlines() if x.strip() and not x.startswith(("WARNING", "INFO"))]
        ok = rc == 0 or (rc == 2 and len(lines) == 1 and EXTRA_HINT in lines[0])
        results.append({"label": label, "command": "anchorlab " + " ".join(args), "rc": rc, "ok": ok,
                        "seconds": round(time.perf_counter() - t0, 1),
                        "stdout_last": (out.getvalue().strip().splitlines() or [""])[-1][:200],
                        "stderr": lines[-1][:300] if lines else "", "stderr_lines": len(lines)})
    return results


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("workdir")
    p.add_argument("--hide-extras", action="store_true")
    p.add_argument("--quick", action="store_true", help="only the QUICK subset")
    p.add_argument("--json")
    a = p.parse_args()
    if a.hide_extras:
        hide_extras()
    import matplotlib

    matplotlib.use("Agg")
    res = run_all(a.workdir, a.quick)
    for r in res:
        tail = r["stderr"] if r["rc"] != 0 else r["stdout_last"]
        print(f"{'ok ' if r['ok'] else 'BAD'} rc={r['rc']!s:3} {r['seconds']:5.1f}s  {r['label']:28s} {tail}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    sys.exit(0 if all(r["ok"] for r in res) else 1)
