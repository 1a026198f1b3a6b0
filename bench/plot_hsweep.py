#!/usr/bin/python3
"""Plots runtime_bench --what=hsweep's CSV: rounds and seconds to a 1e-4
relative duality gap against H (local epochs per CoCoA+ round).

Usage: bench/plot_hsweep.py hsweep.csv [out.png]
"""
import csv, sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src = sys.argv[1]
dst = sys.argv[2] if len(sys.argv) > 2 else src.rsplit(".", 1)[0] + ".png"
rows = list(csv.DictReader(open(src)))
h = [float(r["H_epochs"]) for r in rows]
rounds = [int(r["rounds"]) for r in rows]
secs = [float(r["seconds"]) for r in rows]
reached = [r["reached"] == "1" for r in rows]
k = rows[0]["workers"] if rows else "?"

fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
for ax, ys, label in ((a, rounds, "rounds"), (b, secs, "seconds")):
    ax.plot(h, ys, "o-")
    for x, y, ok in zip(h, ys, reached):
        if not ok:
            ax.annotate("budget", (x, y), textcoords="offset points", xytext=(0, 6), ha="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("H (local epochs per round)")
    ax.set_ylabel(label + " to relative gap 1e-4")
    ax.grid(True, which="both", alpha=0.3)
fig.suptitle(f"CoCoA+ H sweep, K={k}")
fig.tight_layout()
fig.savefig(dst, dpi=100)
print("wrote", dst)
