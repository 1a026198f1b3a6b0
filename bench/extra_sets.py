#!/usr/bin/python3
"""Variants of shared/ data in shapes the built-in cases do not have, for
BENCH_EXTRA (bench/solver_bench.py, bench/whole_process.py):
  news20-ovr1  news20 class 1 against the other 19 (5% positives)
  news20-unit  news20 classes 1-10 against 11-20, rows scaled to unit L2 norm
               (tf-idf-like, as news20.binary and rcv1 come)
  mushrooms    labels 1 -> +1, 2 -> -1
  cocoa        the CoCoA reference implementation's training sample
Writes them under BUILD/bench-data/extra (once) and prints the BENCH_EXTRA
value. Usage: bench/extra_sets.py [build-dir]
"""
import bz2, lzma, math, os, shutil, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
OUT = os.path.join(BUILD, "bench-data", "extra")
SHARED = os.path.join(ROOT, "..", "shared", "data")


def main():
    os.makedirs(OUT, exist_ok=True)
    paths = {n: os.path.join(OUT, n + ".svm")
             for n in ("news20-ovr1", "news20-unit", "mushrooms", "cocoa")}
    if not (os.path.exists(paths["news20-ovr1"]) and os.path.exists(paths["news20-unit"])):
        with bz2.open(os.path.join(SHARED, "news20.bz2"), "rt") as f, \
                open(paths["news20-ovr1"], "w") as ovr, open(paths["news20-unit"], "w") as unit:
            for line in f:
                label, _, rest = line.strip().partition(" ")
                ovr.write(("+1" if float(label) == 1 else "-1") + " " + rest + "\n")
                pairs = [t.split(":") for t in rest.split()]
                norm = math.sqrt(sum(float(v) ** 2 for _, v in pairs)) or 1.0
                unit.write(("+1" if float(label) > 10.5 else "-1") + " " +
                           " ".join(f"{i}:{float(v) / norm:.6g}" for i, v in pairs) + "\n")
    if not os.path.exists(paths["mushrooms"]):
        with lzma.open(os.path.join(SHARED, "mushrooms.xz"), "rt") as f, \
                open(paths["mushrooms"], "w") as out:
            for line in f:
                label, _, rest = line.strip().partition(" ")
                out.write(("+1" if float(label) == 1 else "-1") + " " + rest + "\n")
    if not os.path.exists(paths["cocoa"]):
        shutil.copyfile(os.path.join(SHARED, "cocoa_small_train.dat"), paths["cocoa"])
    print(" ".join(f"{n}={p}" for n, p in paths.items()))


if __name__ == "__main__":
    main()
