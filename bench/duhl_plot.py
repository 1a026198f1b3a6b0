#!/usr/bin/python3
"""Draws duhl_bench's CSV: relative duality gap against the bytes moved to
the device (in units of the data's size), one line per selection rule, one
panel per data set, model and budget.

    /usr/bin/python3 bench/duhl_plot.py duhl_bench.csv duhl_bench.png

Debian's python3-matplotlib (the /usr/bin/python3 one)."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: duhl_plot.py IN.csv OUT.png")
    series = defaultdict(lambda: defaultdict(list))
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            panel = (row["data"], row["model"], float(row["budget"]))
            moved = int(row["device_bytes"]) / int(row["data_bytes"])
            gap = float(row["gap_rel"])
            if moved > 0 and gap > 0:
                series[panel][row["selection"]].append((moved, gap))
    if not series:
        sys.exit("no rows in " + sys.argv[1])
    panels = sorted(series)
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for rule, pts in sorted(series[panel].items()):
            xs, ys = zip(*pts)
            ax.plot(xs, ys, label=rule, linewidth=1.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes moved to the device / data bytes")
        ax.set_ylabel("relative duality gap")
        ax.set_title("%s, %s, budget %g%%" % (panel[0], panel[1], 100 * panel[2]))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
