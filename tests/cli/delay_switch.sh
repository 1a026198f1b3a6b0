#!/usr/bin/env bash
# bench/delay_switch: a TUN switch between network namespaces that delays every
# packet by a fixed one-way D. Three hosts on it: the root namespace
# (10.81.0.1) and two namespaces (10.81.0.2, 10.81.0.3). Asserts that
#   - with D = 20 ms, a TCP connect and a one-byte echo each take one round
#     trip: >= 40 ms and < 40 ms + SLACK_MS (default 30; a loaded 2-core VM);
#   - dml-train in the root namespace converges (cocoa) on two dml-node
#     processes in the namespaces, every packet through the switch;
#   - with D = 0 both round trips are fast (< 10 ms);
#   - the switch ends on SIGTERM with status 0 and takes its devices with it.
# Needs root, /dev/net/tun and ip netns; exits 77 (CTest: skipped) otherwise.
#   tests/cli/delay_switch.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
switch="$build/bench/delay_switch" probe="$build/bench/tcp_probe"
train="$build/samples/dml-train" node="$build/samples/dml-node"
slack=${SLACK_MS:-30}
tag="dsw$$"
skip() { echo "delay_switch test: SKIPPED: $*"; exit 77; }
fail() { echo "delay_switch test: FAIL: $*"; status=1; }

[ "$(id -u)" = 0 ] || skip "needs root"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
[ -x "$switch" ] && [ -x "$probe" ] || skip "$switch or $probe not built (DML_ENABLE_BENCH=OFF?)"
ip netns add "${tag}x" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "${tag}x"

work=$(mktemp -d /tmp/dml-dsw-XXXXXX)
pids=() sw="" server=""
status=0
stop_switch() {  # SIGTERM; the switch must exit 0
  [ -n "$sw" ] || return 0
  kill "$sw" 2>/dev/null
  wait "$sw"
  local rc=$?
  sw=""
  sed 's/^/  /' "$work/switch.log"
  [ $rc = 0 ] || fail "the switch exited with $rc on SIGTERM"
}
cleanup() {
  for p in "${pids[@]}" $server; do kill "$p" 2>/dev/null; done
  stop_switch
  wait 2>/dev/null
  for i in 1 2; do ip netns del "${tag}$i" 2>/dev/null; done
  ip link del "${tag}t0" 2>/dev/null
  rm -rf "$work"
}
trap 'cleanup; exit $status' EXIT
for i in 1 2; do ip netns add "${tag}$i" && ip -n "${tag}$i" link set lo up || exit 1; done

start_switch() {  # D: a switch with that delay, its devices moved and addressed
  rm -f "$work/ready"
  "$switch" --delay "$1" --ready-file "$work/ready" "${tag}t0=10.81.0.1" "${tag}t1=10.81.0.2" \
    "${tag}t2=10.81.0.3" 2>"$work/switch.log" &
  sw=$!
  for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.05; done
  [ -s "$work/ready" ] || { cat "$work/switch.log"; fail "the switch did not start"; exit; }
  ip addr add 10.81.0.1/24 dev "${tag}t0" && ip link set "${tag}t0" up || exit 1
  for i in 1 2; do
    ip link set "${tag}t$i" netns "${tag}$i" &&
      ip -n "${tag}$i" addr add "10.81.0.$((i + 1))/24" dev "${tag}t$i" &&
      ip -n "${tag}$i" link set "${tag}t$i" up || exit 1
  done
}

# KEY=VALUE from the probe's output line, as a number of milliseconds.
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
in_range() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN {exit !(v >= lo && v < hi)}'; }

round_trips() {  # LO HI: connect and echo from namespace 1 to namespace 2 within [LO, HI) ms
  ip netns exec "${tag}2" "$probe" serve 10.81.0.3 5001 --port-file "$work/probe.port" &
  server=$!
  for _ in $(seq 100); do [ -s "$work/probe.port" ] && break; sleep 0.02; done
  local out
  out=$(ip netns exec "${tag}1" "$probe" rtt 10.81.0.3 5001 9) || fail "tcp_probe rtt failed"
  kill "$server"; wait "$server" 2>/dev/null; server=""; rm -f "$work/probe.port"
  echo "delay_switch test: D=$D: $out"
  local c m
  c=$(field connect_ms "$out") m=$(field rtt_median_ms "$out")
  in_range "$c" "$1" "$2" || fail "D=$D: connect took $c ms, expected [$1, $2)"
  in_range "$m" "$1" "$2" || fail "D=$D: echo round trip (median of 9) $m ms, expected [$1, $2)"
  in_range "$(field rtt_min_ms "$out")" "$1" 1e9 || fail "D=$D: an echo was faster than $1 ms"
}

D=20ms
start_switch $D
round_trips 40 $((40 + slack))

# A 2-node cocoa job: the coordinator here, the nodes behind the switch.
"$build/samples/dml-gen" --rows 3000 --cols 200 --nnz-per-row 10 --task classification \
  --out "$work/data.svm" >/dev/null || exit 1
nodes=""
for i in 1 2; do
  ip netns exec "${tag}$i" "$node" --host="10.81.0.$((i + 1))" --port=4242 --threads=1 --insecure-open \
    --port-file="$work/port$i" 2>"$work/node$i.log" &
  pids+=($!)
  nodes+="${nodes:+,}10.81.0.$((i + 1)):4242"
done
for i in 1 2; do
  for _ in $(seq 200); do [ -s "$work/port$i" ] && break; sleep 0.05; done
  [ -s "$work/port$i" ] || { cat "$work/node$i.log"; fail "node $i did not start"; exit; }
done
out=$("$train" "$work/data.svm" --model logistic --lambda 1e-3 --mode cocoa --workers 2 \
      --shards 2 --epochs 60 --time-budget 60 --nodes "$nodes" --quiet 2>&1)
echo "delay_switch test: D=$D, cocoa on $nodes: $(grep '^done' <<<"$out")"
grep -q "^done: converged" <<<"$out" || { echo "$out"; fail "the job through the switch did not converge"; }
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
pids=()
stop_switch
grep -Eq "^delay_switch: [1-9][0-9]* packets" "$work/switch.log" || fail "no packets went through"

# The devices went with the switch, in every namespace.
if ip -br link | grep -q "^${tag}t" || ip -n "${tag}1" -br link | grep -q "^${tag}t"; then
  fail "TUN devices left behind"
fi

D=0
start_switch $D
round_trips 0 10
stop_switch
exit $status
