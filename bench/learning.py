"""Benchmark: learning kernels by gradient, and multiple kernel learning at scale.

Rows
----
- **digits hopt** (Falkon's setting, Meanti et al. AISTATS 2022): scikit-learn digits,
  80/20 split (random_state 10), ARD Gaussian kernel, 500 Nyström centres (learned), Adam
  lr 0.1, 50 full-batch epochs over the lengthscales, the centres and the regularization;
  then the Nyström KRR on one-hot targets, argmax. Two objectives: the
  complexity-regularized one (:func:`torchkern.learning.nystrom_complexity_reg`) with
  Falkon's example's preprocessing and initial values (global z-score, lengthscales 1,
  λ = 1e-5), and Titsias' SGPR bound (:func:`torchkern.learning.sgpr_bound`; per-feature
  z-score, lengthscales 8, noise 0.1). Test error and time; Falkon's example reports
  0.83 % test error with the complexity-regularized objective.
- **MKL**: ``p`` per-feature RBF kernels (``active_dims``), a binary label that depends
  on features 0 and 1 only; MKLpy's EasyMKL (precomputed dense Gram matrices) where they
  fit in memory, when MKLpy is installed; then the mkl goal rows below.
- **deep-kernel GP**: an MLP feature map d → 32 → 2 under an RBF (``FeatureKernel``),
  exact marginal likelihood, Adam, median time per epoch (of 20) on digits (regression on
  the digit value), against GPyTorch's ``ExactGP`` deep-kernel recipe with the same
  network, initial values and objective when GPyTorch is installed.

- **converge** (issue 22 §1): ``fit(X, y, learn_kernel="loo"|"gcv")`` (L-BFGS-B on
  log ℓ, the default) from ℓ ∈ {0.1, 1, 10, 100} on diabetes (309/133) and wine's alcohol
  content (124/54), α = 0.3: the learned ℓ against the objective's optimum on a dense
  grid, test MSE and time against scikit-learn's GridSearchCV (60 lengthscales, 5-fold).
  Goal: within 5 % of the optimum, MSE ≤ the grid search's + 1 %, faster. Then the same
  with 3 restarts drawn log-uniformly in (1e-2, 1e3) (wine's LOO and GCV have a second
  local minimum near ℓ = 7.5 whose basin holds the start ℓ = 10).

- **mkl goal** (issue 22 §2, the ``mkl`` rows): at n = ``--n`` (default 20,000) with
  ``--mkl-features`` (10) per-feature RBF kernels, of which the label depends on two, every
  MKL method (SimpleMKL, its alignment method, EasyMKL at λ = 0.1 and 0.9, FHeuristic;
  the one-step combiners learn their weights on 2,000 points drawn at random) then the
  same Nyström KRR classifier (300 centres, α = 1) on all n; against the oracle kernel
  k_0 + k_1. Goal: weight on k_0 + k_1 ≥ 0.9 and test accuracy ≥ the oracle's − 0.01.
  Time and load average printed with each row.

Usage: ``python bench/learning.py [--rows converge,digits,mkl,dkl] [--n 20000 50000]
[--threads 2]``. The default run takes tens of minutes on 2 CPU cores (the mkl rows at
n = 20,000 took 25 min at load average 13-20, the digits rows 6 min at load 10).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _util import device_name, table  # noqa: E402

import torchkern  # noqa: E402
from torchkern.learning import (MultipleKernel, fit_kernel, log_marginal_likelihood,  # noqa: E402
                                nystrom_complexity_reg, sgpr_bound)
from torchkern.supervised import EasyMKL, FHeuristic, KernelRidge, SimpleMKL  # noqa: E402

F64 = torch.float64


# -- digits: Falkon's hyperparameter-optimization setting ------------------------------
def digits_split(dtype, scaling="feature"):
    """80/20 split (random_state 10) of sklearn digits, z-scored by the training set:
    per feature (``"feature"``) or by its global mean and std (``"global"``, as Falkon's
    hyperparameter-optimization example does)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=10)
    if scaling == "global":
        mu, sd = Xtr.mean(), Xtr.std()
    else:
        mu, sd = Xtr.mean(0), Xtr.std(0)
        sd[sd == 0] = 1
    Xtr, Xte = (torch.tensor((a - mu) / sd, dtype=dtype) for a in (Xtr, Xte))
    return Xtr, Xte, ytr, yte


