#!/usr/bin/env bash
# Files the tools write never destroy what they read, and a failed write is
# an error: dml-train refuses an -o, --metrics-out or --cache that is its
# data file (the data intact), and an -o in a missing directory before it
# trains; a full disk (/dev/full) fails the run and leaves the device node
# alone; dml-predict refuses to write predictions over its model or test
# data; runtime-only flags without --mode, a directory as --secret-file and
# a non-PEM TLS certificate are refused at start, and dml-node exits when
# it cannot write its port file. A classifier's data of one class is
# refused (its model could not name the other label). What must keep
# working does: devices as outputs (/dev/null twice), compressed data from
# a FIFO, a 4096-byte secret with its newline, --local tpa-scd with
# --gpu-fallback, hogwild on local nodes with --store kv (refused without);
# a cache over a device node is refused, the node kept.
#   tests/cli/output_paths.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=$build/samples/dml-train predict=$build/samples/dml-predict node=$build/samples/dml-node
"$build/samples/dml-gen" --rows 300 --cols 30 --nnz-per-row 6 --seed 3 --task classification \
  --out "$tmp/d.svm" >/dev/null || { echo "FAIL: dml-gen"; exit 1; }
sum=$(md5sum <"$tmp/d.svm")
fails=0
# expect RC PATTERN CMD...: the command exits RC and says PATTERN on stderr.
expect() {
  local rc=$1 pattern=$2; shift 2
  local err got
  err=$("$@" 2>&1 >/dev/null); got=$?
  if [[ $got != "$rc" ]] || ! grep -qF -- "$pattern" <<<"$err"; then
    echo "FAIL: $* -> rc $got (want $rc): $err"; fails=$((fails + 1))
  else
    echo "ok: ${pattern}"
  fi
}
cd "$tmp"
expect 2 "--metrics-out: d.svm is also the data file; writing it would destroy it" \
  "$train" -q d.svm --metrics-out d.svm
expect 2 "-o: ./d.svm is also the data file" "$train" -q d.svm -o ./d.svm
expect 2 "--cache: $tmp/d.svm is also the data file" "$train" -q --cache "$tmp/d.svm" d.svm
expect 2 "-o and --metrics-out name the same file, m.txt" "$train" -q d.svm -o m.txt --metrics-out m.txt
expect 2 "-o: $tmp/no/m.txt: its directory $tmp/no does not exist" "$train" -q d.svm -o "$tmp/no/m.txt"
expect 2 "-o: d.svm/m.txt: d.svm is not a directory" "$train" -q d.svm -o d.svm/m.txt
expect 2 "--binarize: model ridge is a regression; the threshold would be ignored" \
  "$train" -q --model ridge --binarize 0.5 d.svm
expect 2 "--test: $tmp is a directory" "$train" -q d.svm --test "$tmp"
[[ $(md5sum <d.svm) == "$sum" ]] || { echo "FAIL: the data file changed"; fails=$((fails + 1)); }
[[ ! -e m.txt ]] || { echo "FAIL: a refused run wrote m.txt"; fails=$((fails + 1)); }
if [[ -c /dev/full ]]; then
  expect 2 "/dev/full: write failed: No space left on device" "$train" -q d.svm -o /dev/full
  expect 2 "/dev/full: write failed: No space left on device" \
    "$train" -q d.svm -o /dev/full --model-format capnp
  expect 1 "--metrics-out /dev/full: write failed" "$train" -q d.svm --metrics-out /dev/full
  [[ -c /dev/full ]] || { echo "FAIL: /dev/full is no longer a device"; fails=$((fails + 1)); }
fi
expect 2 "--checkpoint is a flag of the distributed runtime" "$train" -q --checkpoint c.ck d.svm
expect 2 "--workers is a flag of the distributed runtime" "$train" -q --workers 3 d.svm
expect 2 "--store is a flag of the distributed runtime" "$train" -q --store memory d.svm
expect 2 "--resume: needs --checkpoint PATH" "$train" -q --mode sync --resume d.svm
expect 2 "--nodes: entry 1 is empty" "$train" -q --mode cocoa --nodes ,127.0.0.1:5 d.svm
expect 2 "--nodes: entry 2 (\"foo:\"): expected host:port with a port in [1, 65535]" \
  "$train" -q --mode cocoa --nodes 127.0.0.1:5,foo: d.svm
