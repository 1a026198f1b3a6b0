#!/usr/bin/env bash
# Multi-host test on one machine: three network namespaces ("machines") on a
# Linux bridge, each running a dml-node on its own address; dml-train in the
# root namespace trains across them (cocoa and async) and must converge.
# Needs root and CAP_NET_ADMIN (ip netns, veth, bridge); exits 77 (CTest:
# skipped) with a message where namespaces cannot be created.
#   scripts/netns_test.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
train="$build/samples/dml-train"
node="$build/samples/dml-node"
tag="dml$$"
br="${tag}br"
skip() { echo "netns_test: SKIPPED: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
ip netns add "${tag}a" 2>/dev/null || skip "cannot create network namespaces here (no CAP_NET_ADMIN?)"
ip netns del "${tag}a"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for i in 1 2 3; do ip netns del "${tag}$i" 2>/dev/null; ip link del "${tag}v$i" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  rm -rf "$work"
}
work=$(mktemp -d /tmp/dml-netns-XXXXXX)
trap cleanup EXIT

ip link add "$br" type bridge || skip "cannot create a bridge"
ip addr add 10.77.0.1/24 dev "$br"
ip link set "$br" up
nodes=""
for i in 1 2 3; do
  ns="${tag}$i"
  ip netns add "$ns"
  ip link add "${tag}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${tag}v$i" master "$br" up
  ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" "$node" --host="10.77.0.$((i + 1))" --port=4242 --name="machine$i" --insecure-open \
    --port-file="$work/port$i" 2>"$work/node$i.log" &
  pids+=($!)
  nodes="$nodes${nodes:+,}10.77.0.$((i + 1)):4242"
done
for i in 1 2 3; do
  for _ in $(seq 200); do [ -s "$work/port$i" ] && break; sleep 0.05; done
  [ -s "$work/port$i" ] || { cat "$work/node$i.log"; echo "netns_test: node $i did not start"; exit 1; }
done
# The data file is on every "machine's" disk (namespaces share the filesystem).
"$build/samples/dml-gen" --rows 6000 --cols 300 --nnz-per-row 10 --task classification \
  --out "$work/data.svm" >/dev/null
status=0
for mode in cocoa async; do
  out=$("$train" "$work/data.svm" --model logistic --lambda 1e-3 --mode "$mode" --workers 3 \
        --shards 2 --epochs 40 --nodes "$nodes" --quiet 2>&1)
  echo "netns_test: $mode across 10.77.0.2-4: $(echo "$out" | grep '^done')"
  case "$mode" in
    cocoa) echo "$out" | grep -q "^done: converged" || { echo "$out"; status=1; } ;;
    *) echo "$out" | grep -q "^done: max epochs" || { echo "$out"; status=1; } ;;
  esac
done
# A 40000-feature model (320 KiB, one shard): the shared vector crosses the
# "machines" over the bulk channel's TCP path (no single copy: other
# network namespaces cannot reach this process's Unix socket).
"$build/samples/dml-gen" --rows 2000 --cols 40000 --nnz-per-row 12 --task classification \
  --out "$work/wide.svm" >/dev/null
out=$("$train" "$work/wide.svm" --model logistic --lambda 1e-3 --mode cocoa --workers 3 \
      --shards 1 --epochs 100 --nodes "$nodes" --quiet --verbose 2>&1)
echo "netns_test: cocoa, 40000 features: $(echo "$out" | grep -E '^(done|bulk)' | tr '\n' ' ')"
echo "$out" | grep -q "^done: converged" || { echo "$out"; status=1; }
echo "$out" | grep -Eq "^bulk channel: [1-9][0-9]* vectors offered, [1-9][0-9]* fetched \(0 by single copy\)" \
  || { echo "$out"; echo "netns_test: expected bulk fetches over TCP"; status=1; }
exit $status
