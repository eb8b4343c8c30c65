"""Benchmark: torchkern KernelRidge and GaussianProcessRegressor against their peers.

Each configuration runs in its own subprocess on the same data (seeded), so the reported
peak memory is that run's growth of the resident set (ru_maxrss after − before the fit,
imports and data excluded). Times exclude imports and data generation.

    python bench/supervised.py              # default sizes (a few minutes on 2 CPU cores)
    python bench/supervised.py --large      # + exact solvers and scikit-learn at n = 20k
    python bench/supervised.py --no-200k    # skip the n = 200k Nyström run
    python bench/supervised.py --device cuda --large   # torchkern and GPyTorch on the GPU
    python bench/supervised.py --sections falkon --falkon-n 200000 1000000   # vs Falkon
    python bench/supervised.py --sections falkon --busy-rows   # + the rows beside a busy loop
    python bench/supervised.py --sections falkon --falkon-n 50000 --nystrom-tol 1e-4 default

With ``--device cuda`` torchkern and GPyTorch run on the GPU (scikit-learn on the CPU, as
it must) and their peak memory is the CUDA allocator's peak, not the process RSS.

Sections
--------
KRR   n ∈ {5k, 20k}: scikit-learn ``KernelRidge`` vs torchkern ``solver="cholesky" | "cg" |
      "nystrom"`` — fit + predict time, test MSE, peak memory; ratio = time / sklearn's.
KRR   n = 200k: torchkern ``solver="nystrom"`` only (the dense Gram matrix would be 320 GB).
Falkon  n = 200k (and 1M): float32 Nyström KRR (d = 5, M = 1,000, λ = 1e-3) against Falkon
      (built from source as a local peer, never a dependency) at equal test MSE (1 %).
      Wall and CPU seconds on both sides. Falkon 0.9.0 comes from ``bash
      bench/falkon_peer.sh`` (CPU only, in /tmp/falkon-venv; its docstring says why a
      build on the shared 2-core machine takes tens of minutes and how it resumes); run
      the bench with that venv's python (``/tmp/falkon-venv/bin/python bench/supervised.py
      --sections falkon``; torchkern is visible there). Without Falkon the section prints
      torchkern's rows and says "Falkon not installed".
GPR   n = 5k: one log-marginal-likelihood evaluation *with its gradient* — scikit-learn
      ``log_marginal_likelihood(theta, eval_gradient=True)``, GPyTorch ``ExactGP`` +
      ``ExactMarginalLogLikelihood`` backward (its default: CG/Lanczos above 800 points),
      torchkern ``method="cholesky"`` and ``"cg"`` (autograd / CG surrogates).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(__file__))
from _util import conditions  # noqa: E402

D = 8
LS = 1.0
ALPHA = 1e-2
N_TEST = 2000

_COMMON = textwrap.dedent("""
    import json, math, os, resource, time, warnings
    warnings.simplefilter("ignore")
    import numpy as np, torch
    def data(n, seed=0, d={d}):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-1, 1, size=(n + {n_test}, d))
        f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
        y = f + 0.1 * rng.normal(size=len(X))
        return X[:n], y[:n], X[n:], f[n:]
    def rss_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    DEV = torch.device("{device}")
    def sync():
        if DEV.type == "cuda":
            torch.cuda.synchronize()
    def mem_mb():  # peak memory of the device torch computes on
        return torch.cuda.max_memory_allocated() / 2**20 if DEV.type == "cuda" else rss_mb()
""").format(n_test=N_TEST, d=D, device="{device}")

_KRR = {
    "sklearn": """
        from sklearn.kernel_ridge import KernelRidge
        DEV = torch.device("cpu")
        Xtr, ytr, Xte, fte = data({n})
        base = rss_mb(); t = time.perf_counter()
        m = KernelRidge(alpha={alpha}, kernel="rbf", gamma={gamma}).fit(Xtr, ytr)
        pred = m.predict(Xte)
    """,
    "torchkern": """
        import torchkern as tk
        Xtr, ytr, Xte, fte = data({n})
        Xtr, ytr, Xte = (torch.as_tensor(a, dtype=torch.{dtype}, device=DEV) for a in (Xtr, ytr, Xte))
        tk.RBF(1.0)(Xtr[:2]); sync()  # CUDA context and handles outside the timing
        base = mem_mb(); t = time.perf_counter()
        m = tk.KernelRidge(tk.RBF({ls}), alpha={alpha}, solver="{solver}", n_centers={m},
                           tol={tol}, random_state=0, backend={backend!r}).fit(Xtr, ytr)
        pred = m.predict(Xte).double().cpu().numpy()
    """,
}
_KRR_END = """
    sync(); seconds = time.perf_counter() - t
    print(json.dumps(dict(seconds=seconds, mse=float(np.mean((pred - fte) ** 2)),
                          peak_mb=mem_mb() - base)))
