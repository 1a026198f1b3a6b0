#!/bin/bash
# The allreduce through shards (net_bench --what=allreduce) against OpenMPI's
# MPI_Allreduce (bench/allreduce_mpi), interleaved so both see the same
# machine: ROUNDS pairs, then each side's median and the ratio of medians.
#   bench/allreduce_compare.sh [build] [rounds=5] [bytes=8388608] [iters=40] [path=local]
# Needs Debian's openmpi-bin and libopenmpi-dev (allreduce_mpi is built only then).
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
bytes=${3:-8388608}
iters=${4:-40}
path=${5:-local}
if [[ ! -x "$build/bench/allreduce_mpi" ]]; then
  echo "allreduce_compare: $build/bench/allreduce_mpi missing (install openmpi-bin libopenmpi-dev, rebuild)" >&2
  exit 2
fi
ours=() mpi=()
for ((r = 1; r <= rounds; r++)); do
  # --concat=1: every member ends with the whole sum in one vector of its
  # own, as MPI_Allreduce's output (arena blocks are read in place, so the
  # P ranges alone would not be a copy in our memory).
  o=$("$build/bench/net_bench" --what=allreduce --procs=4 --path="$path" --concat=1 \
        --bytes="$bytes" --iters="$iters" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  m=$(mpirun --allow-run-as-root --oversubscribe -np 4 "$build/bench/allreduce_mpi" "$bytes" "$iters" 2>/dev/null |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  echo "round $r: shards ($path path) $o ms, MPI_Allreduce $m ms"
  ours+=("$o") mpi+=("$m")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mo=$(median "${ours[@]}")
mm=$(median "${mpi[@]}")
awk -v o="$mo" -v m="$mm" -v b="$bytes" 'BEGIN {
  printf "4 processes, %d bytes each: shards median %.3f ms, MPI_Allreduce median %.3f ms, ratio %.2f (goal <= 1.5)\n", b, o, m, o / m }'
