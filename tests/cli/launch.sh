#!/usr/bin/env bash
# scripts/dml-launch under OpenMPI's mpirun: 4 slots on loopback, each a
# dml-node, slot 0 also runs a cocoa job with 4 workers on all of them.
# Skipped (77) where mpirun (Debian openmpi-bin) is not installed.
#   tests/cli/launch.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
command -v mpirun >/dev/null || { echo "mpirun not installed: skipped"; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=()
[ "$(id -u)" != 0 ] || root=(--allow-run-as-root)
out=$(mpirun "${root[@]}" --oversubscribe -np 4 "$src/scripts/dml-launch" --host 127.0.0.1 \
        --rendezvous "$tmp" --build "$build" -- --generate 3000x200 --model logistic \
        --mode cocoa --workers 4 --shards 2 2>&1)
echo "$out" | grep -E '^(dml-launch|runtime|done)'
grep -q '^dml-launch: 4 slots, nodes 127.0.0.1:[0-9]*,127.0.0.1:[0-9]*,127.0.0.1:[0-9]*,127.0.0.1:[0-9]*$' <<<"$out" ||
  { echo "FAIL: not 4 nodes"; exit 1; }
grep -q '^runtime: mode cocoa, 4 workers, 2 shards, on 4 node processes' <<<"$out" || { echo "FAIL: runtime line"; exit 1; }
grep -q '^done: converged' <<<"$out" || { echo "FAIL: the job did not converge"; exit 1; }
# Every slot's node stopped: no dml-node of this launch is left.
sleep 0.5
! pgrep -f "dml-node --host=127.0.0.1 --port=0 --port-file=$tmp" >/dev/null || { echo "FAIL: nodes left running"; exit 1; }
echo "launch: ok"
