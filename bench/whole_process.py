#!/usr/bin/python3
"""Whole processes against LIBLINEAR, as issue 20's filer measured.

For each case: liblinear-train with its defaults (-s S -c 1; it also writes
its model file, which dml-train is not asked to), then dml-train (-s S -c 1,
its defaults otherwise: auto solver, paced certificates) at the loosest
--tol of TOLS whose final primal is at or below LIBLINEAR's (the highest of
its 3 runs' primals, computed by our objective code from its weights, as
bench/solver_bench.py does), with --threads 1 and 2, each thread count at
its own tolerance (two threads may sum in another order and stop
elsewhere; a thread count with a timed run above LIBLINEAR's primal is timed
again at the next tighter --tol, as runs on two threads differ). Each time
is a whole process (reading the file included, both
sides), median of 3 rounds, the three runs of a round in rotating order. Prints time(dml-train)/time(liblinear-train).

Usage: bench/whole_process.py [build-dir] [DATA[/MODEL] ...]  (default: every case)
  WHOLE_PROCESS_REPS=N: medians of N rounds instead of 3 (a noisy machine).
  BENCH_EXTRA: more data files, as bench/solver_bench.py says.
"""
import os, re, statistics, subprocess, sys, time

import solver_bench as sb  # reads the same arguments; its prepare(), CASES, LIBLINEAR's weights

TOLS = ["1e-1", "3e-2", "1e-2", "3e-3", "1e-3", "3e-4", "1e-4", "3e-5", "1e-5", "1e-6", "1e-7", "1e-8"]
DML = os.path.join(sb.BUILD, "samples", "dml-train")
REPS = int(os.environ.get("WHOLE_PROCESS_REPS", "3"))


def run(cmd):
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=sb.CASE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"over {sb.CASE_TIMEOUT} s: {' '.join(cmd)}")
    return time.perf_counter() - t0, out


def dml(path, s, tol, threads):
    secs, out = run([DML, "-q", "-s", str(s), "-c", "1", "--tol", tol, "--threads",
                     str(threads), path])
    m = re.search(r"primal (\S+)", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"dml-train failed: {out.stderr.strip()}")
    return secs, float(m.group(1))


def main():
    files = sb.prepare()
    rows = []
    for name, path in files.items():
        wanted = [m for m, _ in sb.CASES if not sb.ONLY or name in sb.ONLY
                  or f"{name}/{m}" in sb.ONLY]
        if not wanted:
            continue
        prob = None
        for model, s in sb.CASES:
            if model not in wanted:
                continue
            wfiles = [os.path.join(sb.DATA, f"w_{name}_{model}_s{s}_{r}.txt") for r in range(3)]
            if not all(os.path.exists(f) for f in wfiles):
                if prob is None:
                    y, x = sb.svm_read_problem(path)
                    prob = sb.problem(y, x)
                sb.liblinear_runs(prob, name, model, s, 1.0)
            out = subprocess.run([os.path.join(sb.BUILD, "bench", "solver_bench"), f"--data={path}",
                                  f"--model={model}", "--c=1", f"--w_ref={','.join(wfiles)}",
                                  "--ref_only"], capture_output=True, text=True, check=True)
            target = float(re.search(r"ref_primal=(\S+)", out.stdout).group(1))
            tols = {}
            try:
                for threads in (1, 2):
                    for t in TOLS:
                        _, p = dml(path, s, t, threads)  # primal printed to 10 digits
                        if p <= target:
                            tols[threads] = t
                            break
            except RuntimeError as e:
                print(f"{name} {model} -s {s}: {e}", flush=True)
                continue
            if len(tols) < 2:
                print(f"{name} {model} -s {s}: dml-train did not reach LIBLINEAR's {target:.10g} "
                      f"at --tol {TOLS[-1]} with threads {sorted(set((1, 2)) - set(tols))}",
                      flush=True)
                continue
            ll, d1, d2, p1s, p2s = [], [], [], [], []
            def liblinear():
                secs, out = run(["liblinear-train", "-q", "-s", str(s), "-c", "1", path,
                                 os.path.join(sb.DATA, "ll.model")])
                if out.returncode != 0:
                    raise RuntimeError(f"liblinear-train failed: {out.stderr.strip()}")
                ll.append(secs)

            def ours(threads, times, primals):
                secs, p = dml(path, s, tols[threads], threads)
                times.append(secs)
                primals.append(p)

            sides = [liblinear, lambda: ours(1, d1, p1s), lambda: ours(2, d2, p2s)]
            # Reruns can stop elsewhere (two threads: which snapshot the
            # certificate thread certifies depends on timing): a thread count
            # with a rerun above the target is timed again at the next
            # tighter --tol, until every rerun reaches it.
            while True:
                for v in (ll, d1, d2, p1s, p2s):
                    v.clear()
                for r in range(REPS):  # each side first, second and third in turn
                    for k in range(3):
                        sides[(r + k) % 3]()
                above = [k for k, ps in ((1, p1s), (2, p2s)) if max(ps) > target]
                if not above or any(tols[k] == TOLS[-1] for k in above):
                    break
                for k in above:
                    tols[k] = TOLS[TOLS.index(tols[k]) + 1]
            lm, m1, m2 = (statistics.median(v) for v in (ll, d1, d2))
            note = "".join(f" ({k} thread(s): a primal above the target)" for k in above)
            tol = tols[1] if tols[1] == tols[2] else f"{tols[1]}/{tols[2]}"
            rows.append((name, model, s, lm, tol, m1, m2, m1 / lm, m2 / lm, target, note))
            print(f"{name} {model} -s {s}: liblinear-train {lm:.3f} s; dml-train --tol {tol} "
                  f"1t {m1:.3f} s ({m1 / lm:.2f}), 2t {m2:.3f} s ({m2 / lm:.2f}){note}", flush=True)
    print(f"whole processes, medians of {REPS}; ratio = time(dml-train)/time(liblinear-train); "
          "tol: the loosest reaching LIBLINEAR's primal (1 thread/2 threads where they differ)")
    print(f"{'data':<13}{'model':<13}{'-s':>3}{'liblinear_s':>12}{'tol':>12}{'dml1_s':>9}{'dml2_s':>9}"
          f"{'ratio1':>8}{'ratio2':>8}  {'P_liblinear':>14}")
    for r in rows:
        print(f"{r[0]:<13}{r[1]:<13}{r[2]:>3}{r[3]:>12.3f}{r[4]:>12}{r[5]:>9.3f}{r[6]:>9.3f}"
              f"{r[7]:>8.2f}{r[8]:>8.2f}  {r[9]:>14.8g}{r[10]}")


if __name__ == "__main__":
    main()