"""

# Nyström KRR at scale against Falkon (a local benchmark peer, installed from source; never
# a dependency). Falkon's λ multiplies the mean squared error, torchkern's α the sum: α = λn.
# Each side gets one small untimed fit first (KeOps compiles, thread pools start). Falkon
# gets torchkern's centres (FixedSelector), so that both fit the same Nyström model.
_NYS = {
    "torchkern": """
        import torchkern as tk
        Xtr, ytr, Xte, fte = data({n}, d={d})
        Xtr, ytr, Xte = (torch.as_tensor(a, dtype=torch.{dtype}, device=DEV) for a in (Xtr, ytr, Xte))
        def fit(X, y):
            return tk.KernelRidge(tk.RBF({ls}), alpha={lam} * len(X), solver="nystrom",
                                  n_centers={m}, tol={tol}, random_state=0).fit(X, y)
        fit(Xtr[:5000], ytr[:5000]); sync()
        base = mem_mb(); t = time.perf_counter(); c = time.process_time()
        model = fit(Xtr, ytr)
        pred = model.predict(Xte).double().cpu().numpy()
        iters = model.n_iter_
    """,
    "falkon": """
        import falkon
        Xtr, ytr, Xte, fte = data({n}, d={d})
        Xtr, ytr, Xte = (torch.as_tensor(a, dtype=torch.{dtype}) for a in (Xtr, ytr, Xte))
        from torchkern.approx.nystroem import uniform_centers
        opt = falkon.FalkonOptions(use_cpu=True, keops_active="{keops}", **{options})
        def fit(X, y):
            # torchkern's centres (its random_state=0 draw): the same model on both sides
            idx = uniform_centers(len(X), {m}, 0)
            centers = falkon.center_selection.FixedSelector(X[idx], idx_centers=idx)
            kernel = falkon.kernels.GaussianKernel(sigma={ls}, opt=opt)
            return falkon.Falkon(kernel=kernel, penalty={lam}, M={m}, maxiter={maxiter},
                                 center_selection=centers, options=opt).fit(X, y[:, None])
        fit(Xtr[:5000], ytr[:5000])
        base = mem_mb(); t = time.perf_counter(); c = time.process_time()
        model = fit(Xtr, ytr)
        pred = model.predict(Xte).double().numpy().ravel()
        iters = {maxiter}
    """,
}
_NYS_END = """
    sync(); seconds = time.perf_counter() - t; cpu = time.process_time() - c
    print(json.dumps(dict(seconds=seconds, cpu=cpu, mse=float(np.mean((pred - fte) ** 2)),
                          peak_mb=mem_mb() - base, iters=int(iters))))
"""

_GPR = {
    "sklearn": """
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF
        DEV = torch.device("cpu")
        Xtr, ytr, _, _ = data({n})
        gp = GaussianProcessRegressor(RBF({ls}), alpha={noise}, optimizer=None).fit(Xtr[:10], ytr[:10])
        gp.X_train_, gp.y_train_ = Xtr, ytr  # evaluate on all n points without a first fit
        theta = gp.kernel_.theta
        base = rss_mb(); t = time.perf_counter()
        for _ in range({reps}):
            value, grad = gp.log_marginal_likelihood(theta, eval_gradient=True)
    """,
    "gpytorch": """
        import gpytorch
        Xtr, ytr, _, _ = data({n})
        X, y = torch.as_tensor(Xtr, device=DEV), torch.as_tensor(ytr, device=DEV)
        class M(gpytorch.models.ExactGP):
            def __init__(self, X, y, lik):
                super().__init__(X, y, lik)
                self.mean_module = gpytorch.means.ZeroMean()
                self.covar_module = gpytorch.kernels.RBFKernel()
            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))
        lik = gpytorch.likelihoods.GaussianLikelihood().double()
        model = M(X, y, lik).double().to(DEV); lik = lik.to(DEV)
        model.covar_module.lengthscale = {ls}; lik.noise = {noise}
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
        model.train(); lik.train(); sync()
        base = mem_mb(); t = time.perf_counter()
        for _ in range({reps}):
            model.zero_grad()
            value = mll(model(X), y) * len(X)
            value.backward()
    """,
    "torchkern": """
        import torchkern as tk
        Xtr, ytr, _, _ = data({n})
        X, y = torch.as_tensor(Xtr, device=DEV), torch.as_tensor(ytr, device=DEV)[:, None]
        gp = tk.GaussianProcessRegressor(tk.RBF({ls}), noise={noise}, method="{method}",
                                         random_state=0, tol=1e-4)
        kernel = tk.RBF({ls}).to(DEV)
        noise = torch.tensor({noise}, dtype=torch.float64, device=DEV, requires_grad=True)
        gen = torch.Generator().manual_seed(0)
        tk.RBF(1.0)(X[:2]); sync()
        base = mem_mb(); t = time.perf_counter()
        for _ in range({reps}):
            kernel.zero_grad()
            value, _ = gp._lml(kernel, X, y, noise, "{method}", gen)
            value.backward()
    """,
}
_GPR_END = """
    sync(); seconds = (time.perf_counter() - t) / {reps}
    print(json.dumps(dict(seconds=seconds, value=float(value), peak_mb=mem_mb() - base)))
