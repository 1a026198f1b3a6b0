#!/usr/bin/env bash
# README command 1: set up, build, and run the sample distributed training job:
# a CoCoA+ logistic regression on generated data whose 4 workers and 2
# parameter shards run in 3 dml-node processes on loopback (started and
# stopped by dml-train --local-nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/samples/dml-train --generate 20000x2000 --nnz-per-row 20 --model logistic \
  --mode cocoa --workers 4 --shards 2 --local-nodes 3 "$@"