expect 2 "--nodes: entry 1 (\" 127.0.0.1:1\") holds a space" "$train" -q --mode cocoa --nodes " 127.0.0.1:1" d.svm
expect 2 "--nodes: entry 1 (\"[::1]:1\"): IPv6 addresses are not supported" \
  "$train" -q --mode cocoa --nodes "[::1]:1" d.svm
expect 2 "--tls-cert: $tmp/none.pem: No such file or directory" \
  "$train" -q --mode cocoa --local-nodes 1 --tls-cert "$tmp/none.pem" --tls-key "$tmp/none.pem" d.svm
expect 2 "--checkpoint-every: no --checkpoint PATH" "$train" -q --mode cocoa --checkpoint-every 2 d.svm
expect 2 "--node-silence is a flag of jobs on node processes" "$train" -q --mode cocoa --node-silence 5 d.svm
expect 2 "--secret-file is a flag of jobs on node processes" "$train" -q --mode cocoa --secret-file d.svm d.svm
expect 2 "--batch is a flag of --solver sgd (and of the SGD modes), not of --solver scd" \
  "$train" -q --solver scd --batch 8 d.svm
expect 2 "--step is a flag of --solver sgd (and of the SGD modes), not of --solver auto" "$train" -q --step 0.5 d.svm
expect 2 "--threads: --solver scd is sequential" "$train" -q --solver scd --threads 2 d.svm
expect 2 "--eval-pacing: must be in [0, 1), got 1" "$train" -q --eval-pacing 1 d.svm
expect 2 "--eval-pacing: expected a number, got \"x\"" "$train" -q --eval-pacing x d.svm
expect 2 "--eval-pacing is a flag of one process's SCD and newGLMNET, not of --mode cocoa" \
  "$train" -q --mode cocoa --eval-pacing 0.5 d.svm
expect 2 "--store is a flag of hogwild, not of --mode sync" "$train" -q --mode sync --store memory d.svm
expect 2 "--shards is a flag of the modes with parameter shards (hogwild shares one model), not of --mode hogwild" \
  "$train" -q --mode hogwild --shards 2 d.svm
expect 2 "the secret file is a directory" \
  "$train" -q --mode cocoa --secret-file "$tmp" --local-nodes 1 d.svm
"$train" -q d.svm -o m.txt >/dev/null || { echo "FAIL: training"; fails=$((fails + 1)); }
msum=$(md5sum <m.txt)
expect 2 "m.txt is also the model; writing the predictions would destroy it" \
  "$predict" d.svm m.txt m.txt
expect 2 "d.svm is also the test data" "$predict" d.svm m.txt ./d.svm
[[ $(md5sum <m.txt) == "$msum" && $(md5sum <d.svm) == "$sum" ]] ||
  { echo "FAIL: dml-predict changed its inputs"; fails=$((fails + 1)); }
expect 2 "TLS certificate d.svm does not load (PEM expected)" \
  timeout 10 "$node" --tls-cert=d.svm --tls-key=d.svm
expect 1 "cannot write the port file $tmp/no/port" timeout 10 "$node" --port-file="$tmp/no/port"
printf '1 1:0.5 2:1\n1 1:0.2\n1 2:0.3\n' >one.svm
expect 2 "one.svm: all 3 examples are of one class (+1); a classifier needs examples of two classes" \
  "$train" -q one.svm -o one.txt
expect 2 "--epochs: at most 1e+09, got 2147483647" "$train" -q --epochs 2147483647 d.svm
# Legitimate: devices as outputs, compressed data from a pipe.
"$train" -q d.svm -o /dev/null --liblinear-model /dev/null >/dev/null ||
  { echo "FAIL: -o /dev/null --liblinear-model /dev/null refused"; fails=$((fails + 1)); }
gzip -c d.svm >dz.svm.gz && mkfifo pipe.svm.gz
(cat dz.svm.gz >pipe.svm.gz &)
timeout 20 "$train" -q pipe.svm.gz >/dev/null ||
  { echo "FAIL: gzip data from a FIFO refused"; fails=$((fails + 1)); }
"$train" -q --mode cocoa --local tpa-scd --gpu-fallback --generate 200x10 >/dev/null 2>&1 ||
  { echo "FAIL: --local tpa-scd --gpu-fallback refused"; fails=$((fails + 1)); }
if mknod nulldev c 1 3 2>/dev/null; then  # root only
  expect 2 "--cache: nulldev is not a regular file" "$train" -q d.svm --cache nulldev
  [[ -c nulldev ]] || { echo "FAIL: the device node was replaced"; fails=$((fails + 1)); }
