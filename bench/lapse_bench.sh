#!/bin/bash
# Dynamic vs static parameter allocation (dml/actors/kv.hpp) on both
# workloads of bench/lapse_bench.cpp (mf: DSGD with parameter blocking; lr:
# hashed-feature logistic regression with data clustering and latency
# hiding), with N node processes:
#  - "emulated": each node in its own network namespace, joined by
#    bench/delay_switch (a userspace TUN switch: this kernel has no
#    sch_netem) with DELAY one-way per packet and RATE per link;
#  - "loopback": all nodes in this namespace on 127.0.0.1;
#  - one node: the same code with N = 1 (no network).
# Medians of REPS epoch-time medians, sides alternated. Prints a table,
# then, last, speedup_vs_static=<x> for mf at the largest N, emulated.
#
#   bench/lapse_bench.sh BUILD_DIR      (as root; makes and removes its namespaces)
#   env: NODES="4 8" DELAY=200us RATE=1gbit EPOCHS=3 REPS=3 WORKLOADS="mf lr"
#        EXTRA="--lookahead 32" (more lapse_bench flags for every run)
set -euo pipefail
build=${1:?usage: lapse_bench.sh BUILD_DIR}
bench="$build/bench/lapse_bench" switch="$build/bench/delay_switch"
nodes_list=(${NODES:-4 8}) delay=${DELAY:-200us} rate=${RATE:-1gbit}
epochs=${EPOCHS:-3} reps=${REPS:-3} workloads=(${WORKLOADS:-mf lr})
tag="dmll$$"
work=$(mktemp -d /tmp/dml-lapse-XXXXXX)
pids=()
max_n=0
for n in "${nodes_list[@]}"; do ((n > max_n)) && max_n=$n; done
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ((i = 0; i < max_n; i++)); do ip netns del "${tag}$i" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# The emulated network: max_n namespaces, 10.81.1.(i+1), through the switch.
hosts=()
for ((i = 0; i < max_n; i++)); do hosts+=("${tag}t$i=10.81.1.$((i + 1))"); done
nice -n -10 "$switch" --delay "$delay" --rate "$rate" --ready-file "$work/switch.ready" \
  "${hosts[@]}" 2>"$work/switch.log" &
pids+=($!)
for _ in $(seq 200); do [ -s "$work/switch.ready" ] && break; sleep 0.05; done
[ -s "$work/switch.ready" ] || { cat "$work/switch.log"; echo "delay_switch did not start"; exit 1; }
for ((i = 0; i < max_n; i++)); do
  ns="${tag}$i"
  ip netns add "$ns"
  ip link set "${tag}t$i" netns "$ns"
  ip -n "$ns" addr add "10.81.1.$((i + 1))/24" dev "${tag}t$i"
  ip -n "$ns" link set "${tag}t$i" up
  ip -n "$ns" link set lo up
done

port=27000
# run NET N WORKLOAD ALLOC: the "result" line of rank 0.
run() {
  local net=$1 n=$2 w=$3 a=$4 peers="" r out
  port=$((port + n + 1))
  for ((r = 0; r < n; r++)); do
    if [ "$net" = emulated ]; then peers+="${peers:+,}10.81.1.$((r + 1)):$((port + r))"
    else peers+="${peers:+,}127.0.0.1:$((port + r))"; fi
  done
  local rp=()
  for ((r = n - 1; r >= 0; r--)); do
    local cmd=("$bench" --rank "$r" --peers "$peers" --workload "$w" --alloc "$a" --epochs "$epochs"
               ${EXTRA:-})
    [ "$net" = emulated ] && cmd=(ip netns exec "${tag}$r" "${cmd[@]}")
    if ((r > 0)); then
      "${cmd[@]}" >/dev/null 2>"$work/err$r" &
      rp+=($!)
    else
      out=$("${cmd[@]}" 2>"$work/err0") || { cat "$work"/err*; exit 1; }
    fi
  done
  wait "${rp[@]}"
  grep '^result' <<<"$out"
}
field() { sed -n "s/.* $1 \([^ ]*\).*/\1/p" <<<"$2"; }
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "lapse_bench: epochs=$epochs reps=$reps; emulated network: delay_switch --delay $delay --rate $rate"
declare -A secs remote bytes msgs loss
last_speedup=""
for w in "${workloads[@]}"; do
  # One node (no network): the baseline for scaling.
  for ((rep = 0; rep < reps; rep++)); do
    res=$(run loopback 1 "$w" dynamic)
    secs[$w,one]+="$(field epoch_seconds_median "$res") "
  done
  for net in emulated loopback; do
    for n in "${nodes_list[@]}"; do
      for ((rep = 0; rep < reps; rep++)); do
        order=(static dynamic)
        ((rep % 2)) && order=(dynamic static)
        for a in "${order[@]}"; do
          res=$(run "$net" "$n" "$w" "$a")
          k="$w,$net,$n,$a"
          secs[$k]+="$(field epoch_seconds_median "$res") "
          remote[$k]=$(field remote_fraction "$res")
          bytes[$k]=$(field bytes_per_epoch "$res")
          msgs[$k]=$(field messages_per_epoch "$res")
          loss[$k]=$(field loss "$res")
        done
      done
    done
  done
done

printf "\n%-3s %-9s %-5s %-8s %12s %10s %14s %9s %10s %9s\n" workload network nodes alloc epoch_s remote_frac bytes_per_epoch msgs loss vs_static
for w in "${workloads[@]}"; do
  printf "%-3s %-9s %-5s %-8s %12s\n" "$w" "-" 1 one "$(median "${secs[$w,one]}")"
  for net in emulated loopback; do
    for n in "${nodes_list[@]}"; do
      s=$(median "${secs[$w,$net,$n,static]}")
      for a in static dynamic; do
        k="$w,$net,$n,$a"
        m=$(median "${secs[$k]}")
        sp=$(awk -v s="$s" -v m="$m" 'BEGIN {printf "%.2f", s / m}')
        printf "%-3s %-9s %-5s %-8s %12s %10s %14s %9s %10s %9s\n" "$w" "$net" "$n" "$a" "$m" \
          "${remote[$k]}" "${bytes[$k]}" "${msgs[$k]}" "${loss[$k]}" "$sp"
        if [ "$w" = mf ] && [ "$net" = emulated ] && [ "$n" = "$max_n" ] && [ "$a" = dynamic ]; then
          last_speedup=$sp
        fi
      done
    done
  done
done
echo "speedup_vs_static=${last_speedup:-none}"