"""


DEVICE = "cpu"


def _run(body: str, end: str, timeout: int = 1800) -> dict:
    code = _COMMON.replace("{device}", DEVICE) + textwrap.dedent(body) + textwrap.dedent(end)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        lines = res.stderr.strip().splitlines() or [f"exit code {res.returncode}"]
        return dict(error=lines[-1][:120])
    return json.loads(res.stdout.strip().splitlines()[-1])


def _tol_arg(text: str) -> str:
    """``--nystrom-tol``: a positive float, or "default" (torchkern's tol=None)."""
    if text != "default":
        try:
            if not float(text) > 0:
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--nystrom-tol takes positive floats or 'default', got {text!r}") from None
    return text


def _krr(peer, n, **kw):
    params = dict(n=n, alpha=ALPHA, gamma=1 / (2 * LS**2), ls=LS, dtype="float64",
                  solver="cholesky", m=None, tol=1e-6, backend=None)
    params.update(kw)
    return _run(_KRR[peer].format(**params), _KRR_END)


def _nys(peer, n, **kw):
    params = dict(n=n, d=5, ls=1.0, lam=1e-3, m=1000, dtype="float32", tol=1e-4, maxiter=20,
                  keops="auto", options={})
    params.update(kw)
    return _run(_NYS[peer].format(**params), _NYS_END, timeout=3600)


def _gpr(peer, n, reps=1, **kw):
    params = dict(n=n, ls=LS, noise=ALPHA, reps=reps, method="cholesky")
    params.update(kw)
    return _run(_GPR[peer].format(**params), _GPR_END.format(reps=reps))


def _fmt_row(rows, name, r, ref):
    if "error" in r:
        rows.append(f"| {name} | failed: {r['error']} | | | |")
    else:
        ratio = r["seconds"] / ref["seconds"] if ref and "seconds" in ref else float("nan")
        extra = f"{r['mse']:.4g}" if "mse" in r else f"{r['value']:.6g}"
        rows.append(f"| {name} | {r['seconds']:.2f} | {ratio:.2f} | {extra} | {r['peak_mb']:.0f} |")
    print(rows[-1], file=sys.stderr, flush=True)  # progress; the table goes to stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true",
                    help="also run scikit-learn and the exact torchkern solvers at n = 20k")
    ap.add_argument("--no-200k", action="store_true", help="skip the n = 200k Nyström run")
    ap.add_argument("--centers", type=int, default=1000, help="Nyström centers m")
    ap.add_argument("--device", default="cpu", help="where torchkern and GPyTorch run")
    ap.add_argument("--sections", nargs="+", default=["krr", "gpr"],
                    choices=["krr", "gpr", "falkon"])
    ap.add_argument("--falkon-n", nargs="+", type=int, default=[200_000],
                    help="sizes of the Falkon section (1000000 needs ~5 GB)")
    ap.add_argument("--falkon-dtypes", nargs="+", default=["float32"],
                    choices=["float32", "float64"])
    ap.add_argument("--falkon-variants", nargs="+", default=["default", "pc", "pc-iters"],
                    choices=["default", "pc", "pc-iters"],
                    help="Falkon settings (see _falkon_rows)")
    ap.add_argument("--nystrom-tol", nargs="+", default=["1e-4"], type=_tol_arg,
                    help="Falkon section: torchkern's CG tolerance(s) ('default' = tol=None)")
    ap.add_argument("--busy-rows", action="store_true",
                    help="Falkon section: also every row beside one busy loop "
                         "(bench/_util.busy), with the load average in each row")
    args = ap.parse_args(argv)
    global DEVICE
    DEVICE = args.device

    rows = ["| run | seconds | ratio to sklearn | test MSE / log p(y) | peak MB |",
            "|---|---|---|---|---|"]
    m = args.centers
    if "krr" in args.sections:
        _krr_rows(rows, m, args)
    if "gpr" in args.sections:
        _gpr_rows(rows)
    if len(rows) > 2:
        print("\n".join(rows), flush=True)
    if "falkon" in args.sections:
        _falkon_rows(args)


