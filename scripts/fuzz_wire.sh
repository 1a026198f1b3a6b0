#!/usr/bin/env bash
# Fuzzes the actor payload wire format (fuzz/fuzz_wire_entry.cpp) with
# libFuzzer + ASan + UBSan for SECONDS seconds; with DML_FUZZ_TARGET=frame,
# the frame reader instead (fuzz/fuzz_frame.cpp: a BASP header, the
# transport's frame bound, the payload as CAF reads a message).
#
#   [DML_FUZZ_TARGET=wire|frame] scripts/fuzz_wire.sh [SECONDS] [SUMMARY_FILE]
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

target=fuzz_${DML_FUZZ_TARGET:-wire}
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
cmake --build "$build" --target "$target" -j"$jobs"

out=$build/fuzz
rm -rf "$out/${target}_seeds"
mkdir -p "$out/${target}_seeds" "$out/${target}_corpus"
"$out/$target" -write_seeds="$out/${target}_seeds"

log=$out/$target.log
set +e
"$out/$target" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$out/" "$out/${target}_corpus" "$out/${target}_seeds" >"$log" 2>&1
status=$?
set -e

# The last status line (execs, cov, ft, corp), any crash report, and the
# final stats.
final=$( {
  echo "$target: ${seconds} s, libFuzzer exit status ${status}, $(date -u +%Y-%m-%dT%H:%MZ)"
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
