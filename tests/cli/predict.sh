#!/usr/bin/env bash
# dml-predict against dml-train and LIBLINEAR: a model trained on a file with
# labels 2/4 predicts those labels; our text model and its LIBLINEAR-format
# twin give the same predictions; liblinear-predict (Debian liblinear-tools;
# skipped if absent) gives the same predictions and accuracy on it, and
# dml-predict reads a model that liblinear-train wrote.
#   tests/cli/predict.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=$build/samples/dml-train predict=$build/samples/dml-predict
"$build/samples/dml-gen" --rows 3000 --cols 40 --nnz-per-row 8 --noise 0.5 --seed 3 --task classification \
  --out "$tmp/pm.svm" >/dev/null
# Labels 2 and 4 instead of -1 and +1: the model must carry them.
sed -e 's/^-1 /2 /' -e 's/^+\?1 /4 /' "$tmp/pm.svm" >"$tmp/d.svm"
head -2000 "$tmp/d.svm" >"$tmp/train.svm"
tail -1000 "$tmp/d.svm" >"$tmp/test.svm"
"$train" --model logistic -c 1 "$tmp/train.svm" -o "$tmp/m.dml" --liblinear-model "$tmp/m.ll" --quiet >/dev/null
grep -qx 'labels 2 4' "$tmp/m.dml" || { echo "FAIL: no labels line in the model"; exit 1; }
# Through --cache, the second run (from the cache) writes the same model.
for run in 1 2; do
  "$train" --model logistic -c 1 "$tmp/train.svm" --cache "$tmp/train.cache" -o "$tmp/c$run.dml" \
    --quiet >/dev/null
done
cmp "$tmp/c1.dml" "$tmp/m.dml" && cmp "$tmp/c2.dml" "$tmp/m.dml" ||
  { echo "FAIL: a model trained through --cache differs: $(grep labels "$tmp/c2.dml")"; exit 1; }
"$predict" "$tmp/test.svm" "$tmp/m.dml" "$tmp/ours.out" | tee "$tmp/ours.txt"
"$predict" "$tmp/test.svm" "$tmp/m.ll" "$tmp/ours_ll.out" >/dev/null
sort -u "$tmp/ours.out" | tr '\n' ' ' | grep -qx '2 4 ' || { echo "FAIL: predicted labels are not 2 and 4"; exit 1; }
cmp "$tmp/ours.out" "$tmp/ours_ll.out" || { echo "FAIL: the two model files predict differently"; exit 1; }
"$predict" -b 1 "$tmp/test.svm" "$tmp/m.dml" "$tmp/prob.out" >/dev/null
[ "$(head -1 "$tmp/prob.out")" = "labels 4 2" ] || { echo "FAIL: -b 1 header"; exit 1; }
# Bad input: a model file of neither kind, and test labels a model
# without a labels line cannot map; one line each, exit 2.
head -c 64 /dev/urandom >"$tmp/junk.model"
err=$("$predict" "$tmp/test.svm" "$tmp/junk.model" "$tmp/junk.out" 2>&1) && { echo "FAIL: junk model accepted"; exit 1; }
grep -q "junk.model: neither a dml text model" <<<"$err" || { echo "FAIL: junk model error: $err"; exit 1; }
"$train" --generate 200x10 --model logistic -o "$tmp/gen.dml" --quiet >/dev/null  # no labels line
printf -- '-1 1:1\n0 2:1\n1 3:1\n' >"$tmp/three.svm"
err=$("$predict" "$tmp/three.svm" "$tmp/gen.dml" "$tmp/three.out" 2>&1) && { echo "FAIL: -1/0/1 accepted"; exit 1; }
grep -qx "dml-predict: test labels include both -1 and 0: a binary model needs two label values" <<<"$err" ||
  { echo "FAIL: labels error: $err"; exit 1; }