def row_digits(objective="creg", epochs=50, m=500, seed=0):
    """Learn ARD lengthscales, Nyström centres and the regularization on digits, then
    classify by the Nyström KRR on one-hot targets. ``"creg"``: Falkon's setting — the
    complexity-regularized objective (:func:`nystrom_complexity_reg`), global z-score,
    lengthscales 1, λ = 1e-5; ``"sgpr"``: Titsias' bound, per-feature z-score,
    lengthscales 8, noise 0.1."""
    creg = objective == "creg"
    Xtr, Xte, ytr, yte = digits_split(torch.float32, "global" if creg else "feature")
    n, d = Xtr.shape
    Y = torch.nn.functional.one_hot(torch.tensor(ytr)).to(Xtr.dtype)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    k = torchkern.RBF(lengthscale=torch.full((d,), 1.0 if creg else 8.0))
    Z = Xtr[torch.randperm(n, generator=g)[:m]].clone().requires_grad_()
    raw = torch.tensor(math.log(1e-5 if creg else 0.1), requires_grad=True)
    if creg:  # raw = log λ; the ridge of the Nyström KRR is v = nλ
        loss = lambda: nystrom_complexity_reg(k, Xtr, Y, Z, raw.exp())  # noqa: E731
        ridge = lambda: n * raw.exp().double()  # noqa: E731
    else:     # raw = log σ², the ridge is σ²
        loss = lambda: -sgpr_bound(k, Xtr, Y, Z, raw.exp()) / n  # noqa: E731
        ridge = lambda: raw.exp().double()  # noqa: E731
    hist = fit_kernel(loss, [*k.parameters(), Z, raw], optimizer="adam", lr=0.1,
                      max_iter=epochs, patience=None).history
    with torch.no_grad():  # Nyström KRR: (K_mn K_nm + v K_mm) β = K_mn Y
        v = ridge()
        Knm, Kmm = k(Xtr, Z).to_dense().double(), k(Z).to_dense().double()
        B = torch.linalg.solve(Knm.T @ Knm + v * Kmm + 1e-8 * torch.eye(m, dtype=F64),
                               Knm.T @ Y.double())
        pred = (k(Xte, Z).to_dense().double() @ B).argmax(1).numpy()
    secs = time.perf_counter() - t0
    err = 100 * float(np.mean(pred != yte))
    name = "complexity-reg" if creg else "SGPR"
    return {"row": f"digits hopt ({name}, m={m}, {epochs} Adam epochs)", "n": n,
            "result": f"test error {err:.2f} % (Falkon: 0.83 %)", "seconds": f"{secs:.1f}",
            "note": f"loss {hist[0]:.4g} -> {hist[-1]:.4g}, ridge v {float(v):.3g}"}


# -- multiple kernel learning ----------------------------------------------------------
def mkl_data(n, p, seed):
    g = np.random.default_rng(seed)
    X = g.standard_normal((n, p))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 1 + 0.3 * g.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def per_feature_kernels(p, ls=0.5):
    return [torchkern.RBF(ls, active_dims=[i]) for i in range(p)]


def row_mkl_mklpy(n, p, n_test=2000, seed=0):
    need_gb = (p + 1) * n * n * 8 / 2**30
    row = {"row": "MKLpy EasyMKL (dense Grams)", "n": n, "note": f"p={p}"}
    try:
        from MKLpy.algorithms import EasyMKL
    except ImportError:
        return {**row, "result": "not installed (pip install mklpy)"}
    if need_gb > 8:
        return {**row, "result": f"not run: needs {need_gb:.0f} GB of dense Gram matrices"}
    X, y = mkl_data(n + n_test, p, seed)
    Xtr, Xte = torch.tensor(X[:n]), torch.tensor(X[n:])
    ks = per_feature_kernels(p)
    t0 = time.perf_counter()
    with torch.no_grad():
        KL = [k(Xtr, backend="dense").to_dense() for k in ks]
    model = EasyMKL(lam=0.1).fit(KL, torch.tensor(y[:n]))
    secs = time.perf_counter() - t0
    with torch.no_grad():
        KLte = [k(Xte, Xtr, backend="dense").to_dense() for k in ks]
    acc = float(np.mean(np.asarray(model.predict(KLte)) == y[n:]))
    w = np.asarray(model.solution.weights)
    return {**row, "result": f"test acc {acc:.3f}, weight on k0+k1 {w[0] + w[1]:.3f}",
            "seconds": f"{secs:.1f}"}


