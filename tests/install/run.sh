#!/usr/bin/env bash
# Installs the build into a temporary prefix, checks what went there, then
# builds tests/install/consumer against it with find_package(dml) and runs
# it, and compiles the same program with pkg-config's flags.
#   tests/install/run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/dml-train bin/dml-node bin/dml-predict lib/cmake/dml/dmlConfig.cmake \
         lib/cmake/dml/dmlConfigVersion.cmake lib/pkgconfig/dml.pc include/dml/actors/runtime.hpp \
         include/dml/net/wire.capnp.h; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
if find "$prefix/include" -path '*/internal*' | grep -q .; then
  echo "FAIL: internal headers installed:"; find "$prefix/include" -path '*/internal*'; exit 1
fi
if grep -rl '/internal/' "$prefix/include" | grep -q .; then
  echo "FAIL: installed headers include internal ones:"; grep -rl '/internal/' "$prefix/include"; exit 1
fi
cmake -S "$src/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" -j2 >/dev/null
"$tmp/consumer/consumer"
if command -v pkg-config >/dev/null; then
  # shellcheck disable=SC2046
  g++ -O1 "$src/consumer/main.cpp" -o "$tmp/pc_consumer" \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs dml)
  "$tmp/pc_consumer"
else
  echo "pkg-config not installed: the dml.pc check is skipped"
fi
echo "install: ok"
