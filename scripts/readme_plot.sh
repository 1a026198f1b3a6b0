#!/usr/bin/env bash
# Makes the README's metrics picture (bench/results/metrics_example.png):
# CoCoA+ with 2 and 4 workers and sync SGD with 4, on 3 dml-node processes
# on loopback, logistic regression on a generated 20000 x 2000 problem,
# each run's --metrics-out drawn by scripts/dml-plot.
#   scripts/readme_plot.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  "$build/samples/dml-train" --generate 20000x2000 --model logistic --lambda 1e-5 --local-nodes 3 \
    --quiet --metrics-out "$tmp/$1.jsonl" "${@:2}" >/dev/null
}
run cocoa-K2 --mode cocoa --workers 2
run cocoa-K4 --mode cocoa --workers 4
run sync-K4 --mode sync --workers 4 --epochs 40
scripts/dml-plot -o bench/results/metrics_example.png \
  --title "logistic, lambda 1e-5, generated 20000 x 2000, 3 dml-node processes on loopback" \
  "$tmp"/cocoa-K2.jsonl "$tmp"/cocoa-K4.jsonl "$tmp"/sync-K4.jsonl
