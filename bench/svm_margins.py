#!/usr/bin/python3
"""Fraction of a hinge SVM's examples that are support vectors.

At the optimum of the hinge SVM's dual, alpha_i > 0 exactly where
y_i w.x_i <= 1 (up to the solver's tolerance). DuHL's device solver is the
only one that changes alpha, so every such example's row must reach the
device at least once: the data bytes of the support vectors are a lower
bound on the bytes any selection policy moves (bench/results/duhl_bench.txt).

Usage: bench/svm_margins.py MODEL DATA.svm
  MODEL: a dml-train svm model (-o), DATA the LIBSVM file it was trained on.
"""
import sys

import numpy as np


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, data = sys.argv[1], sys.argv[2]
    with open(model) as f:
        lines = f.read().split("\n")
    header = {l.split()[0]: l.split()[1:] for l in lines if l and not l[0].isdigit()}
    if header.get("model") != ["svm"]:
        sys.exit(f"{model}: not a hinge svm model (model {header.get('model')})")
    w = np.zeros(int(header["features"][0]) + 1)
    for l in lines:
        if l and l[0].isdigit():
            j, v = l.split()
            w[int(j)] = float(v)
    margins, rows_nnz = [], []
    with open(data) as f:
        for k, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                y = 1.0 if float(parts[0]) > 0 else -1.0
                pairs = [p.split(":") for p in parts[1:]]
                idx = np.array([int(a) for a, _ in pairs], dtype=np.int64)
                val = np.array([float(b) for _, b in pairs])
            except ValueError as e:
                sys.exit(f"{data}:{k}: {e}")
            idx = np.minimum(idx, len(w) - 1) * (idx < len(w))  # features the model lacks: weight 0 (index 0)
            margins.append(y * float(w[idx] @ val))
            rows_nnz.append(len(pairs))
    m, nnz = np.array(margins), np.array(rows_nnz)
    sv = m <= 1 + 1e-3
    print(f"examples {len(m)}: support vectors (margin <= 1 + 1e-3) {sv.mean():.4f} of them, "
          f"{nnz[sv].sum() / nnz.sum():.4f} of the nonzeros; inside the margin (< 1 - 1e-3) "
          f"{(m < 1 - 1e-3).mean():.4f}; misclassified {(m < 0).mean():.4f}")


if __name__ == "__main__":
    main()
