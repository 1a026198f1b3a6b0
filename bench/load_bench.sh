#!/usr/bin/env bash
# Load benchmark: libdml's LIBSVM parser vs scikit-learn's load_svmlight_file
# and LIBLINEAR's reader, same files, same run. Prints medians and ratios.
# Usage: bench/load_bench.sh [build-dir] [generated-MB]   (default build, 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
gen_mb=${2:-1024}
need=()
/usr/bin/python3 -c "import sklearn" 2>/dev/null || need+=(python3-sklearn)
command -v liblinear-train >/dev/null || need+=(liblinear-tools)
command -v bc >/dev/null || need+=(bc)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" != 0 ] && sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
data="$build/bench-data"; mkdir -p "$data"
[ -f "$data/news20.svm" ] || bzip2 -dc ../shared/data/news20.bz2 > "$data/news20.svm"
gen="$data/generated_${gen_mb}MB.svm"
gen_flag=()
[ -f "$gen" ] || gen_flag=(--generate="$gen" --generate_mb="$gen_mb")
out=$("$build/bench/load_bench" "${gen_flag[@]}" --files="$data/news20.svm,$gen" --threads=1,2 --repeat=3)
echo "$out"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for f in "$data/news20.svm" "$gen"; do
  sk=$(for r in 1 2 3; do /usr/bin/python3 - "$f" <<'PY'
import sys, time
from sklearn.datasets import load_svmlight_file
t = time.perf_counter(); load_svmlight_file(sys.argv[1]); print(time.perf_counter() - t)
PY
  done | median)
  # LIBLINEAR: read_problem, then one dual CD pass (-e huge stops after the
  # first outer iteration; that pass is <2% of the time here, so this is an
  # upper bound on its read time by that margin).
  ll=$(for r in 1 2 3; do
    s=$(date +%s.%N); liblinear-train -q -s 3 -e 1e9 "$f" "$data/ll.model" >/dev/null; e=$(date +%s.%N)
    echo "$e - $s" | bc -l; done | median)
  mb=$(echo "$(stat -c %s "$f") / 1000000" | bc -l)
  ours1=$(echo "$out" | awk -v f="$f" '$1==f && $2==1 {print $4}')
  ours2=$(echo "$out" | awk -v f="$f" '$1==f && $2==2 {print $4}')
  printf '%s: %.0f MB | sklearn %.2fs (%.0f MB/s) | liblinear %.2fs (%.0f MB/s) | ours 1t %.3fs, 2t %.3fs\n' \
    "$(basename "$f")" "$mb" "$sk" "$(echo "$mb/$sk" | bc -l)" "$ll" "$(echo "$mb/$ll" | bc -l)" "$ours1" "$ours2"
  printf '  speedup vs sklearn: 1t %.1fx, 2t %.1fx | vs liblinear: 1t %.1fx, 2t %.1fx\n' \
    "$(echo "$sk/$ours1" | bc -l)" "$(echo "$sk/$ours2" | bc -l)" "$(echo "$ll/$ours1" | bc -l)" "$(echo "$ll/$ours2" | bc -l)"
done
