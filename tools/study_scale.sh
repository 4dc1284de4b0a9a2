#!/usr/bin/env bash
# The scale ladder (anchorlab reproduce study-scale), trained from a worktree pinned at one commit with its own
# install, so that work on main never changes the code a running study imports. Resumable: run it again after
# an interruption and it goes on where it stopped (finished runs are skipped, interrupted ones resume).
#
#   bash tools/study_scale.sh [PIN] [OUT]      # PIN: the ladder's commit (default 87948f6), OUT: /work/ladder_runs
#
# Rungs in the order the rule asks (cheap first, each complete across op sets before the next): width 64; the
# width-128 runs the committed tables lack; width 128 at 900k; width 256 seeds 0-1, then seed 2. The committed
# width-128 rows (opset_many_cpu.csv, fig2_cell_cpu.csv) are never trained again, nor is any run the ladder's own
# committed table holds (docs/figures/scale_ladder_cpu.csv on main, copied at start: OUT may not outlive the
# machine, the committed rows do). Every run on bf16 autocast.
# Refresh the committed table from OUT with (from main):
#   anchorlab reproduce study-scale --no-train --out OUT --from-table docs/figures/opset_many_cpu.csv \
#       --from-table docs/figures/fig2_cell_cpu.csv --from-table OUT/committed_rows.csv \
#       && cp OUT/study-scale/runs.csv docs/figures/scale_ladder_cpu.csv
set -euo pipefail
PIN=${1:-87948f6}
OUT=${2:-/work/ladder_runs}
TREE=${LADDER_TREE:-/work/ladder}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -d "$TREE" ]; then
    git -C "$ROOT" worktree add --detach "$TREE" "$PIN"
fi
[ "$(git -C "$TREE" rev-parse --short=7 HEAD)" = "${PIN:0:7}" ] || { echo "$TREE is not at $PIN"; exit 2; }
if [ ! -x "$TREE/.venv/bin/anchorlab" ]; then
    python3 -m venv "$TREE/.venv" && "$TREE/.venv/bin/pip" install -q "torch==2.13.0" -e "$TREE"
fi
A="$TREE/.venv/bin/anchorlab"
mkdir -p "$OUT"
cp "$ROOT/docs/figures/scale_ladder_cpu.csv" "$OUT/committed_rows.csv"
DONE="--done-in $TREE/docs/figures/opset_many_cpu.csv --done-in $TREE/docs/figures/fig2_cell_cpu.csv --done-in $OUT/committed_rows.csv"
run() { echo "=== $(date -u +%FT%TZ) slice $*"; (cd "$TREE" && $A sweep scale_ladder_cpu --out "$OUT/sweep" $DONE --workers 2 --stack never "$@"); }
run --only model.d_model=64
run --only model.d_model=128 --only task.n_train=100000
run --only task.n_train=900000
run --only model.d_model=256 --only train.init_seed=0,1
run --only model.d_model=256
echo "=== $(date -u +%FT%TZ) ladder done"
