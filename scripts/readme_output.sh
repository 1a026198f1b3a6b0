#!/usr/bin/env bash
# Regenerates the README's quoted quick-start output (between the
# quickstart-output markers) from a real run of the quick-start job, so the
# README shows what the command prints: its first lines, "...", the last two.
#   scripts/readme_output.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$("$build/samples/dml-train" --generate 20000x2000 --nnz-per-row 20 --model logistic \
        --mode cocoa --workers 4 --shards 2 --local-nodes 3 | cat)
block=$( { head -5 <<<"$out"; echo "..."; grep -E '^(done|train):' <<<"$out"; } )
/usr/bin/python3 - "$block" <<'PY'
import re, sys
readme = open("README.md").read()
start, end = "<!-- quickstart-output -->\n```\n", "```\n<!-- /quickstart-output -->"
i, j = readme.index(start) + len(start), readme.index(end)
open("README.md", "w").write(readme[:i] + sys.argv[1] + "\n" + readme[j:])
PY
echo "README.md: quick-start output regenerated"
