#!/usr/bin/env bash
# Packs what bench/tpa_scd_device.sh runs on a device machine into .devrun/
# (ignored by git): the GPU tests, the benchmark, dml-train, test_runtime and
# test_gpu_solver built here with nvcc, the shared libraries they need beyond
# the C/C++ runtime, and the a9a and news20 sets.
# Then, with the device tool: run bench/tpa_scd_device.sh all ... carrying .devrun.
#   bench/tpa_scd_pack.sh [BUILD_DIR (build)] [DATA_DIR (BUILD_DIR/bench-data)]
set -euo pipefail
build=${1:-build}
data=${2:-$build/bench-data}
cmake --build "$build" -j2 --target test_spmv test_tpa_scd_device tpa_scd_bench duhl_bench dml-train test_runtime \
  test_gpu_solver
rm -rf .devrun && mkdir -p .devrun/lib
bins=("$build/tests/gpu/test_spmv" "$build/tests/gpu/test_tpa_scd_device" "$build/bench/tpa_scd_bench" "$build/bench/duhl_bench"
      "$build/samples/dml-train" "$build/tests/actors/test_runtime" "$build/tests/actors/test_gpu_solver")
cp "${bins[@]}" .devrun/
ldd "${bins[@]}" | awk '/=>/ {print $3}' | sort -u |
  grep -v -E 'libc\.so|libm\.so|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux' |
  while read -r lib; do cp -L "$lib" .devrun/lib/; done
for f in a9a.svm news20.binary.svm; do [[ -f $data/$f ]] && cp "$data/$f" .devrun/; done
du -sh .devrun
