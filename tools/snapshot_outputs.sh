#!/bin/bash
# The analysis outputs of every committed cache, written by the code on
# PYTHONPATH (default: this checkout's src/) into DIR, for a check that a
# refactoring changes no number: snapshot before and after, then
#   diff -r --exclude='*.png' --exclude='*.log' BEFORE AFTER
# Usage: tools/snapshot_outputs.sh DIR   (run from the repository root)
set -u
out=${1:?usage: tools/snapshot_outputs.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=${PYTHONPATH:-$root/src}
py=${PYTHON:-$root/.venv/bin/python}
rm -rf "$out" && mkdir -p "$out"
status=0
for axis in counted 6nd; do
  "$py" -m scalestudy.cli frontier "$root/data/cache/frontier.parquet" --from-runs \
    --compute-axis $axis --out-dir "$out/frontier_$axis" > "$out/frontier_$axis.log" 2>&1 \
    || { echo "frontier ($axis) failed: $out/frontier_$axis.log"; status=1; }
done
for cache in "$root"/data/cache/*.parquet; do
  name=$(basename "$cache" .parquet)
  "$py" -m scalestudy.cli analyse "$cache" --out-dir "$out/analyse/$name" --workers 1 \
    > "$out/analyse_$name.log" 2>&1 || { echo "analyse $name failed: $out/analyse_$name.log"; status=1; }
done
exit $status
