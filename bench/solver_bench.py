#!/usr/bin/python3
"""Solver benchmark against LIBLINEAR, same machine, same run.

For each case LIBLINEAR (Debian's python3-liblinear, the same C library as
liblinear-train) trains with its default tolerance; only its train() call is
timed (median of 3), not file reading. Its weights go to our solver_bench,
which computes LIBLINEAR's primal objective with our objective code and times
our default solver (--solver auto: truncated Newton for logistic and squared
hinge, SCD for hinge, newGLMNET for L1-logistic) with 1 and 2 threads until
it reaches that primal or better. Each model is run against each of
LIBLINEAR's solvers for it (dual CD and primal Newton), each with its own
time and primal. Prints time(ours)/time(LIBLINEAR).
SOLVER_BENCH_SOLVER=scd times the older pair: sequential SCD, async SCD.

Usage: bench/solver_bench.py [build-dir] [DATA[/MODEL] ...]
  e.g. bench/solver_bench.py build a9a/logistic dense   (default: every case)
  BENCH_EXTRA="name=path.svm name2=path2.svm": more binary LIBSVM files to
  run beside the built-in sets (data that is not in this repo).
"""
import os, random, re, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
ONLY = sys.argv[2:]
DATA = os.path.join(BUILD, "bench-data")
SHARED = os.path.join(ROOT, "..", "shared", "data")
os.makedirs(DATA, exist_ok=True)

try:
    from liblinearutil import problem, parameter, train, svm_read_problem
except ImportError:
    subprocess.check_call("apt-get install -y -qq python3-liblinear >/dev/null", shell=True)
    from liblinearutil import problem, parameter, train, svm_read_problem


def prepare():
    files = {}
    a9a = os.path.join(DATA, "a9a.svm")
    if not os.path.exists(a9a):
        subprocess.check_call(f"xz -dc {SHARED}/a9a.xz > {a9a}", shell=True)
    files["a9a"] = a9a
    w8a = os.path.join(DATA, "w8a.svm")
    if not os.path.exists(w8a):
        subprocess.check_call(f"xz -dc {SHARED}/w8a.xz > {w8a}", shell=True)
    files["w8a"] = w8a
    news = os.path.join(DATA, "news20.binary.svm")
    if not os.path.exists(news):
        # classes 1-10 -> -1, 11-20 -> +1
        with subprocess.Popen(["bzip2", "-dc", f"{SHARED}/news20.bz2"], stdout=subprocess.PIPE,
                              text=True) as p, open(news, "w") as out:
            for line in p.stdout:
                lab, _, rest = line.partition(" ")
                out.write(("+1" if float(lab) > 10.5 else "-1") + " " + rest)
    files["news20"] = news
    # real-sim's shape: 72,309 x 20,958, ~51 nonzeros a row.
    files["realsim-like"] = generated("realsim_like.svm", 72309, 20958, 51, 0.3, 7)
    # Dense, low-dimensional (the shape where atomics on a short w contend):
    # 30,000 x 300, every feature present, planted model.
    files["dense"] = generated("dense_30k_300.svm", 30000, 300, 300, 0.5, 11)
    # Small tabular sets with unscaled features (scales over 4-5 orders of
    # magnitude, as raw measurements come), the shape of the UCI sets users
    # try first.
    for name, rows, cols, seed in (("tab-569x30", 569, 30, 3), ("tab-4601x57", 4601, 57, 5),
                                   ("tab-20000x16", 20000, 16, 9)):
        path = os.path.join(DATA, name + ".svm")
        if not os.path.exists(path):
            write_tabular(path, rows, cols, seed)
        files[name] = path
    for spec in os.environ.get("BENCH_EXTRA", "").split():
        name, sep, path = spec.partition("=")
        if not sep or not os.path.exists(path):
            sys.exit(f"BENCH_EXTRA: '{spec}' is not name=existing-file")
        files[name] = os.path.abspath(path)
    return files


def generated(name, rows, cols, nnz_per_row, noise, seed):
    """A classification set from dml-gen (planted model), made once under DATA."""
    path = os.path.join(DATA, name)
    if not os.path.exists(path):
        subprocess.check_call([os.path.join(BUILD, "samples", "dml-gen"), "--rows", str(rows),
                               "--cols", str(cols), "--nnz-per-row", str(nnz_per_row),
                               "--noise", str(noise), "--task", "classification",
                               "--seed", str(seed), "--out", path])
    return path


def write_tabular(path, rows, cols, seed):
    rnd = random.Random(seed)
    scale = [10.0 ** rnd.uniform(-2, 3) for _ in range(cols)]
    shift = [rnd.uniform(0, 3) * s for s in scale]
    w = [rnd.gauss(0, 1) for _ in range(cols)]
    with open(path, "w") as out:
        for _ in range(rows):
            z = [rnd.gauss(0, 1) for _ in range(cols)]
            m = sum(a * b for a, b in zip(w, z)) + rnd.gauss(0, 1.5)
            feats = " ".join(f"{j + 1}:{z[j] * scale[j] + shift[j]:.6g}" for j in range(cols))
            out.write(("+1" if m > 0 else "-1") + " " + feats + "\n")


