#!/usr/bin/env bash
# README command 1: set up, build, and run a sample training job on generated data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/samples/dml-train --generate 20000x2000 --nnz-per-row 20 --model logistic "$@"