# Labels that float32 cannot tell apart or print (16777216/16777217, and
# 0.123456789/0.5): the model applies to its own training file, and the
# predictions are the labels' own text.
for pair in "16777216 16777217" "0.123456789 0.5"; do
  set -- $pair
  printf '%s 1:1\n%s 1:-1\n%s 2:1\n%s 2:-1\n' "$1" "$2" "$1" "$2" >"$tmp/lab.svm"
  "$train" --model logistic -c 10 "$tmp/lab.svm" -o "$tmp/lab.dml" --quiet >/dev/null
  out=$("$predict" "$tmp/lab.svm" "$tmp/lab.dml" "$tmp/lab.out" 2>&1) ||
    { echo "FAIL: labels $pair: $out"; exit 1; }
  [ "$(tr '\n' ' ' <"$tmp/lab.out")" = "$1 $2 $1 $2 " ] ||
    { echo "FAIL: labels $pair predicted as $(tr '\n' ' ' <"$tmp/lab.out")"; exit 1; }
  grep -q '^accuracy 100.0000% (4/4)' <<<"$out" || { echo "FAIL: labels $pair: $out"; exit 1; }
  cp "$tmp/lab.dml" "$tmp/lab_$1.dml"
done
# --binarize: the threshold travels with the model (text and Cap'n Proto),
# so the multi-class file it was trained on is read the same way.
printf '1 1:1\n2 1:-1 3:2\n3 2:1\n5 3:1 2:0.5\n1 1:0.8\n5 2:0.7 3:1\n' >"$tmp/multi.svm"
for format in text capnp; do
  "$train" --model logistic --binarize 2.5 "$tmp/multi.svm" -o "$tmp/bin.$format" \
    --model-format "$format" --quiet >/dev/null
  out=$("$predict" "$tmp/multi.svm" "$tmp/bin.$format" "$tmp/bin.out" 2>&1) ||
    { echo "FAIL: --binarize model ($format): $out"; exit 1; }
  [ "$(tr '\n' ' ' <"$tmp/bin.out")" = "-1 -1 1 1 -1 1 " ] ||
    { echo "FAIL: --binarize predictions ($format): $(tr '\n' ' ' <"$tmp/bin.out")"; exit 1; }
done
# A label that is neither of the model's: an error at its line.
printf '16777216 1:1\n\n16777218 2:1\n' >"$tmp/lab3.svm"
err=$("$predict" "$tmp/lab3.svm" "$tmp/lab_16777216.dml" "$tmp/lab3.out" 2>&1) &&
  { echo "FAIL: label 16777218 accepted"; exit 1; }
grep -qx "dml-predict: $tmp/lab3.svm:3:1: label 16777218 is neither of the model's classes 16777216 (-1) and 16777217 (+1)" <<<"$err" ||
  { echo "FAIL: label error: $err"; exit 1; }
# dml-train's --test and train metrics agree with dml-predict's: a test file
# of the one class 2 (it used to map to +1, the model's 4) and rows with no
# feature (score 0: the -1 class in both, as LIBLINEAR predicts).
grep '^2 ' "$tmp/test.svm" >"$tmp/only2.svm"
{ cat "$tmp/train.svm"; for i in $(seq 40); do echo "4"; done; } >"$tmp/zeros.svm"
"$train" --model logistic -c 1 "$tmp/zeros.svm" -o "$tmp/z.dml" --test "$tmp/only2.svm" \
  --quiet >"$tmp/z.txt" 2>&1 || { echo "FAIL: --test run: $(cat "$tmp/z.txt")"; exit 1; }