def _krr_rows(rows, m, args):
    # -- KRR n = 5k ------------------------------------------------------------------
    n = 5000
    ref = _krr("sklearn", n)
    _fmt_row(rows, f"KRR n={n} sklearn KernelRidge", ref, ref)
    _fmt_row(rows, f"KRR n={n} torchkern cholesky (f64)", _krr("torchkern", n), ref)
    _fmt_row(rows, f"KRR n={n} torchkern cg, auto = materialized f32 Gram (tol 1e-3)",
             _krr("torchkern", n, solver="cg", dtype="float32", tol=1e-3), ref)
    _fmt_row(rows, f"KRR n={n} torchkern cg, lazy blocked f32 Gram (tol 1e-3)",
             _krr("torchkern", n, solver="cg", dtype="float32", tol=1e-3, backend="blocked"), ref)
    _fmt_row(rows, f"KRR n={n} torchkern nystrom m={m} (f32)",
             _krr("torchkern", n, solver="nystrom", m=m, dtype="float32", tol=1e-4), ref)
    # -- KRR n = 20k -----------------------------------------------------------------
    n = 20000
    ref = _krr("sklearn", n) if args.large else None
    if ref:
        _fmt_row(rows, f"KRR n={n} sklearn KernelRidge", ref, ref)
        _fmt_row(rows, f"KRR n={n} torchkern cholesky (f64)", _krr("torchkern", n), ref)
        _fmt_row(rows, f"KRR n={n} torchkern cg, auto = materialized f32 Gram (tol 1e-3)",
                 _krr("torchkern", n, solver="cg", dtype="float32", tol=1e-3), ref)
        _fmt_row(rows, f"KRR n={n} torchkern cg, lazy blocked f32 Gram (tol 1e-3)",
                 _krr("torchkern", n, solver="cg", dtype="float32", tol=1e-3,
                      backend="blocked"), ref)
    _fmt_row(rows, f"KRR n={n} torchkern nystrom m={m} (f32)",
             _krr("torchkern", n, solver="nystrom", m=m, dtype="float32", tol=1e-4), ref)
    # -- KRR n = 200k ----------------------------------------------------------------
    if not args.no_200k:
        n = 200_000
        _fmt_row(rows, f"KRR n={n} torchkern nystrom m={m} (f32; sklearn: 320 GB Gram)",
                 _krr("torchkern", n, solver="nystrom", m=m, dtype="float32", tol=1e-4), None)


def _falkon_available() -> str | None:
    """Falkon's version where this Python can import it, else None (it is a local peer,
    built by ``bench/falkon_peer.sh`` into its own venv, never a dependency)."""
    import importlib.util
    if importlib.util.find_spec("falkon") is None:
        return None
    res = subprocess.run([sys.executable, "-c", "import falkon; print(falkon.__version__)"],
                         capture_output=True, text=True, timeout=600)
    return res.stdout.strip() if res.returncode == 0 else None


