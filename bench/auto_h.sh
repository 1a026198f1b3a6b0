#!/usr/bin/env bash
# Automatic H against the H sweep, in the same run: cocoa (K=4, S=2) on
# 4 dml-node processes, time to relative gap 1e-4 for fixed H in HS and for
# --local-epochs auto, alternating the order each repetition; median of REPS.
#   bench/auto_h.sh BUILD DATA.svm [LINK=0] [REPS=3] [dml-train args...]
# LINK other than 0 is a tc qdisc for every link, e.g. "netem delay 2ms" or
# "tbf rate 2gbit burst 256kb latency 20ms": the 4 nodes then run in network
# namespaces ("machines") on a bridge whose links all get it (needs root and
# the qdisc in the kernel), the job in the root namespace: a slow network.
# LINK "delay D [rate R]" (e.g. "delay 2ms", "delay 1ms rate 1gbit") instead
# joins the namespaces and the root namespace through bench's delay_switch, a
# TUN switch that holds every packet D one way (netem's delay for kernels
# without sch_netem); it needs root, /dev/net/tun and BUILD/bench/delay_switch.
set -euo pipefail
build=$1 data=$2 link=${3:-0} reps=${4:-3}
shift 4 2>/dev/null || shift $#
extra=("$@")
hs=(${HS:-0.25 0.5 1 2 4 8})
# METRICS=DIR keeps every run's --metrics-out file there as H<h>-rep<r>.jsonl (auto's H per round).
[ -n "${METRICS:-}" ] && mkdir -p "$METRICS"
train="$build/samples/dml-train" node="$build/samples/dml-node"
tag="dmlh$$" br="dmlh$$br"
work=$(mktemp -d /tmp/dml-autoh-XXXXXX)
pids=()
descendants() { local c; for c in $(ps -o pid= --ppid "$1"); do descendants "$c"; echo "$c"; done; }
cleanup() {
  set +e  # every step runs: deleting a namespace already took its veth with it
  # A dml-train of a run cut short (Ctrl-C, kill) sits in a command substitution's subshell.
  for p in $(descendants $$) "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  # The switch's TUN devices are not persistent: they went with its process.
  [ -s "$work/switch.log" ] && sed 's/^/  /' "$work/switch.log"
  for i in 1 2 3 4; do ip netns del "${tag}$i" 2>/dev/null; ip link del "${tag}v$i" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  ip link del "${tag}t0" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# start_node I ADDR: a dml-node in namespace I on ADDR:4242, joining the job's --nodes list.
nodes=""
start_node() {
  ip netns exec "${tag}$1" "$node" --host="$2" --port=4242 --threads=1 --insecure-open \
    --port-file="$work/port$1" 2>"$work/node$1.log" &
  pids+=($!)
  nodes+="${nodes:+,}$2:4242"
}
wait_nodes() {
  for i in 1 2 3 4; do
    for _ in $(seq 200); do [ -s "$work/port$i" ] && break; sleep 0.05; done
  done
  where=(--nodes "$nodes")
}
if [[ "$link" == delay\ * ]]; then
  # Userspace delay: host 0 (10.79.0.1) is the root namespace, hosts 1-4 the nodes' namespaces;
  # every packet between them crosses the switch.
  read -r _ d rest <<<"$link"
  sw_args=(--delay "$d")
  [[ "$rest" == rate\ * ]] && sw_args+=(--rate "${rest#rate }")
  hosts=("${tag}t0=10.79.0.1")
  for i in 1 2 3 4; do hosts+=("${tag}t$i=10.79.0.$((i + 1))"); done
  # Niced: the emulated wire should not wait for CPU behind the job it carries.
  nice -n -10 "$build/bench/delay_switch" "${sw_args[@]}" --ready-file "$work/switch.ready" "${hosts[@]}" \
    2>"$work/switch.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$work/switch.ready" ] && break; sleep 0.05; done
  [ -s "$work/switch.ready" ] || { cat "$work/switch.log"; echo "delay_switch did not start"; exit 1; }
  ip addr add 10.79.0.1/24 dev "${tag}t0" && ip link set "${tag}t0" up
  for i in 1 2 3 4; do
    ns="${tag}$i"
    ip netns add "$ns"
    ip link set "${tag}t$i" netns "$ns"
    ip -n "$ns" addr add "10.79.0.$((i + 1))/24" dev "${tag}t$i"
    ip -n "$ns" link set "${tag}t$i" up
    ip -n "$ns" link set lo up
    start_node "$i" "10.79.0.$((i + 1))"
  done
  wait_nodes
elif [ "$link" != 0 ]; then
  ip link add "$br" type bridge && ip addr add 10.78.0.1/24 dev "$br" && ip link set "$br" up
  for i in 1 2 3 4; do
    ns="${tag}$i"
    ip netns add "$ns"
    ip link add "${tag}v$i" type veth peer name eth0 netns "$ns"
    ip link set "${tag}v$i" master "$br" up
    ip -n "$ns" addr add "10.78.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Both directions of every link.
    ip netns exec "$ns" tc qdisc add dev eth0 root $link || exit 1
    tc qdisc add dev "${tag}v$i" root $link || exit 1
    start_node "$i" "10.78.0.$((i + 1))"
  done
  wait_nodes
else
  where=(--local-nodes 4)
fi
run() {  # H REP: seconds to the gap, or "budget"
  local out m=()
  [ -n "${METRICS:-}" ] && m=(--metrics-out "$METRICS/H$1-rep$2.jsonl")
  out=$("$train" "$data" --model logistic -c 1 -e 1e-4 --mode cocoa --workers 4 --shards 2 \
          --epochs 1000000 --time-budget 120 --quiet "${where[@]}" --local-epochs "$1" "${m[@]}" \
          "${extra[@]}" 2>&1)
  grep -q "^done: converged" <<<"$out" || { echo "budget ($(tail -1 <<<"$out" | cut -c1-150))"; return; }
  sed -n 's/^done: converged after [0-9]* epochs in \([0-9.]*\)s.*/\1/p' <<<"$out"
}
declare -A times
for ((r = 0; r < reps; r++)); do
  order=("${hs[@]}" auto)
  ((r % 2)) && order=(auto "${hs[@]}")
  for h in "${order[@]}"; do
    t=$(run "$h" "$r")
    if [[ "$t" == budget* ]]; then times[$h]+="1e9 "; else times[$h]+="$t "; fi
    echo "rep $r H=$h: $t s"
  done
done
# A run out of budget counts as 1e9 s: the median is "budget" where most runs were.
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; print (m >= 1e8) ? "budget" : m}'; }
faster() { [ "$1" != budget ] && { [ "$2" = budget ] || awk -v a="$1" -v b="$2" 'BEGIN {exit !(a < b)}'; }; }
best="" best_t=""
echo "links: ${link}; seconds to relative gap 1e-4 (median of $reps):"
for h in "${hs[@]}"; do
  m=$(median "${times[$h]}")
  echo "  H=$h: $m"
  if [ -z "$best_t" ] || faster "$m" "$best_t"; then best=$h best_t=$m; fi
done
a=$(median "${times[auto]}")
if [ "$a" = budget ] || [ "$best_t" = budget ]; then
  echo "  auto: $a  -> best fixed H=$best $best_t s, no ratio (a run out of its 120 s budget)"
else
  awk -v a="$a" -v b="$best_t" -v h="$best" 'BEGIN {
    printf "  auto: %s  -> best fixed H=%s %s s, ratio auto/best %.2f (goal <= 1.2)\n", a, h, b, a / b }'
fi
