#!/usr/bin/env bash
# ThreadSanitizer over the actor tests, against a CAF built with TSan.
#
# Debian's libcaf is not instrumented: TSan then sees payloads handed over
# through CAF's mailboxes without the synchronisation inside CAF and reports
# hundreds of false races. This script builds CAF 0.17.6 (the version Debian
# ships, from Debian's own orig tarball, checked by its sha256) with
# -fsanitize=thread into $CAF_TSAN (default /opt/caf-0.17.6-tsan; reused when
# present), configures libdml with DML_ENABLE_TSAN=ON against it in
# build-tsan/, and runs test_runtime, test_cluster, test_node_loss,
# test_bulk and test_objective_dual (the dual solver's certificates on a
# second thread; no CAF there). Any TSan report fails the run.
#
# Usage: scripts/tsan.sh [ctest -R regex]     (needs curl, cmake, g++)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=${CAF_TSAN:-/opt/caf-0.17.6-tsan}
tests=${1:-'^(test_runtime|test_cluster|test_node_loss|test_bulk|test_objective_dual)$'}
jobs=${JOBS:-2}

if [ ! -f "$prefix/lib/libcaf_core.so" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  url=http://deb.debian.org/debian/pool/main/a/actor-framework/actor-framework_0.17.6.orig.tar.gz
  echo "tsan: fetching $url"
  curl -fsS -o "$work/caf.tar.gz" "$url"
  echo "e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c  $work/caf.tar.gz" |
    sha256sum -c --quiet
  tar xzf "$work/caf.tar.gz" -C "$work"
  src="$work/actor-framework-0.17.6"
  # receive_buffer.hpp uses std::numeric_limits without including <limits>
  # (g++ 12 no longer pulls it in transitively).
  sed -i 's|#include <memory>|#include <limits>\n#include <memory>|' \
    "$src/libcaf_io/caf/io/network/receive_buffer.hpp"
  echo "tsan: building CAF with -fsanitize=thread into $prefix"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
    -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes \
    -DCAF_NO_OPENCL=yes -DCAF_NO_OPENSSL=yes -DCAF_NO_SUMMARY=yes -DCAF_NO_COMPILER_CHECK=yes \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/build" -j"$jobs" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
  cmake --install "$work/build" >/dev/null
fi

echo "tsan: libdml against $prefix in build-tsan/"
mkdir -p build-tsan
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDML_ENABLE_TSAN=ON \
  -DDML_ENABLE_CUDA=OFF -DDML_ENABLE_BENCH=OFF -DCMAKE_PREFIX_PATH="$prefix" \
  -DCAF_INCLUDE_DIR="$prefix/include" -DCAF_CORE_LIBRARY="$prefix/lib/libcaf_core.so" \
  -DCAF_IO_LIBRARY="$prefix/lib/libcaf_io.so" >build-tsan/configure.log 2>&1 \
  || { cat build-tsan/configure.log; exit 1; }
cmake --build build-tsan -j"$jobs" --target test_runtime test_cluster test_node_loss test_bulk \
  test_objective_dual dml-node dml-train
# halt_on_error: the first report fails the test that made it.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd build-tsan
ctest --output-on-failure -j"$jobs" -R "$tests" --timeout 1200
echo "tsan: clean"
