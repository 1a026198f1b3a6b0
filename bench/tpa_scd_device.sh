#!/usr/bin/env bash
# The GPU checks of TPA-SCD in one call on a device machine: the device
# tests, memcheck and racecheck on one case, the cocoa runtime case and a
# cocoa job on news20 with GPU local solvers, then the benchmark. Expects
# what bench/tpa_scd_pack.sh puts in .devrun/ (carry it):
#   bench/tpa_scd_device.sh [tests|bench|all] [bench args...]
set -u
what=${1:-all}; shift || true
D=$PWD/.devrun
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/tpa_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
if [[ $what == tests || $what == all ]]; then
  timeout 60 "$D/test_spmv" --log_level=test_suite 2>&1 | tail -3
  timeout 300 "$D/test_tpa_scd_device" --log_level=test_suite 2>&1 | tee "$OUT/device_tests.log" | grep -v "^\s*$" | tail -60
  timeout 90 compute-sanitizer --tool memcheck "$D/test_tpa_scd_device" \
    --run_test=one_block_in_flight_is_sequential 2>&1 | tail -4
  timeout 90 compute-sanitizer --tool racecheck "$D/test_tpa_scd_device" \
    --run_test=one_block_in_flight_is_sequential 2>&1 | tail -4
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool "$D/test_tpa_scd_device" \
      --run_test=primal_paths_on_a_small_problem 2>&1 | tail -4
  done
  # Streamed runs through reused slots, and newGLMNET's kernels (L1-logistic).
  timeout 240 compute-sanitizer --tool memcheck "$D/test_tpa_scd_device" \
    --run_test=callers_stream_and_scratch_hold_the_run 2>&1 | tail -4
  timeout 60 "$D/test_runtime" --run_test=cocoa_with_the_gpu_local_solver_or_its_fallback 2>&1 | tail -2
  timeout 60 "$D/test_gpu_solver" 2>&1 | tail -2
  [[ -f $D/news20.binary.svm ]] && timeout 60 "$D/dml-train" --model logistic --mode cocoa \
    --workers 2 --solver tpa-scd --tol 1e-4 "$D/news20.binary.svm" 2>&1 | grep -v '^round' | tail -8
fi
if [[ $what == bench || $what == all ]]; then
  timeout "${BENCH_TIMEOUT:-420}" "$D/tpa_scd_bench" "$@" 2>&1 | tee "$OUT/bench.txt"
fi