fi
# Secrets: 4096 bytes and a newline start a node; 4097 bytes do not.
head -c 4096 /dev/zero | tr '\0' 'k' >s4096 && echo >>s4096
timeout 10 "$node" --secret-file=s4096 --port-file="$tmp/port" >/dev/null 2>&1 &
for _ in $(seq 50); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || { echo "FAIL: a 4096-byte secret with a newline refused"; fails=$((fails + 1)); }
kill %1 2>/dev/null; wait 2>/dev/null
head -c 4097 /dev/zero | tr '\0' 'k' >s4097
expect 2 "s4097: the secret has more than 4096 bytes; at most 4096" \
  timeout 10 "$node" --secret-file=s4097
# A model to standard output: the stream holds the model alone (the run's
# lines go to stderr), which dml-predict reads back.
"$train" -q --epochs 3 -o /dev/stdout d.svm >stdout_model.txt 2>stdout_err.txt
if [[ $(head -1 stdout_model.txt) == "dml-model 1" ]] && grep -q '^done: ' stdout_err.txt &&
   "$predict" d.svm stdout_model.txt stdout_pred.txt >/dev/null 2>&1; then
  echo "ok: -o /dev/stdout"
else
  echo "FAIL: -o /dev/stdout: $(head -2 stdout_model.txt)"; fails=$((fails + 1))
fi
# Metrics to standard output: JSON lines alone; dml-predict's predictions to
# standard output: the predictions alone (the metrics line goes to stderr);
# two outputs naming standard output are refused.
"$train" --epochs 3 --metrics-out /dev/stdout d.svm >stdout_metrics.txt 2>/dev/null
if /usr/bin/env python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' \
     stdout_metrics.txt 2>/dev/null && [[ -s stdout_metrics.txt ]]; then
  echo "ok: --metrics-out /dev/stdout"
else
  echo "FAIL: --metrics-out /dev/stdout: $(head -c 200 stdout_metrics.txt)"; fails=$((fails + 1))
fi
"$predict" d.svm stdout_model.txt /dev/stdout >stdout_pred2.txt 2>stdout_pred2_err.txt
if cmp -s stdout_pred.txt stdout_pred2.txt && grep -q '^accuracy ' stdout_pred2_err.txt; then
  echo "ok: dml-predict to /dev/stdout"
else
  echo "FAIL: dml-predict to /dev/stdout: $(head -2 stdout_pred2.txt)"; fails=$((fails + 1))
fi
expect 2 "dml-train: -o and --liblinear-model both name standard output; one stream cannot hold both" \
  bash -o pipefail -c "'$train' -q d.svm -o /dev/stdout --liblinear-model /dev/stdout | cat"
# dml-gen whose labels overflow: an error naming --noise, the old file kept.
echo keep >gen_keep.svm
expect 2 "dml-gen: the generated labels are not finite (--noise 1e+308 and the planted model" \
  "$build/samples/dml-gen" --rows 3 --cols 2 --noise 1e308 --task regression --out gen_keep.svm
[[ $(cat gen_keep.svm) == keep ]] || { echo "FAIL: dml-gen emptied its --out"; fails=$((fails + 1)); }
# Newton's --epochs counts its iterations: the done line says both counts.
out=$("$train" --solver newton --epochs 2 d.svm 2>&1)
if grep -qE '^done: max epochs after 2 iterations \([0-9]+ passes over the data\)' <<<"$out"; then
  echo "ok: newton's done line"
else
  echo "FAIL: newton's done line: $out"; fails=$((fails + 1))
fi
# hogwild across processes only on the key-value store, which then trains.
expect 2 "dml-train: --mode hogwild on nodes needs --store kv" \
  "$train" -q --mode hogwild --local-nodes 1 d.svm
out=$("$train" --mode hogwild --store kv --localize --workers 2 --local-nodes 2 --epochs 3 d.svm 2>&1)
if grep -q '^done: max epochs after 3 epochs' <<<"$out" &&
   grep -q 'on 2 node processes' <<<"$out" && grep -q 'key-value store: .* blocks relocated' <<<"$out"; then
  echo "ok: hogwild --store kv on 2 local nodes"
else
  echo "FAIL: hogwild --store kv on 2 local nodes: $out"; fails=$((fails + 1))
fi
echo "$fails failure(s)"
[[ $fails == 0 ]]