# -- deep-kernel GP --------------------------------------------------------------------
def _mlp(d, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def row_dkl(epochs=20, seed=0):
    Xtr, _, ytr, _ = digits_split(torch.float32)
    y = torch.tensor(ytr, dtype=torch.float32)
    y = (y - y.mean()) / y.std()
    n, d = Xtr.shape
    # GPyTorch's initial values: lengthscale = noise = softplus(0) = log 2
    kernel = torchkern.FeatureKernel(_mlp(d, seed), torchkern.RBF(math.log(2.0)))
    raw = torch.tensor(math.log(math.log(2.0)), requires_grad=True)
    stamps = [time.perf_counter()]
    hist = fit_kernel(lambda: -log_marginal_likelihood(kernel, Xtr, y, raw.exp()) / n,
                      [*kernel.parameters(), raw], optimizer="adam", lr=0.01, max_iter=epochs,
                      patience=None,
                      callback=lambda i, loss: stamps.append(time.perf_counter())).history
    ours = float(np.median(np.diff(stamps)))  # the median epoch: robust to a busy machine
    rows = [{"row": "deep-kernel GP, torchkern (exact LML)", "n": n,
             "result": f"-log p(y)/n {hist[0]:.3f} -> {hist[-1]:.3f}",
             "seconds": f"{ours:.3f} / epoch"}]
    try:
        import gpytorch
    except ImportError:
        return rows + [{"row": "deep-kernel GP, GPyTorch ExactGP", "result": "not installed"}]

    class DKL(gpytorch.models.ExactGP):
        def __init__(self, lik):
            super().__init__(Xtr, y, lik)
            self.net = _mlp(d, seed)
            self.mean = gpytorch.means.ZeroMean()
            self.cov = gpytorch.kernels.RBFKernel()

        def forward(self, x):
            z = self.net(x)
            return gpytorch.distributions.MultivariateNormal(self.mean(z), self.cov(z))

    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = DKL(lik)
    model.train(), lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    stamps = [time.perf_counter()]
    first = last = None
    with gpytorch.settings.max_cholesky_size(10**6):  # exact Cholesky, as torchkern's
        for _ in range(epochs):
            opt.zero_grad()
            loss = -mll(model(Xtr), y)
            loss.backward()
            opt.step()
            first = float(loss) if first is None else first
            last = float(loss)
            stamps.append(time.perf_counter())
    theirs = float(np.median(np.diff(stamps)))
    rows.append({"row": "deep-kernel GP, GPyTorch ExactGP (Cholesky)", "n": n,
                 "result": f"-log p(y)/n {first:.3f} -> {last:.3f}",
                 "seconds": f"{theirs:.3f} / epoch",
                 "note": f"torchkern / GPyTorch = {ours / theirs:.2f}"})
    return rows


# -- converged learning against a grid search (issue 22 §1) ----------------------------
def regression_sets():
    """The real regression sets scikit-learn ships (no download), standardized by the
    training part: diabetes (442 × 10, test_size=133 → 309/133, random_state 0) and wine's
    alcohol content regressed on its 12 other measurements (178 × 12, 30 % test, random
    state 0; the only other offline regression set, linnerud, has 20 samples)."""
    from sklearn.datasets import load_diabetes, load_wine
    from sklearn.model_selection import train_test_split
    X, y = load_diabetes(return_X_y=True)
    W = load_wine().data
    for name, (A, b, test) in {"diabetes": (X, y, 133),
                               "wine alcohol": (W[:, 1:], W[:, 0], 0.3)}.items():
        Xtr, Xte, ytr, yte = train_test_split(A, b, test_size=test, random_state=0)
        mu, sd, m, s = Xtr.mean(0), Xtr.std(0), ytr.mean(), ytr.std()
        yield name, (Xtr - mu) / sd, (Xte - mu) / sd, (ytr - m) / s, (yte - m) / s


def _ridge_numpy(X, y, ls, alpha):
    """(LOO, GCV) of kernel ridge regression with an RBF kernel of lengthscale ls, numpy."""
    from sklearn.metrics.pairwise import rbf_kernel
    A = np.linalg.inv(rbf_kernel(X, gamma=1 / (2 * ls * ls)) + alpha * np.eye(len(y)))
    c = A @ y
    return np.mean((c / np.diag(A)) ** 2), len(y) * np.sum(c ** 2) / np.trace(A) ** 2


def grid_optimum(X, y, alpha, which, lo=0.01, hi=1000.0):
    """The objective's minimizer by a dense grid: 161 log-spaced lengthscales over
    [lo, hi], then 401 over the two cells around the best (relative spacing 3e-4)."""
    f = lambda v: _ridge_numpy(X, y, v, alpha)[which]  # noqa: E731
    coarse = np.geomspace(lo, hi, 161)
    i = int(np.argmin([f(v) for v in coarse]))
    fine = np.geomspace(coarse[max(i - 1, 0)], coarse[min(i + 1, 160)], 401)
    return fine[int(np.argmin([f(v) for v in fine]))]


def rows_converge(alpha=0.3, starts=(0.1, 1.0, 10.0, 100.0), restarts=(0, 3)):
    """learn_kernel (L-BFGS-B, the default) by LOO and GCV from four starts, against the
    objective's grid optimum and scikit-learn's GridSearchCV (KernelRidge, 60 lengthscales
    log-spaced over [0.1, 100] as gamma = 1/(2ℓ²), 5-fold, MSE). Both sides on one BLAS /
    torch thread (learn_kernel's setting at n ≤ 1000; the grid search's BLAS limited to
    one by threadpoolctl, which on this busy machine is its fastest setting)."""
    from sklearn.kernel_ridge import KernelRidge as SkKRR
    from sklearn.model_selection import GridSearchCV
    from threadpoolctl import threadpool_limits
    rows = []
    for name, Xtr, Xte, ytr, yte in regression_sets():
        with threadpool_limits(1):
            t0 = time.perf_counter()
            grid = 1 / (2 * np.geomspace(0.1, 100, 60) ** 2)
            gs = GridSearchCV(SkKRR(alpha=alpha, kernel="rbf"), {"gamma": list(grid)}, cv=5,
                              scoring="neg_mean_squared_error").fit(Xtr, ytr)
            gs_secs = time.perf_counter() - t0
            gs_mse = float(np.mean((gs.predict(Xte) - yte) ** 2))
            gs_ls = (1 / (2 * gs.best_params_["gamma"])) ** 0.5
            optimum = {obj: grid_optimum(Xtr, ytr, alpha, i)
                       for i, obj in enumerate(("loo", "gcv"))}
        rows.append({"row": f"{name}: GridSearchCV (60 l, 5-fold)", "n": len(ytr),
                     "result": f"l {gs_ls:.3f}, test MSE {gs_mse:.4f}",
                     "seconds": f"{gs_secs:.2f}", "note": f"load {os.getloadavg()[0]:.1f}"})
        print("  ".join(str(v) for v in rows[-1].values()), flush=True)
        X, y = torch.tensor(Xtr), torch.tensor(ytr)
        for obj, start, k in ((o, s, r) for r in restarts for o in ("loo", "gcv")
                              for s in starts):
                spec = {"objective": obj, "n_restarts": k, "random_state": 0}
                if k:  # scikit-learn's (1e-5, 1e5) puts most draws on the K = I or K = 11ᵀ
                    spec["bounds"] = (1e-2, 1e3)  # plateaus: draw around the data's scale
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    est = torchkern.KernelRidge(torchkern.RBF(start), alpha=alpha).fit(
                        X, y, learn_kernel=spec)
                    secs = time.perf_counter() - t0
                res = est.learn_kernel_result_
                ls = float(est.kernel_.lengthscale.detach())
                mse = float(((est.predict(torch.tensor(Xte)) - torch.tensor(yte)) ** 2).mean())
                err = abs(ls / optimum[obj] - 1)
                ok = err <= 0.05 and mse <= gs_mse * 1.01 and secs < gs_secs
                warned = sum(issubclass(w.category, torchkern.linalg.ConvergenceWarning)
                             for w in caught)
                rows.append({
                    "row": f"{name}: {obj!r} from l={start:g}"
                           + (f", {k} restarts in (1e-2, 1e3)" if k else ""), "n": len(ytr),
                    "result": f"l {ls:.3f} (grid optimum {optimum[obj]:.3f}, {100 * err:.2f} %)"
                              f", test MSE {mse:.4f} ({100 * (mse / gs_mse - 1):+.1f} %)",
                    "seconds": f"{secs:.2f}",
                    "note": f"{res.n_iter} it, {res.n_evals} evals in all, "
                            f"{'converged' if res.converged else 'NOT converged'}"
                            f"{', warned' if warned else ''}, goal {'met' if ok else 'MISSED'}, "
                            f"load {os.getloadavg()[0]:.1f}"})
                print("  ".join(str(v) for v in rows[-1].values()), flush=True)
    return rows


# -- mkl goal (issue 22 §2): every MKL method against the oracle kernel ---------------
def _nystrom_krr(kernel, centers, seed):
    return KernelRidge(kernel, alpha=1.0, solver="nystrom", n_centers=centers, random_state=seed)


def rows_mkl_goal(n, p, n_test=5000, centers=300, seed=0, sub=2000):
    """The oracle kernel k_0 + k_1, then each MKL method, all ending in the same Nyström
    KRR classifier (sign of the ridge on ±1 labels) trained on all n points."""
    X, y = mkl_data(n + n_test, p, seed)
    Xtr, Xte, ytr, yte = torch.tensor(X[:n]), torch.tensor(X[n:]), y[:n], y[n:]
    saved = torchkern.config.dense_max_entries
    torchkern.config.dense_max_entries = max(saved, n * centers)  # keep K_nm between CG steps
    nys = dict(estimator="krr", alpha=1.0, solver="nystrom", n_centers=centers, random_state=seed)
    methods = [
        ("SimpleMKL (reduced gradient, 5 steps)",
         lambda: SimpleMKL(per_feature_kernels(p), method="simplemkl", max_iter=5, tol=1e-2,
                           **nys)),
        (f"SimpleMKL (alignment, alignf on {sub})",
         lambda: SimpleMKL(per_feature_kernels(p), method="alignment", max_samples=sub, **nys)),
        (f"EasyMKL lam=0.1 (weights on {sub})",
         lambda: EasyMKL(per_feature_kernels(p), lam=0.1, tol=1e-6, max_samples=sub, **nys)),
        (f"EasyMKL lam=0.9 (weights on {sub})",
         lambda: EasyMKL(per_feature_kernels(p), lam=0.9, tol=1e-6, max_samples=sub, **nys)),
        (f"FHeuristic (weights on {sub})",
         lambda: FHeuristic(per_feature_kernels(p), max_samples=sub, **nys)),
    ]
    rows = []
    try:
        t0 = time.perf_counter()
        oracle = MultipleKernel(per_feature_kernels(p)[:2], weights="fixed", init=[0.5, 0.5])
        m = _nystrom_krr(oracle, centers, seed).fit(Xtr, torch.tensor(ytr))
        acc0 = float(np.mean(np.sign(np.asarray(m.predict(Xte))) == yte))
        rows.append({"row": "oracle kernel k0 + k1 (Nyström KRR)", "n": n,
                     "result": f"test acc {acc0:.4f}", "seconds": f"{time.perf_counter() - t0:.1f}",
                     "note": f"load {os.getloadavg()[0]:.1f}"})
        print("  ".join(str(v) for v in rows[-1].values()), flush=True)
        for name, make in methods:
            t0 = time.perf_counter()
            m = make().fit(Xtr, ytr)
            secs = time.perf_counter() - t0
            pred = np.asarray(m.predict(Xte))
            acc = float(np.mean(np.sign(pred) == yte))
            w = m.weights_.numpy()
            ok = w[0] + w[1] >= 0.9 and acc >= acc0 - 0.01
            rows.append({"row": name, "n": n,
                         "result": f"test acc {acc:.4f}, weight on k0+k1 {w[0] + w[1]:.3f}",
                         "seconds": f"{secs:.1f}",
                         "note": f"p={p}, goal {'met' if ok else 'MISSED'}, "
                                 f"load {os.getloadavg()[0]:.1f}"})
            print("  ".join(str(v) for v in rows[-1].values()), flush=True)
    finally:
        torchkern.config.dense_max_entries = saved
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="converge,digits,mkl,dkl")
    ap.add_argument("--n", "--mkl-sizes", dest="mkl_sizes", type=int, nargs="+", default=[20000],
                    help="training sizes of the mkl rows")
    ap.add_argument("--mkl-features", type=int, default=10)
    ap.add_argument("--mklpy-sizes", type=int, nargs="+", default=[2000])
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    rows_wanted = args.rows.split(",")
    print(f"# bench/learning.py on {device_name('cpu')}, torch {torch.__version__}, "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    rows = []

    def add(*new):
        for r in new:
            rows.append(r)
            print("  ".join(str(v) for v in r.values()), flush=True)

    if "converge" in rows_wanted:
        rows.extend(rows_converge())
    if "digits" in rows_wanted:
        add(row_digits("creg"))
        add(row_digits("sgpr"))
    if "mkl" in rows_wanted:
        p = args.mkl_features
        for n in args.mklpy_sizes:
            add(row_mkl_mklpy(n, p))
        for n in args.mkl_sizes:
            rows.extend(rows_mkl_goal(n, p))  # printed as they come
    if "dkl" in rows_wanted:
        add(*row_dkl())
    print()
    table(rows, ["row", "n", "result", "seconds", "note"])


if __name__ == "__main__":
    main()
