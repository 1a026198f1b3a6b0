#!/usr/bin/env bash
# SIGINT and SIGTERM to dml-train. While it trains, the first signal cancels
# the run: the model trained so far is reported and written (-o), the exit
# status is 128 + the signal, and --local-nodes' nodes and their directory
# go with it, also when the signal goes to the whole process group (a
# terminal's Ctrl-C: the nodes must not die of it first). Before training
# (here: blocked reading a FIFO) the process ends at once, saying so. A
# signal its parent set to be ignored stays ignored. A standard output
# closed by its reader (| head) stops the run as a signal does (exit 141).
#   tests/cli/interrupt.sh BUILD_DIR
set -uo pipefail
set -m  # job control: background jobs keep SIGINT and get a process group each
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=$build/samples/dml-train predict=$build/samples/dml-predict
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# started PID: dml-train has installed its signal thread (2+ threads).
started() {
  for _ in $(seq 400); do
    [[ $(ls "/proc/$1/task" 2>/dev/null | wc -l) -ge 2 ]] && return 0
    sleep 0.05
  done
  return 1
}

# interrupt NAME TARGET SIGNAL ARGS...: dml-train ARGS in $tmp/NAME (TMPDIR
# there); once its first progress line is out, SIGNAL to its pid (TARGET
# pid) or its process group (TARGET group). Sets rc and dir.
interrupt() {
  local name=$1 target=$2 sig=$3; shift 3
  dir=$tmp/$name
  mkdir -p "$dir/tmp"
  (cd "$dir" && TMPDIR=$dir/tmp exec "$train" "$@" >out.txt 2>err.txt) &
  local pid=$!
  for _ in $(seq 1200); do
    grep -qE '^(epoch|round) ' "$dir/out.txt" 2>/dev/null && break
    sleep 0.05
  done
  if [[ $target == group ]]; then kill -"$sig" -- -"$pid"; else kill -"$sig" "$pid"; fi
  wait "$pid"; rc=$?
}

# check NAME WANT_RC SIGNAL_NAME: cancelled, reported, written, cleaned up.
check() {
  local name=$1 want=$2 signame=$3 before=$fails
  [[ $rc == "$want" ]] || fail "$name: exit $rc, want $want: $(tail -3 "$dir/err.txt")"
  grep -q '^done: cancelled after' "$dir/out.txt" || fail "$name: no 'done: cancelled': $(tail -2 "$dir/out.txt")"
  grep -qF "dml-train: $signame: stopping; the model trained so far is kept" "$dir/err.txt" ||
    fail "$name: stderr: $(cat "$dir/err.txt")"
  grep -q '^model written to m.txt' "$dir/out.txt" || fail "$name: model not written"
  # The model it wrote is a model: dml-predict takes it.
  "$predict" "$dir/d.svm" "$dir/m.txt" "$dir/p.txt" >/dev/null 2>&1 || fail "$name: dml-predict refused m.txt"
  [[ -z $(ls -A "$dir/tmp") ]] || fail "$name: left in TMPDIR: $(ls -A "$dir/tmp")"
  ! pgrep -f "$dir/tmp/" >/dev/null || fail "$name: a node of it still runs"
  [[ $fails == "$before" ]] && echo "ok: $name"
}

long=(--model logistic -c 1000 --tol 1e-15 --epochs 1000000 --time-budget 30 -o m.txt d.svm)
for name in one cocoa group ignored; do
  mkdir -p "$tmp/$name"
  "$build/samples/dml-gen" --rows 20000 --cols 2000 --nnz-per-row 40 --seed 5 --task classification \
    --out "$tmp/$name/d.svm" >/dev/null || { echo "FAIL: dml-gen"; exit 1; }
done
interrupt one pid INT "${long[@]}"
check one 130 SIGINT
interrupt cocoa pid TERM --mode cocoa --workers 2 --local-nodes 2 "${long[@]}"
check cocoa 143 SIGTERM
interrupt group group INT --mode cocoa --workers 2 --local-nodes 2 "${long[@]}"
check group 130 SIGINT

# SIGINT ignored by the parent (trap ''): it stays ignored; SIGTERM still stops.
dir=$tmp/ignored
(cd "$dir" && trap '' INT && exec "$train" "${long[@]}" >out.txt 2>err.txt) &
pid=$!
for _ in $(seq 1200); do grep -qE '^epoch ' "$dir/out.txt" 2>/dev/null && break; sleep 0.05; done
kill -INT "$pid"
sleep 0.5
kill -0 "$pid" 2>/dev/null || fail "ignored: SIGINT, ignored by its parent, stopped it"
kill -TERM "$pid"
wait "$pid"; rc=$?
mkdir -p "$dir/tmp"
check ignored 143 SIGTERM

# Its standard output closed by the reader (| head): stopped as by a
# signal, the model kept, exit 141 (SIGPIPE's), nothing left behind.
dir=$tmp/one
rm -f "$dir/m.txt"
(cd "$dir" && TMPDIR=$dir/tmp "$train" --mode cocoa --workers 2 --local-nodes 2 "${long[@]}" 2>err.txt |
  head -3 >/dev/null; echo "${PIPESTATUS[0]}" >rc.txt)
[[ $(cat "$dir/rc.txt") == 141 ]] || fail "closed stdout: exit $(cat "$dir/rc.txt"), want 141"
grep -qF "dml-train: closed standard output: stopping" "$dir/err.txt" || fail "closed stdout: $(cat "$dir/err.txt")"
[[ -s $dir/m.txt ]] || fail "closed stdout: model not written"
[[ -z $(ls -A "$dir/tmp") ]] || fail "closed stdout: left in TMPDIR: $(ls -A "$dir/tmp")"
! pgrep -f "$dir/tmp/" >/dev/null || fail "closed stdout: a node still runs"

# Before training: nothing to keep, the process ends at once.
mkfifo "$tmp/fifo"
"$train" "$tmp/fifo" >"$tmp/out.txt" 2>"$tmp/err.txt" &
pid=$!
started "$pid" || fail "before training: no signal thread within 20 s"
kill -TERM "$pid"
start=$SECONDS
wait "$pid"; rc=$?
[[ $rc == 143 ]] || fail "before training: exit $rc, want 143"
grep -qF "dml-train: SIGTERM: stopped before training" "$tmp/err.txt" || fail "before training: stderr: $(cat "$tmp/err.txt")"
(( SECONDS - start <= 2 )) || fail "before training: took $((SECONDS - start)) s"
[[ $fails == 0 ]] && echo "ok: before training" && echo PASS
exit $((fails > 0))