# A case whose solver_bench run (1 and 2 threads, medians of 3) exceeds this
# is reported as not reaching LIBLINEAR's primal.
CASE_TIMEOUT = int(os.environ.get("SOLVER_BENCH_CASE_TIMEOUT", "240"))

SOLVER = os.environ.get("SOLVER_BENCH_SOLVER", "auto")

CASES = [  # (our model, LIBLINEAR -s)
    ("logistic", 0),     # L2-regularised LR, primal trust-region Newton (LIBLINEAR's default)
    ("logistic", 7),     # L2-regularised LR, dual CD
    ("svm", 3),          # L2-reg. L1-loss (hinge) SVC, dual CD
    ("svm-squared", 1),  # L2-reg. L2-loss SVC, dual CD (LIBLINEAR's default)
    ("svm-squared", 2),  # L2-reg. L2-loss SVC, primal trust-region Newton
    ("logistic-l1", 6),  # L1-regularised LR, primal CD (newGLMNET)
]


def liblinear_runs(prob, name, model, s, c):
    """LIBLINEAR's 3 train() calls: their times and the files (comma-separated)
    with their weights, oriented so that positive predicts our +1."""
    times = []
    wfiles = []
    for r in range(3):
        t0 = time.perf_counter()
        m = train(prob, parameter(f"-s {s} -c {c} -q"))
        times.append(time.perf_counter() - t0)
        w, _ = m.get_decfun()
        # Decision value > 0 predicts labels[0]; our +1 is the larger label.
        if m.get_labels()[0] < m.get_labels()[1]:
            w = [-v for v in w]
        wfile = os.path.join(DATA, f"w_{name}_{model}_s{s}_{r}.txt")
        with open(wfile, "w") as f:
            f.write("\n".join(repr(v) for v in w))
        wfiles.append(wfile)
    return times, ",".join(wfiles)


def main():
    # What a second thread can buy here at all, whatever the solver does.
    print(subprocess.run([os.path.join(BUILD, "bench", "thread_scaling")], capture_output=True,
                         text=True).stdout, flush=True)
    files = prepare()
    c = 1.0
    rows = []
    for name, path in files.items():
        wanted = [m for m, _ in CASES if not ONLY or name in ONLY or f"{name}/{m}" in ONLY]
        if not wanted:
            continue
        y, x = svm_read_problem(path)
        prob = problem(y, x)
        for model, s in CASES:
            if model not in wanted:
                continue
            # LIBLINEAR's CD solvers draw their permutations from rand(),
            # not reseeded between calls: the 3 runs differ (news20 -s 6:
            # P 0.10897 or 0.10678; -s 1: 0.00727 to 0.00739). The target
            # is the highest primal of the 3 (what each run reached), the
            # time their median.
            times, wfile = liblinear_runs(prob, name, model, s, c)
            try:
                out = subprocess.run([os.path.join(BUILD, "bench", "solver_bench"),
                                      f"--data={path}", f"--model={model}", f"--c={c}",
                                      f"--w_ref={wfile}", f"--solver={SOLVER}"],
                                     capture_output=True, text=True, timeout=CASE_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"{name} {model} -s {s}: LIBLINEAR {statistics.median(times):.4f} s; ours did not "
                      f"reach its primal within {CASE_TIMEOUT} s (1 and 2 threads together)",
                      flush=True)
                continue
            if out.returncode != 0:
                print(f"{name} {model} -s {s}: solver_bench failed: {out.stderr.strip()}")
                continue
            kv = dict(re.findall(r"(\w+)=(\S+)", out.stdout))
            ll = statistics.median(times)
            t1, t2 = float(kv["t1"]), float(kv["t2"])
            rows.append((name, model, s, ll, t1, t2, t1 / ll, t2 / ll, kv["ref_primal"],
                         kv["primal1"], kv["primal2"], out.stderr.strip()))
            print(f"{name} {model} -s {s}: LIBLINEAR {ll:.4f} s, ours 1t {t1:.4f} s ({t1 / ll:.2f}), "
                  f"2t {t2:.4f} s ({t2 / ll:.2f}); epochs {kv['epochs1']}/{kv['epochs2']}", flush=True)
    print(f"C={c}; solver {SOLVER}; times are medians of 3; ratio = time(ours)/time(LIBLINEAR train())")
    print(f"{'data':<13}{'model':<13}{'-s':>3}{'liblinear_s':>12}{'ours1_s':>10}{'ours2_s':>10}"
          f"{'ratio1':>8}{'ratio2':>8}  {'P_liblinear':>14}{'P_ours1':>14}{'P_ours2':>14}")
    for r in rows:
        print(f"{r[0]:<13}{r[1]:<13}{r[2]:>3}{r[3]:>12.4f}{r[4]:>10.4f}{r[5]:>10.4f}"
              f"{r[6]:>8.2f}{r[7]:>8.2f}  {float(r[8]):>14.8g}{float(r[9]):>14.8g}{float(r[10]):>14.8g}"
              + (f"  [{r[11]}]" if r[11] else ""))


if __name__ == "__main__":
    main()