frac() { awk -v a="$1" 'BEGIN {split(a, p, "/"); printf "%.6f", p[1] / p[2]}'; }
right() { sed -n 's/^accuracy [0-9.]*% (\([0-9/]*\)).*/\1/p'; }
got=$(sed -n 's/^test: accuracy \([0-9.]*\).*/\1/p' "$tmp/z.txt")
want=$("$predict" "$tmp/only2.svm" "$tmp/z.dml" "$tmp/only2.out" | right)
[ "$got" = "$(frac "$want")" ] || { echo "FAIL: --test accuracy $got, dml-predict $want"; exit 1; }
got=$(sed -n 's/^train: accuracy \([0-9.]*\).*/\1/p' "$tmp/z.txt")
want=$("$predict" "$tmp/zeros.svm" "$tmp/z.dml" "$tmp/zeros.out" | right)
[ "$got" = "$(frac "$want")" ] || { echo "FAIL: train accuracy $got, dml-predict $want"; exit 1; }
# The Cap'n Proto model file: the same predictions; the Python example
# (through the capnp tool) gets dml-predict's accuracy.
"$train" --model logistic -c 1 "$tmp/train.svm" -o "$tmp/m.capnp" --model-format capnp --quiet >/dev/null
"$predict" "$tmp/test.svm" "$tmp/m.capnp" "$tmp/ours_capnp.out" >/dev/null
cmp "$tmp/ours.out" "$tmp/ours_capnp.out" || { echo "FAIL: capnp model predicts differently"; exit 1; }
if command -v capnp >/dev/null; then
  py=$(/usr/bin/python3 "$(dirname "$0")/../../samples/read_model.py" "$tmp/m.capnp" "$tmp/test.svm")
  echo "$py"
  acc=$(sed -n 's/^accuracy [0-9.]*% (\([0-9/]*\)).*/\1/p' <<<"$py")
  grep -q "accuracy [0-9.]*% ($acc)" "$tmp/ours.txt" || { echo "FAIL: read_model.py accuracy $acc"; exit 1; }
  grep -q "labels \[2.0, 4.0\]\|labels \[2, 4\]" <<<"$py" || { echo "FAIL: labels in the capnp file"; exit 1; }
fi
if ! command -v liblinear-predict >/dev/null; then
  echo "liblinear-predict not installed: LIBLINEAR comparison skipped"
  exit 77
fi
liblinear-predict "$tmp/test.svm" "$tmp/m.ll" "$tmp/theirs.out" | tee "$tmp/theirs.txt"
cmp "$tmp/ours.out" "$tmp/theirs.out" || { echo "FAIL: liblinear-predict predicts differently"; exit 1; }
ours=$(sed -n 's/^accuracy [0-9.]*% (\([0-9/]*\)).*/\1/p' "$tmp/ours.txt")
theirs=$(sed -n 's/^Accuracy = [0-9.]*% (\([0-9/]*\)).*/\1/p' "$tmp/theirs.txt")
[ -n "$ours" ] && [ "$ours" = "$theirs" ] || { echo "FAIL: accuracy $ours vs $theirs"; exit 1; }
# A model liblinear-train wrote: the same predictions from both programs.
liblinear-train -s 0 -B 1 -q "$tmp/train.svm" "$tmp/lt.model"
"$predict" "$tmp/test.svm" "$tmp/lt.model" "$tmp/ours_lt.out" >/dev/null
liblinear-predict "$tmp/test.svm" "$tmp/lt.model" "$tmp/theirs_lt.out" >/dev/null
cmp "$tmp/ours_lt.out" "$tmp/theirs_lt.out" || { echo "FAIL: on liblinear-train's model"; exit 1; }
# -s 0 -B 1 -c 1: the same problem as liblinear-train's (bias feature
# regularized too, lambda = 1/(C n)), so the same weights up to tolerances.
"$train" -s 0 -B 1 -c 1 -e 1e-10 --epochs 5000 "$tmp/train.svm" --liblinear-model "$tmp/ours_b.ll" --quiet >/dev/null
liblinear-train -s 0 -B 1 -c 1 -e 1e-8 -q "$tmp/train.svm" "$tmp/theirs_b.ll"
grep -qx 'bias 1' "$tmp/ours_b.ll" || { echo "FAIL: no bias line"; exit 1; }
diff=$(paste <(sed '1,/^w$/d' "$tmp/ours_b.ll") <(sed '1,/^w$/d' "$tmp/theirs_b.ll") |
       awk '{d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (m > big) big = m;
             if (d > worst) worst = d} END {printf "%.3g", worst / big}')
awk -v d="$diff" 'BEGIN {exit !(d < 1e-4)}' || { echo "FAIL: -s 0 -B 1 weights differ from liblinear-train's by $diff (relative)"; exit 1; }
liblinear-predict "$tmp/test.svm" "$tmp/ours_b.ll" "$tmp/theirs_b.out" >/dev/null
"$predict" "$tmp/test.svm" "$tmp/ours_b.ll" "$tmp/ours_b.out" >/dev/null
cmp "$tmp/ours_b.out" "$tmp/theirs_b.out" || { echo "FAIL: with a bias"; exit 1; }
echo "predict: ok (accuracy $ours from both programs; -s 0 -B 1 weights within $diff of liblinear-train's)"
