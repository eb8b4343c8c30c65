"""Benchmark: torchkern's KernelLogisticRegression and SVC against scikit-learn, one table.

Data: ``make_circles(n, noise=0.1)`` (scikit-learn's default factor 0.8), train and test
sets of the same size drawn with different seeds; RBF kernel with lengthscale 0.3
(scikit-learn ``gamma = 1 / (2 · 0.3²)``). The FALKON paper reports 16.9% test error for
kernel methods on this task at n = 10 000.

Rows
----
- KLR: torchkern ``KernelLogisticRegression`` exact (all n centers, lazy Gram, Newton–CG)
  and Nyström (m centers), against scikit-learn ``LogisticRegression`` on ``Nystroem``
  features with the same m (the usual scikit-learn way to do kernel logistic regression).
- SVC: torchkern ``SVC`` against scikit-learn ``SVC`` (LIBSVM) with the same C, kernel
  and tol, for n in ``--svc-sizes`` (one torchkern row per working-set size in
  ``--svc-ws``).

Each case runs in a forked child process, so that "peak MB" is that child's peak RSS
(it includes the ~300 MB of the imported libraries). Ratios are torchkern / scikit-learn.
torch runs with ``--threads`` threads (default 1: LIBSVM is single-threaded, and the
2-core machines this is measured on are shared).

With ``--device cuda`` torchkern fits on the GPU (scikit-learn stays on the CPU) and its
"peak MB" is the CUDA allocator's peak. The SVC row names the solver that ran
(``SVC.solver_``: ``libsvm``, or the SMO with its subproblems on the ``host`` (NumPy), in
one fused GPU kernel (``triton``) or as CUDA-graph steps (``graph``)). An untimed warm-up
comes first in each torchkern child (a fit on 600 points: CUDA context, Triton's
compilation of the kernel; the KeOps probe of ``backend="auto"``); its time is printed
under the table.

``--ref-timeout S`` stops a scikit-learn case after S seconds and prints "> S" (its time
ratio is then an upper bound on torchkern / scikit-learn); ``--timeout S`` does the same
for torchkern cases. Both caps count from the case's process start (imports included).
Rows are printed as they are measured.

Usage: ``python bench/supervised_classifiers.py [--sections klr svc] [--klr-n 10000]
[--svc-sizes 5000 20000] [--device cuda] [--ref-timeout 20]``

The GPU run (about 60-90 s on one H100; LIBSVM capped at 15 s a size)::

    python bench/supervised_classifiers.py --device cuda --sections svc \
        --svc-sizes 20000 50000 100000 --threads 16 --ref-timeout 15 --timeout 30
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time
import warnings

import numpy as np

LS = 0.3
GAMMA = 1.0 / (2 * LS**2)


def _data(n, seed):
    from sklearn.datasets import make_circles
    X, y = make_circles(n, noise=0.1, random_state=seed)
    return X, y


def _run(case, n, args, conn):
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)  # NumPy's BLAS too, for scikit-learn
    warnings.simplefilter("ignore")
    warnings.simplefilter("default", RuntimeWarning)  # e.g. a GPU solver's fallback
    X, y = _data(n, 0)
    Xt, yt = _data(n, 1)
    out = {}
    t0 = time.perf_counter()
    if case.startswith("tk"):
        import torchkern
        dtype = torch.float64 if case.endswith("64") else torch.float32
        dev = torch.device(args.device)
        Xtr, Xte = (torch.tensor(a, dtype=dtype, device=dev) for a in (X, Xt))
        y = torch.as_tensor(y, device=dev)
        t0 = time.perf_counter()
        if case.startswith("tk-svc"):  # CUDA context, kernel compilation: outside the timing
            torchkern.SVC(torchkern.RBF(lengthscale=LS), C=args.C).fit(Xtr[:600], y[:600])
            torchkern.gram.keops_available(dev)  # the backend="auto" probe of large inputs
        elif dev.type == "cuda":
            torchkern.RBF(1.0)(Xtr[:2])
        if dev.type == "cuda":
            torch.cuda.synchronize()
        out["warm_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        k = torchkern.RBF(lengthscale=LS)
        if case.startswith("tk-klr"):
            m = args.centers if "nys" in case else None
            est = torchkern.KernelLogisticRegression(k, C=args.C, n_centers=m, random_state=0)
        else:
            est = torchkern.SVC(k, C=args.C, tol=1e-3, working_set_size=args.q)
        est.fit(Xtr, y)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        out["fit_s"] = time.perf_counter() - t0
        pred = np.asarray(torch.as_tensor(est.predict(Xte)).cpu())
        if hasattr(est, "support_"):
            out["n_sv"] = int(est.support_.numel())
            out["inner"] = getattr(est, "solver_", "?")
        if dev.type == "cuda":
            out["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    else:
        if case == "sk-klr-nys":
            from sklearn.kernel_approximation import Nystroem
            from sklearn.linear_model import LogisticRegression
            from sklearn.pipeline import make_pipeline
            est = make_pipeline(Nystroem(gamma=GAMMA, n_components=args.centers, random_state=0),
                                LogisticRegression(C=args.C, max_iter=1000))
        else:
            from sklearn.svm import SVC
            est = SVC(C=args.C, gamma=GAMMA, tol=1e-3, cache_size=200)
        est.fit(X, y)
        out["fit_s"] = time.perf_counter() - t0
        pred = est.predict(Xt)
        if hasattr(est, "support_"):
            out["n_sv"] = int(len(est.support_))
    out["err"] = float((pred != yt).mean())
    out.setdefault("peak_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    conn.send(out)
    conn.close()


def run_case(case, n, args):
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_run, args=(case, n, args, child))
    p.start()
    child.close()  # so that recv() sees EOF if the child dies
    cap = args.timeout if case.startswith("tk") else args.ref_timeout
    res = None
    if parent.poll(cap):  # None: wait as long as it takes
        try:
            res = parent.recv()
        except EOFError:
            pass
    if p.is_alive() and res is None:
        p.kill()
        p.join()
        nan = float("nan")
        return {"fit_s": float(cap), "err": nan, "peak_mb": nan, "n_sv": "-", "capped": True}
    p.join()
    if res is None:
        nan = float("nan")
        res = {"fit_s": nan, "err": nan, "peak_mb": nan, "n_sv": f"died({p.exitcode})"}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--klr-n", type=int, default=10_000)
    ap.add_argument("--svc-sizes", type=int, nargs="*", default=[5_000, 20_000])
    ap.add_argument("--centers", type=int, default=500)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-exact-klr", action="store_true")
    ap.add_argument("--device", default="cpu", help="where torchkern runs")
    ap.add_argument("--svc-ws", type=int, nargs="*", default=[256],
                    help="torchkern SVC working-set sizes (one row each)")
    ap.add_argument("--sections", nargs="*", default=["klr", "svc"], choices=["klr", "svc"])
    ap.add_argument("--ref-timeout", type=float, default=None,
                    help="seconds after which a scikit-learn case is stopped")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds after which a torchkern case is stopped")
    args = ap.parse_args()

    head = (f"{'task':<12} {'n':>6} | {'torchkern':<22} {'fit s':>7} {'err %':>6} {'#SV':>6} "
            f"{'peak MB':>7} | {'scikit-learn':<22} {'fit s':>7} {'err %':>6} {'#SV':>6} "
            f"{'peak MB':>7} | {'time x':>6} {'mem x':>5}")
    print(head)
    print("-" * len(head), flush=True)
    warm = []
    # Each row is printed when measured: a run stopped from outside keeps its finished rows.
    n = args.klr_n
    if "klr" in args.sections:
        ref = run_case("sk-klr-nys", n, args)
        cases = [("tk-klr-nys", f"KLR Nyström m={args.centers} f32")]
        if not args.skip_exact_klr:
            cases.append(("tk-klr-32", "KLR exact f32"))
        for case, name in cases:
            _print_row("KLR circles", n, name, run_case(case, n, args),
                       f"LogReg+Nystroem m={args.centers}", ref, warm)
    for n in args.svc_sizes if "svc" in args.sections else []:
        ours = []
        for q in args.svc_ws:
            args.q = q
            res = run_case("tk-svc-32", n, args)
            ours.append((f"SVC q={q} {res.get('inner', '?')}", res))
        ref = run_case("sk-svc", n, args)
        for name, res in ours:
            _print_row("SVC circles", n, name, res, "sklearn SVC", ref, warm)
    if warm:
        print("untimed warm-up of each torchkern child (first calls, compilation): "
              + "; ".join(warm))


def _print_row(task, n, oname, o, rname, r, warm):
    def secs(d):
        return f"> {d['fit_s']:.0f}" if d.get("capped") else f"{d['fit_s']:.2f}"

    def sv(d):
        return str(d.get("n_sv", "-"))
    ratio = f"{o['fit_s'] / r['fit_s']:.2f}"
    if r.get("capped") or o.get("capped"):  # a bound, or unknown when both stopped
        ratio = "?" if r.get("capped") and o.get("capped") else (
            "< " if r.get("capped") else "> ") + ratio
    print(f"{task:<12} {n:>6} | {oname:<22} {secs(o):>7} {100 * o['err']:>6.2f} "
          f"{sv(o):>6} {o['peak_mb']:>7.0f} | {rname:<22} {secs(r):>7} "
          f"{100 * r['err']:>6.2f} {sv(r):>6} {r['peak_mb']:>7.0f} | "
          f"{ratio:>6} {o['peak_mb'] / r['peak_mb']:>5.2f}", flush=True)
    if "warm_s" in o:
        warm.append(f"{task} n={n}: {o['warm_s']:.1f} s")

if __name__ == "__main__":
    main()