def _falkon_rows(args):
    """Nyström KRR, d = 5, M = 1,000 uniform centres, λ = 10⁻³ (α = λn), Gaussian kernel
    ℓ = σ = 1, the same centres on both sides: torchkern (``--nystrom-tol``, relative
    residual) against Falkon's ``--falkon-variants`` (KeOps on the CPU where Falkon's
    "auto" picks it; Falkon's CG runs its ``maxiter`` iterations, its own stopping rule
    ‖r‖ < 10⁻⁷ being absolute). Each side: wall and CPU seconds of fit + predict (CPU
    time = all the process's threads), CG iterations, and the 1-minute load average after
    it. The ratio is Falkon's time over torchkern's, wall (CPU); a row says when the two
    test MSEs differ by more than 1 %. Without Falkon, torchkern's rows are printed and say
    so."""
    version = _falkon_available()
    status = version or ("NOT INSTALLED for this python (bash bench/falkon_peer.sh builds "
                         "it; then run this bench with /tmp/falkon-venv/bin/python)")
    print(f"# Falkon section: python {sys.executable}, torch threads "
          f"{__import__('torch').get_num_threads()}, Falkon {status}; "
          f"load average at start {_load()}", flush=True)
    rows = ["| condition | n | dtype | torchkern tol | torchkern s wall / CPU (CG it.) [load] "
            "| Falkon s wall / CPU (CG it.) [load] | Falkon / torchkern wall (CPU) "
            "| test MSE torchkern | test MSE Falkon | peak MB tk / Falkon |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for cond, context in conditions(getattr(args, "busy_rows", False)):
        with context():
            _falkon_rows_one(args, rows, cond, version is not None)
    print("\n".join(rows), flush=True)
    print(f"# load average at the end {_load()}", flush=True)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _nys_cell(r) -> str:
    return f"{r['seconds']:.2f} / {r['cpu']:.2f} ({r['iters']})"


def _falkon_rows_one(args, rows, cond, have_falkon: bool):
    def emit(row):
        rows.append(row)
        print(row, file=sys.stderr, flush=True)  # progress; the table goes to stdout

    for n in args.falkon_n:
        for dtype in args.falkon_dtypes:
            for tol in args.nystrom_tol:
                tk = _nys("torchkern", n, dtype=dtype, tol=None if tol == "default" else tol)
                lead = f"| {cond} | {n:,} | {dtype} | {tol} |"
                if "error" in tk:
                    emit(f"{lead} failed: {tk['error']} | | | | | |")
                    continue
                tk_cell = f"{_nys_cell(tk)} [{os.getloadavg()[0]:.1f}]"
                if not have_falkon:
                    emit(f"{lead} {tk_cell} | Falkon not installed | | {tk['mse']:.5f} | | "
                         f"{tk['peak_mb']:.0f} / |")
                    continue
                for variant in args.falkon_variants:
                    # "default": Falkon's defaults (20 iterations, float32 preconditioner
                    # jitter 1e-5·M); "pc": jitter 1e-7·M, with which its float32 solve
                    # reaches the float64 test MSE; "pc-iters": that, stopped at
                    # torchkern's iteration count.
                    options = {} if variant == "default" else dict(pc_epsilon_32=1e-7)
                    maxiter = max(1, tk["iters"]) if variant == "pc-iters" else 20
                    fk = _nys("falkon", n, dtype=dtype, options=options, maxiter=maxiter)
                    if "error" in fk:
                        emit(f"{lead} {tk_cell} | {variant} failed: {fk['error']} | | "
                             f"{tk['mse']:.5f} | | |")
                        continue
                    same = abs(fk["mse"] - tk["mse"]) <= 0.01 * tk["mse"]
                    emit(f"{lead} {tk_cell} | {variant}: {_nys_cell(fk)} "
                         f"[{os.getloadavg()[0]:.1f}] | {fk['seconds'] / tk['seconds']:.2f} "
                         f"({fk['cpu'] / tk['cpu']:.2f}){'' if same else ' (MSE differs > 1 %)'}"
                         f" | {tk['mse']:.5f} | {fk['mse']:.5f} | "
                         f"{tk['peak_mb']:.0f} / {fk['peak_mb']:.0f} |")


def _gpr_rows(rows):
    # -- GPR n = 5k: one log p(y) + gradient ------------------------------------------
    n = 5000
    ref = _gpr("sklearn", n)
    _fmt_row(rows, f"GPR n={n} log p(y)+grad sklearn", ref, ref)
    _fmt_row(rows, f"GPR n={n} log p(y)+grad GPyTorch ExactGP (CG/Lanczos)", _gpr("gpytorch", n), ref)
    _fmt_row(rows, f"GPR n={n} log p(y)+grad torchkern cholesky", _gpr("torchkern", n), ref)
    _fmt_row(rows, f"GPR n={n} log p(y)+grad torchkern cg+SLQ",
             _gpr("torchkern", n, method="cg"), ref)


if __name__ == "__main__":
    main()
