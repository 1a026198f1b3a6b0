#!/usr/bin/env bash
# One device call for the primal side of the GPU solver (CoCoA+'s local
# solver on the device, column streaming, the caller's stream and scratch)
# and for DuHL lasso on the device. Expects bench/tpa_scd_pack.sh's .devrun/
# (carry it). Every step gets what is left of DEADLINE seconds, so the call
# ends inside its limit whatever hangs; logs go to $OUT.
#   bench/gpu_primal_check.sh [STEP...]   (on the device machine; all steps
#   when none is named: device_tests memcheck bench_primal duhl_lasso
#   cocoa_lasso runtime bench_gen bench_dual racecheck)
set -u
D=$PWD/.devrun
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
STEPS=" ${*:-device_tests memcheck bench_primal duhl_lasso cocoa_lasso runtime bench_gen bench_dual racecheck} "
step() {  # step SECONDS NAME COMMAND...
  local want=$1 name=$2; shift 2
  [[ $STEPS == *" $name "* ]] || return 0
  local left=$((DEADLINE - SECONDS - 5))
  (( left < 10 )) && { echo "== $name: skipped (no time left)"; return; }
  (( want > left )) && want=$left
  echo "== $name (at ${SECONDS}s, up to ${want}s)"
  timeout "$want" "$@" >"$OUT/$name.log" 2>&1
  echo "   rc $? after ${SECONDS}s"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
step 120 device_tests "$D/test_tpa_scd_device" --log_level=test_suite
[[ -f "$OUT/device_tests.log" ]] && grep -E 'error|fail|passed|skipp|Leaving test case|P |gap' "$OUT/device_tests.log" | grep -v '^\s*$' | tail -45
step 60 memcheck compute-sanitizer --tool memcheck "$D/test_tpa_scd_device" --run_test=primal_paths_on_a_small_problem
[[ -f "$OUT/memcheck.log" ]] && tail -3 "$OUT/memcheck.log"
step 150 bench_primal "$D/tpa_scd_bench" --models lasso,l1-logistic --seq-seconds 5 "$D/a9a.svm" "$D/news20.binary.svm"
[[ -f "$OUT/bench_primal.log" ]] && cat "$OUT/bench_primal.log"
step 80 duhl_lasso "$D/duhl_bench" --models lasso --budgets 0.1 --seconds 10 --tpa-scd "$D/news20.binary.svm"
[[ -f "$OUT/duhl_lasso.log" ]] && cat "$OUT/duhl_lasso.log"
step 30 cocoa_lasso "$D/dml-train" --model lasso --lambda 1e-3 --mode cocoa --workers 2 --solver tpa-scd --epochs 50 "$D/news20.binary.svm"
[[ -f "$OUT/cocoa_lasso.log" ]] && grep -v '^round' "$OUT/cocoa_lasso.log" | tail -5
step 30 runtime "$D/test_runtime" --run_test=cocoa_with_the_gpu_local_solver_or_its_fallback
[[ -f "$OUT/runtime.log" ]] && tail -2 "$OUT/runtime.log"
step 90 bench_gen "$D/tpa_scd_bench" --models lasso --gpu-only --gen-rows 1000000 --gen-nnz 100 --seq-seconds 10
[[ -f "$OUT/bench_gen.log" ]] && cat "$OUT/bench_gen.log"
step 150 bench_dual "$D/tpa_scd_bench" --models logistic,svm --seq-seconds 5 "$D/a9a.svm" "$D/news20.binary.svm"
[[ -f "$OUT/bench_dual.log" ]] && cat "$OUT/bench_dual.log"
step 240 racecheck compute-sanitizer --tool racecheck "$D/test_tpa_scd_device" --run_test=primal_paths_on_a_small_problem
[[ -f "$OUT/racecheck.log" ]] && tail -3 "$OUT/racecheck.log"
echo "== done at ${SECONDS}s"
