#!/usr/bin/env bash
# Files changed after they were written: dml-predict refuses a Cap'n Proto
# model with one bit flipped in a weight, and dml-train --resume refuses a
# checkpoint with one bit flipped in its state, each naming the file and
# the digest; the intact files work.
#   tests/cli/corrupt_files.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=$build/samples/dml-train predict=$build/samples/dml-predict
"$build/samples/dml-gen" --rows 2000 --cols 500 --nnz-per-row 20 --seed 5 --task classification \
  --out "$tmp/d.svm" >/dev/null
flip() {  # flip one bit of file $1 at byte $2
  printf "$(printf '\\%03o' $(( $(od -An -tu1 -j "$2" -N1 "$1") ^ 16 )))" |
    dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
"$train" --model logistic "$tmp/d.svm" -o "$tmp/m.capnp" --model-format capnp --quiet >/dev/null
"$predict" "$tmp/d.svm" "$tmp/m.capnp" "$tmp/p.out" >/dev/null
size=$(stat -c %s "$tmp/m.capnp")
flip "$tmp/m.capnp" $((size / 2))   # the 500 weights are most of the file
if err=$("$predict" "$tmp/d.svm" "$tmp/m.capnp" "$tmp/p2.out" 2>&1); then
  echo "FAIL: a model with a flipped bit was read"; exit 1
fi
grep -q "m.capnp: contents do not match the file's checksum (changed after it was written)" <<<"$err" ||
  { echo "FAIL: dml-predict said: $err"; exit 1; }
echo "model: $err"

# A checkpoint: cocoa writes one every 2 rounds; a resume from it runs, one
# from a copy with a flipped bit is refused before any training.
"$train" --model svm --mode cocoa --workers 2 --epochs 4 --checkpoint "$tmp/c.ckpt" \
  --checkpoint-every 2 "$tmp/d.svm" --quiet >/dev/null || true
[ -s "$tmp/c.ckpt" ] || { echo "FAIL: no checkpoint written"; exit 1; }
cp "$tmp/c.ckpt" "$tmp/bad.ckpt"
"$train" --model svm --mode cocoa --workers 2 --epochs 6 --checkpoint "$tmp/c.ckpt" --resume \
  "$tmp/d.svm" --quiet >/dev/null
size=$(stat -c %s "$tmp/bad.ckpt")
flip "$tmp/bad.ckpt" $((size / 2))
if err=$("$train" --model svm --mode cocoa --workers 2 --epochs 6 --checkpoint "$tmp/bad.ckpt" --resume \
  "$tmp/d.svm" --quiet 2>&1); then
  echo "FAIL: a checkpoint with a flipped bit was resumed"; exit 1
fi
grep -q "bad.ckpt: contents do not match the file's checksum (changed after it was written)" <<<"$err" ||
  { echo "FAIL: dml-train said: $err"; exit 1; }
echo "checkpoint: $err"
echo PASS
