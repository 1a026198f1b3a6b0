#!/usr/bin/env python3
"""Two dml-train builds, whole processes, alternated run by run: medians (ms)
and new/old on the cases where start-up, loading and memory matter most.

usage: ab_dml_train.py REPS "OLD COMMAND PREFIX" "NEW COMMAND PREFIX" [BUILD]
e.g.   ab_dml_train.py 9 "env DML_TRAIN_HUGE_PAGES=0 /tmp/old/dml-train" build/samples/dml-train
The data are bench/solver_bench.py's (BUILD/bench-data, made by it)."""
import os
import statistics
import subprocess
import sys
import time

CASES = [("a9a", 0, "3e-3", 1), ("a9a", 0, "3e-3", 2), ("a9a", 3, "1e-4", 2), ("a9a", 6, "1e-1", 1),
         ("w8a", 6, "1e-1", 1), ("w8a", 3, "1e-4", 1), ("w8a", 2, "1e-3", 2),
         ("news20.binary", 6, "1e-1", 1), ("news20.binary", 0, "3e-2", 2),
         ("tab-569x30", 3, "1e-1", 1), ("tab-4601x57", 0, "1e-1", 2)]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    reps, old, new = int(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
    data = os.path.join(sys.argv[4] if len(sys.argv) > 4 else "build", "bench-data")
    print(f"{'case':<32}{'old_ms':>8}{'new_ms':>8}{'new/old':>8}")
    for name, s, tol, threads in CASES:
        args = ["-q", "-s", str(s), "-c", "1", "--tol", tol, "--threads", str(threads),
                os.path.join(data, name + ".svm")]
        times = ([], [])
        for r in range(reps):
            for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                subprocess.run((old if k == 0 else new) + args, capture_output=True, check=True)
                times[k].append(time.perf_counter() - t0)
        a, b = (statistics.median(t) * 1e3 for t in times)
        print(f"{f'{name} -s {s} --tol {tol} {threads}t':<32}{a:>8.1f}{b:>8.1f}{b / a:>8.2f}",
              flush=True)


if __name__ == "__main__":
    main()
