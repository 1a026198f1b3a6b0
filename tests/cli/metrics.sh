#!/usr/bin/env bash
# dml-train --metrics-out: valid JSON lines, a job line first and a result
# line last that agrees with the printed "done:" line, progress lines whose
# rounds increase, a checkpoint_written event per checkpoint; then
# scripts/dml-plot draws the file (skipped without python3-matplotlib).
#   tests/cli/metrics.sh BUILD_DIR
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$build/samples/dml-train" --generate 3000x100 --model logistic --mode cocoa --workers 2 \
        --checkpoint "$tmp/j.ckpt" --checkpoint-every 4 --quiet --metrics-out "$tmp/m.jsonl")
done_line=$(grep '^done:' <<<"$out")
/usr/bin/python3 - "$tmp/m.jsonl" "$done_line" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["type"] == "job" and lines[0]["mode"] == "cocoa" and lines[0]["workers"] == 2, lines[0]
assert lines[-1]["type"] == "result" and lines[-1]["reason"] == "converged", lines[-1]
prog = [l for l in lines if l["type"] == "progress"]
rounds = [p["round"] for p in prog]
assert rounds == sorted(rounds) and len(rounds) == lines[-1]["rounds"] + 1, rounds
ev = [l for l in lines if l["type"] == "event"]
ckpt = [e for e in ev if e["kind"] == "checkpoint_written"]
# A checkpoint every 4 rounds, taken before the round is sent, recorded with its certificate.
assert [e["round"] for e in ckpt] == list(range(0, rounds[-1] + 1, 4)), [e["round"] for e in ckpt]
primal = float(re.search(r"primal ([0-9.e+-]+)", sys.argv[2]).group(1))
assert abs(lines[-1]["primal"] - primal) <= 1e-9 * abs(primal), (lines[-1]["primal"], primal)
assert prog[-1]["gap"] == lines[-1]["gap"]
print(f"metrics: {len(prog)} progress lines, {len(ckpt)} checkpoint events, result ok")
PY
# An SGD mode certifies its iterate too: dual and gap are numbers.
"$build/samples/dml-train" --generate 2000x50 --mode sync --workers 2 --epochs 3 --quiet \
  --metrics-out "$tmp/s.jsonl" >/dev/null
grep -Eq '"dual":-?[0-9][^,]*,"gap":[0-9]' "$tmp/s.jsonl" || { echo "FAIL: SGD dual or gap is not a number"; exit 1; }
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$src/scripts/dml-plot" -o "$tmp/p.png" "$tmp/m.jsonl" "$tmp/s.jsonl"
  [ "$(head -c 8 "$tmp/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "FAIL: not a PNG"; exit 1; }
else
  echo "python3-matplotlib not installed: dml-plot not tried"
fi
echo "metrics: ok"
