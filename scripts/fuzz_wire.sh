#!/usr/bin/env bash
# Fuzzes the actor payload wire format (fuzz/fuzz_wire_entry.cpp) with
# libFuzzer + ASan + UBSan for SECONDS seconds.
#
#   scripts/fuzz_wire.sh [SECONDS] [SUMMARY_FILE]
#
# Configures its own clang build in build-fuzz (-DDML_BUILD_FUZZ=ON; the
# normal g++ build is untouched), builds only the fuzz_wire target
# (DML_FUZZ_JOBS parallel jobs, default 1), writes the seed corpus (a valid
# encoding of every payload shape) and fuzzes with the persistent corpus in
# build-fuzz/fuzz/wire_corpus. Crash inputs land in build-fuzz/fuzz/crash-*.
# libFuzzer's final stats are printed and, with SUMMARY_FILE, saved there.
# Exit status: libFuzzer's (non-zero when it found a crash).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
summary=${2:-}
jobs=${DML_FUZZ_JOBS:-1}
build=build-fuzz
clangxx=${CLANGXX:-clang++}
clang=${CLANG:-clang}

cmake -S . -B "$build" \
  -DCMAKE_CXX_COMPILER="$clangxx" -DCMAKE_C_COMPILER="$clang" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDML_BUILD_FUZZ=ON -DDML_ENABLE_TESTS=OFF -DDML_ENABLE_SAMPLES=OFF \
  -DDML_ENABLE_BENCH=OFF -DDML_ENABLE_CUDA=OFF >/dev/null
cmake --build "$build" --target fuzz_wire -j"$jobs"

out=$build/fuzz
rm -rf "$out/wire_seeds"
mkdir -p "$out/wire_seeds" "$out/wire_corpus"
"$out/fuzz_wire" -write_seeds="$out/wire_seeds"

log=$out/fuzz_wire.log
set +e
"$out/fuzz_wire" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$out/" "$out/wire_corpus" "$out/wire_seeds" >"$log" 2>&1
status=$?
set -e

# The last status line (execs, cov, ft, corp), any crash report, and the
# final stats.
final=$( {
  echo "fuzz_wire: ${seconds} s, libFuzzer exit status ${status}, $(date -u +%Y-%m-%dT%H:%MZ)"
  grep -E '^#[0-9]+' "$log" | tail -n 1
  grep -E 'ERROR: |SUMMARY: |fuzz_wire: .*: |Test unit written|^MS: ' "$log" | head -n 20
  grep -E '^stat::' "$log"
} )
echo "$final"
if [[ -n "$summary" ]]; then
  mkdir -p "$(dirname "$summary")"
  echo "$final" >"$summary"
fi
exit "$status"
