#!/usr/bin/env bash
# Installs the Debian packages libdml needs (skipping those present), then
# configures and builds into ./build. Idempotent. Usage: scripts/setup.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libcaf-dev libabsl-dev capnproto libcapnp-dev libboost-test-dev libssl-dev
          zlib1g-dev libbz2-dev liblzma-dev xz-utils bzip2 python3 python3-matplotlib iproute2 liblinear-tools
          pkg-config openmpi-bin openssl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
cmake --build build -j2
