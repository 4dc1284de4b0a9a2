"""Gather the demo's runs into a rate table (docs/figures/demo_rate_cpu.csv and its kin).

    anchorlab demo --seeds 10 --out runs/demo_rate
    anchorlab demo --seeds 3 --op-set 1 --out runs/demo_rate_op1
    anchorlab demo --seeds 3 --op-set 2 --out runs/demo_rate_op2
    python tools/demo_rate_table.py runs/demo_rate runs/demo_rate_op1 runs/demo_rate_op2 > docs/figures/demo_rate_cpu.csv

One row per finished run found under each DIR/runs (anchorlab.papers.demo_journal.RATE_COLUMNS and RATE_EXTRA, with
the run's clock as a fraction of the journal's 92,190 steps), the folders in the order given, each folder's runs
by seed and gamma. It reads the run directories, so it also gathers runs of settings the demo no longer trains
(another clock or gamma) for the record.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

JOURNAL_STEPS = 92_190


def rows_of(folder: Path) -> list[dict]:
    from anchorlab.papers import demo_journal as dj

    out = []
    for d in sorted((folder / "runs").iterdir()):
        if (d / "final.json").is_file():
            r = dj.model_row(d)
            r["clock"] = round(r["steps"] / JOURNAL_STEPS, 4)
            # a gamma the demo no longer trains is named by its side (the record of an earlier setting)
            if r["arm"] not in ("large_init", "small_init"):
                r["arm"] = "large_init" if r[dj.GAMMA] < dj.GAMMAS["small_init"] else "small_init"
            out.append(r)
    return sorted(out, key=lambda r: (r["seed"], r[dj.GAMMA]))


def main(argv: list[str]) -> int:
    from anchorlab.papers import demo_journal as dj

    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [r for d in argv for r in rows_of(Path(d))]
    t = pd.DataFrame(rows)[dj.RATE_COLUMNS + ["clock"] + dj.RATE_EXTRA]
    t.to_csv(sys.stdout, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
