"""Million-point fits: exact GP regression, Nyström-preconditioned KRR, and GPyTorch.

Data (drawn here, seeded: the GPU machine reaches no data set; d = 8, standardized,
10,000 test points; RMSE against the noisy test y, whose floor is the noise, and against
the noiseless f):

- ``--data sines`` (default): x ~ U[-1, 1]^8, f = sin(3x₁) + cos(2x₂) + x₃x₄, noise 0.1
  (bench/supervised.py's target);
- ``--data friedman1``: Friedman's problem #1 (Friedman 1991, "Multivariate adaptive
  regression splines", Ann. Statist. 19(1); scikit-learn's ``make_friedman1``),
  x ~ U[0, 1]^8, f = 10 sin(π x₁x₂) + 20 (x₃ − 1/2)² + 10 x₄ + 5 x₅, noise 1. Its linear
  terms drive ML-II of an RBF kernel to outputscale/noise ≈ 10⁴, where float32 cannot
  resolve K + σ²I (n = 2,000: float32 CG means 0.1 std from the float64 posterior at any
  CG tolerance; float64 CG agrees to 5·10⁻⁷): use it with ``--dtype float64``.

Rows (each in its own process under a time cap, so one slow or crashing row cannot take
the others down; each prints device, n, seconds, RMSE and the load average):

- ``warm``: ML-II of the lengthscales (ARD), outputscale and noise on a random subset of
  ``--subset`` points (exact: dense Cholesky, L-BFGS-B) — the warm start of Wang et al.
  2019 ("Exact Gaussian processes on a million data points", NeurIPS), who pretrain the
  hyperparameters on a subset and then take a few Adam steps on all points.
- ``exact-gp``: ``GaussianProcessRegressor(method="cg")`` from the warm start:
  ``--finish-steps`` Adam steps of ML-II on all n points (CG + SLQ objective, CG tolerance
  ``--train-tol``; Wang et al. train at tolerance 1), then the posterior conditioned at
  CG tolerance ``--tol`` (10⁻³; Wang et al. use 0.01 at test time), test RMSE of the
  posterior mean. Above ``--finish-max-n`` the Adam steps are skipped: the subset's
  hyperparameters, the posterior on all points. In float32 the posterior mean stays
  ~10⁻² std from the float64 one whatever the CG tolerance (sines, n = 2,000: 9·10⁻³ at
  tol 10⁻³ and 8·10⁻³ at 10⁻⁵; float64 CG: 3·10⁻⁶), i.e. float32 rounding of K.
- ``dense-check`` (n ≤ ``--dense-max``): the same hyperparameters by float64 dense
  Cholesky — the exact posterior mean the CG fit must reproduce (max |difference|).
- ``nystrom``: the Nyström baseline, ``KernelRidge(solver="nystrom")`` (Falkon-style, m
  uniform centres) with the GP's hyperparameters (α = σ²): same model class, approximated.
- ``krr-pcg``: exact KRR by Nyström-preconditioned CG, ``KernelRidge(solver="cg")``, α = σ²
  (its solution is the GP posterior mean: max |difference| to ``exact-gp``).
- ``gpytorch``: GPyTorch ``ExactGP`` (ScaleKernel(RBFKernel(ARD)), GaussianLikelihood, its
  default settings: CG/Lanczos above 800 points) from the same warm start, the same Adam
  steps, then its posterior mean; ``gpytorch-keops`` the same with
  ``gpytorch.kernels.keops.RBFKernel`` (where KeOps runs; see bench/keops_probe.py).

Each row runs up a ladder of ``--sizes`` (``--row-sizes`` per row) under its cap
(``--caps``), all rows under ``--budget``, the rows first named first; a size is skipped
when the last time scaled by (n'/n)² is over twice what is left.

    python bench/gp_million.py --device cpu --sizes 2000 5000 --subset 1000     # CPU check
    python bench/gp_million.py --device cuda --triton-auto --sizes 100000 1000000
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import load_average, table  # noqa: E402

D = 8
N_TEST = 10_000
NOISE = 1.0


# ------------------------------------------------------------------------------------
# data and shared pieces (children)
# ------------------------------------------------------------------------------------

def friedman1(n: int, seed: int):
    """(X, y, f) of Friedman #1 in D dimensions, numpy float64."""
    import numpy as np
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, D))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2
         + 10 * X[:, 3] + 5 * X[:, 4])
    return X, f + NOISE * rng.standard_normal(n), f


def sines(n: int, seed: int):
    """(X, y, f): x ~ U[-1, 1]^D, f = sin(3x₁) + cos(2x₂) + x₃x₄ (bench/supervised.py's
    function), y = f + 0.1 ε: a stationary target whose ML-II kernel keeps K + σ²I within
    what float32 resolves (Friedman #1's linear terms drive the outputscale/noise ratio to
    ~10⁴, where float32 CG predictions differ from the float64 posterior by ~0.1 std)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, D))
    f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    return X, f + 0.1 * rng.standard_normal(n), f


DATA = {"friedman1": (friedman1, 0.5, math.sqrt(1 / 12)), "sines": (sines, 0.0, math.sqrt(1 / 3))}


def load(n: int, device, dtype, data="friedman1"):
    """Standardized training set of n points (the first n of one seeded stream, so every
    size holds the smaller ones) and the test set; y's scale for RMSE in data units."""
    import numpy as np
    import torch
    gen, mu_x, sd_x = DATA[data]
    X, y, _ = gen(n, seed=0)
    Xt, yt, ft = gen(N_TEST, seed=1)
    mu_y, sd_y = float(y.mean()), float(y.std())

    def t(a):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)
    return (t((X - mu_x) / sd_x), t((y - mu_y) / sd_y), t((Xt - mu_x) / sd_x),
            (yt, ft, mu_y, sd_y))


def rmse(pred, test):
    import numpy as np
    yt, ft, mu_y, sd_y = test
    p = pred.detach().double().cpu().numpy() * sd_y + mu_y
    return float(np.sqrt(np.mean((p - yt) ** 2))), float(np.sqrt(np.mean((p - ft) ** 2)))


def sync(device):
    import torch
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def hyper(kernel, noise) -> dict:
    return dict(lengthscale=[round(float(v), 4) for v in kernel.base.lengthscale.detach().reshape(-1)],
                outputscale=round(float(kernel.outputscale), 4), noise=round(float(noise), 5))


def tk_kernel(h, dtype, device):
    import torch
    import torchkern as tk
    ls = torch.tensor(h["lengthscale"], dtype=dtype)
    return tk.ScaleKernel(tk.RBF(ls), outputscale=h["outputscale"]).to(device)


# ------------------------------------------------------------------------------------
# rows (children)
# ------------------------------------------------------------------------------------

def row_warm(a, device, dtype):
    import torch
    import torchkern as tk
    X, y, Xt, test = load(a.subset, device, dtype, a.data)
    k = tk.ScaleKernel(tk.RBF(torch.ones(D, dtype=dtype))).to(device)
    t = time.perf_counter()
    gp = tk.GaussianProcessRegressor(k, noise=0.1, method="cholesky")
    gp.fit(X, y, optimize=True, n_iter=a.warm_iter)
    pred = gp.predict(Xt)
    sync(device)
    dt = time.perf_counter() - t
    return dict(seconds=dt, rmse=rmse(pred, test), hyper=hyper(gp.kernel_, gp.noise_),
                info=f"L-BFGS-B {gp.n_iter_} it, log p(y) {float(gp.log_marginal_likelihood()):.1f}")


def row_exact_gp(a, device, dtype, warm):
    import torchkern as tk
    X, y, Xt, test = load(a.n, device, dtype, a.data)
    kernel = tk_kernel(warm["hyper"], dtype, device)
    noise = warm["hyper"]["noise"]
    t = time.perf_counter()
    steps = 0
    if a.finish_steps > 0 and a.n <= a.finish_max_n:
        gp = tk.GaussianProcessRegressor(kernel, noise=noise, method="cg", tol=a.train_tol,
                                         num_probes=a.probes, optimizer="adam", random_state=0,
                                         backend=a.backend)
        gp.fit(X, y, optimize=True, n_iter=a.finish_steps, lr=a.lr)
        kernel, noise, steps = gp.kernel_, gp.noise_, gp.n_iter_
    sync(device)
    t_train = time.perf_counter() - t
    gp = tk.GaussianProcessRegressor(kernel, noise=noise, method="cg", tol=a.tol,
                                     num_probes=a.final_probes, random_state=0, backend=a.backend)
    gp.fit(X, y)
    pred = gp.predict(Xt)
    sync(device)
    dt = time.perf_counter() - t
    save_pred(a, pred)
    return dict(seconds=dt, rmse=rmse(pred, test), hyper=hyper(gp.kernel_, gp.noise_),
                info=(f"{steps} Adam steps {t_train:.1f} s + condition/predict {dt - t_train:.1f} s; "
                      f"log p(y)/n {float(gp.log_marginal_likelihood()) / a.n:.4f} (SLQ)"))


def row_dense_check(a, device, dtype, warm, final):
    import torch
    import torchkern as tk
    X, y, Xt, test = load(a.n, device, dtype, a.data)
    h = final or warm["hyper"]
    t = time.perf_counter()
    gp = tk.GaussianProcessRegressor(tk_kernel(h, torch.float64, device), noise=h["noise"],
                                     method="cholesky").fit(X.double(), y.double())
    pred = gp.predict(Xt.double())
    sync(device)
    dt = time.perf_counter() - t
    other = load_pred(a, "exact-gp")
    diff = "" if other is None else f"max |mean - exact-gp's| {float((pred - other.to(pred)).abs().max()):.2e} (std units)"
    return dict(seconds=dt, rmse=rmse(pred, test), info=f"float64 dense Cholesky; {diff}")


def row_nystrom(a, device, dtype, warm, final):
    import torchkern as tk
    X, y, Xt, test = load(a.n, device, dtype, a.data)
    h = final or warm["hyper"]
    t = time.perf_counter()
    m = min(a.centers, a.n)
    model = tk.KernelRidge(tk_kernel(h, dtype, device), alpha=h["noise"], solver="nystrom",
                           n_centers=m, random_state=0, backend=a.backend).fit(X, y)
    pred = model.predict(Xt)
    sync(device)
    return dict(seconds=time.perf_counter() - t, rmse=rmse(pred, test),
                info=f"m = {m} centres, {model.n_iter_} CG it")


def row_krr_pcg(a, device, dtype, warm, final):
    import torchkern as tk
    X, y, Xt, test = load(a.n, device, dtype, a.data)
    h = final or warm["hyper"]
    t = time.perf_counter()
    model = tk.KernelRidge(tk_kernel(h, dtype, device), alpha=h["noise"], solver="cg",
                           n_centers=min(a.pcg_centers, a.n), tol=a.krr_tol, random_state=0,
                           backend=a.backend).fit(X, y)
    pred = model.predict(Xt)
    sync(device)
    dt = time.perf_counter() - t
    other = load_pred(a, "exact-gp")
    diff = "" if other is None else f"; max |pred - exact-gp's| {float((pred - other.to(pred)).abs().max()):.1e}"
    return dict(seconds=dt, rmse=rmse(pred, test),
                info=f"Nyström-PCG m = {min(a.pcg_centers, a.n)}, tol {a.krr_tol}, {model.n_iter_} it{diff}")


def row_gpytorch(a, device, dtype, warm, keops: bool):
    import gpytorch
    import torch
    X, y, Xt, test = load(a.n, device, dtype, a.data)
    h = warm["hyper"]

    class Model(gpytorch.models.ExactGP):
        def __init__(self, X, y, lik):
            super().__init__(X, y, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            base = (gpytorch.kernels.keops.RBFKernel if keops else gpytorch.kernels.RBFKernel)(ard_num_dims=D)
            self.covar_module = gpytorch.kernels.ScaleKernel(base)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    lik = gpytorch.likelihoods.GaussianLikelihood().to(device=device, dtype=dtype)
    model = Model(X, y, lik).to(device=device, dtype=dtype)
    lik.noise = h["noise"]
    model.covar_module.outputscale = h["outputscale"]
    model.covar_module.base_kernel.lengthscale = torch.tensor(h["lengthscale"], dtype=dtype, device=device)
    t = time.perf_counter()
    model.train()
    lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    for _ in range(a.finish_steps):
        opt.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        opt.step()
    model.eval()
    lik.eval()
    with torch.no_grad():
        pred = model(Xt).mean
    sync(device)
    dt = time.perf_counter() - t
    ls = model.covar_module.base_kernel.lengthscale.detach().reshape(-1)
    return dict(seconds=dt, rmse=rmse(pred, test),
                hyper=dict(lengthscale=[round(float(v), 4) for v in ls],
                           outputscale=round(float(model.covar_module.outputscale), 4),
                           noise=round(float(lik.noise), 5)),
                info=f"{a.finish_steps} Adam steps, GPyTorch {gpytorch.__version__} defaults")


def pred_path(a, row):
    return os.path.join(a.workdir, f"pred-{row}-{a.n}.pt")


def save_pred(a, pred):
    import torch
    torch.save(pred.detach().cpu(), pred_path(a, a.child))


def load_pred(a, row):
    import torch
    p = pred_path(a, row)
    return torch.load(p) if os.path.exists(p) else None


def child(a) -> None:
    import warnings
    import torch
    import torchkern as tk
    warnings.simplefilter("ignore")
    device = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    if a.threads > 0:  # on a shared CPU, parallel regions wait for descheduled threads
        torch.set_num_threads(a.threads)
    if a.triton_auto:
        tk.config.triton_auto = True
    warm = None
    if a.child != "warm":
        with open(os.path.join(a.workdir, "warm.json")) as fh:
            warm = json.load(fh)
    final_path = os.path.join(a.workdir, f"final-{a.n}.json")
    final = json.load(open(final_path)) if os.path.exists(final_path) else None
    if a.child == "warm":
        out = row_warm(a, device, dtype)
    elif a.child == "exact-gp":
        out = row_exact_gp(a, device, dtype, warm)
        with open(final_path, "w") as fh:
            json.dump(out["hyper"], fh)
    elif a.child == "dense-check":
        out = row_dense_check(a, device, dtype, warm, final)
    elif a.child == "nystrom":
        out = row_nystrom(a, device, dtype, warm, final)
    elif a.child == "krr-pcg":
        out = row_krr_pcg(a, device, dtype, warm, final)
    elif a.child in ("gpytorch", "gpytorch-keops"):
        out = row_gpytorch(a, device, dtype, warm, keops=a.child == "gpytorch-keops")
    else:
        raise ValueError(f"unknown row {a.child!r}")
    if device.type == "cuda":
        out["peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
    print("ROW " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------
# the parent: ladders of sizes under caps
# ------------------------------------------------------------------------------------

def run_row(a, row, n, cap, workdir):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", row, "--n", str(n), "--workdir", workdir]
    for k in ("device", "data", "dtype", "threads", "subset", "warm_iter", "finish_steps",
              "finish_max_n", "train_tol", "tol", "krr_tol", "probes", "final_probes",
              "lr", "centers", "pcg_centers", "backend"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(a, k))]
    if a.triton_auto:
        cmd.append("--triton-auto")
    t = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=max(cap, 1.0))
    except subprocess.TimeoutExpired:
        return dict(status=f"stopped at the {cap:.0f} s cap"), time.perf_counter() - t
    wall = time.perf_counter() - t
    for line in res.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:]), wall
    tail = (res.stderr.strip().splitlines() or ["?"])[-1][:160]
    return dict(status=f"failed (rc {res.returncode}): {tail}"), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--data", choices=sorted(DATA), default="sines")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--rows", nargs="+", default=["exact-gp", "dense-check", "nystrom", "krr-pcg",
                                                  "gpytorch", "gpytorch-keops"])
    ap.add_argument("--caps", type=json.loads, default={},
                    help='JSON {row: seconds} overriding --cap per row, e.g. \'{"exact-gp": 200}\'')
    ap.add_argument("--cap", type=float, default=120.0, help="seconds per row, all its sizes together")
    ap.add_argument("--budget", type=float, default=3600.0, help="seconds for all rows after the warm start")
    ap.add_argument("--row-sizes", type=json.loads, default={},
                    help='JSON {row: [n, ...]} overriding --sizes per row')
    ap.add_argument("--finish-max-n", type=int, default=10**9,
                    help="Adam finishing steps only up to this n; above it the warm-start "
                         "hyperparameters are kept and only the posterior uses all points")
    ap.add_argument("--warm-cap", type=float, default=60.0)
    ap.add_argument("--subset", type=int, default=10_000, help="warm-start subset (Wang et al.: 10,000)")
    ap.add_argument("--warm-iter", type=int, default=50, help="L-BFGS-B iterations on the subset")
    ap.add_argument("--finish-steps", type=int, default=3, help="Adam steps on all points")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--train-tol", type=float, default=0.1, help="CG tolerance while training")
    ap.add_argument("--tol", type=float, default=1e-3, help="CG tolerance of the final posterior")
    ap.add_argument("--krr-tol", type=float, default=1e-3)
    ap.add_argument("--probes", type=int, default=10, help="SLQ probes while training")
    ap.add_argument("--final-probes", type=int, default=4,
                    help="SLQ probes of the final fit (its log p(y) estimate only; the posterior "
                         "mean does not depend on them)")
    ap.add_argument("--centers", type=int, default=2000, help="Nyström baseline centres")
    ap.add_argument("--pcg-centers", type=int, default=1000, help="Nyström preconditioner centres")
    ap.add_argument("--dense-max", type=int, default=20_000, help="largest n of dense-check")
    ap.add_argument("--backend", default="auto", help="torchkern Gram backend (auto, triton, ...)")
    ap.add_argument("--triton-auto", action="store_true",
                    help="torchkern.config.triton_auto = True (auto picks the Triton engine on CUDA)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads in each row (0: as is)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    import torch
    from _util import device_name
    dev = device_name(a.device) if a.device != "cuda" or torch.cuda.is_available() else "cuda (unavailable)"
    print(f"device: {dev} | torch {torch.__version__} | load {load_average()}", flush=True)
    print(f"data {a.data}, d = {D}, {a.dtype}, n_test = {N_TEST}; warm start on {a.subset:,} points, "
          f"{a.finish_steps} Adam steps on all (CG tol {a.train_tol}), posterior at CG tol {a.tol}; "
          f"backend {a.backend}{' (triton_auto)' if a.triton_auto else ''}", flush=True)
    workdir = tempfile.mkdtemp(prefix="gp-million-")
    rows = []

    def record(row, n, out, wall):
        r = dict(row=row, n=f"{n:,}", seconds=f"{out['seconds']:.1f}" if "seconds" in out else "-",
                 rmse_y=f"{out['rmse'][0]:.4f}" if "rmse" in out else "-",
                 rmse_f=f"{out['rmse'][1]:.4f}" if "rmse" in out else "-",
                 peak_mb=out.get("peak_mb", ""), load=f"{os.getloadavg()[0]:.2f}",
                 note=out.get("status") or out.get("info", ""))
        rows.append(r)
        print(f"[{row} n={n:,}] wall {wall:.1f} s | " + json.dumps(out), flush=True)

    a.n = a.subset
    out, wall = run_row(a, "warm", a.subset, a.warm_cap, workdir)
    record("warm", a.subset, out, wall)
    if "hyper" not in out:
        print("the warm start failed: nothing else can run")
    else:
        with open(os.path.join(workdir, "warm.json"), "w") as fh:
            json.dump(out, fh)
        end = time.perf_counter() + a.budget
        for row in a.rows:  # row-major: the rows named first get the time first
            left = a.caps.get(row, a.cap)
            last = None
            for n in sorted(a.row_sizes.get(row, a.sizes)):
                if row == "dense-check" and n > a.dense_max:
                    continue
                if row == "gpytorch-keops" and not _keops_cuda_ok(a.device):
                    rows.append(dict(row=row, n="-", note="KeOps does not run here (see bench/keops_probe.py)"))
                    break
                cap = min(left, end - time.perf_counter())
                why = None
                if last is not None:
                    n0, t0, failed = last
                    guess = t0 * (n / n0) ** 2  # O(n²) kernel evaluations per product
                    if failed:
                        why = "failed below"
                    elif guess > 2 * cap:  # clearly out of reach; otherwise the cap decides
                        why = f"~{guess:.0f} s expected, {cap:.0f} s left"
                if why is None and cap < 5:
                    why = "no time left"
                if why:
                    rows.append(dict(row=row, n=f"{n:,}", note=f"skipped ({why})"))
                    continue
                out, wall = run_row(a, row, n, cap, workdir)
                left -= wall
                last = (n, wall, "seconds" not in out)
                record(row, n, out, wall)
    print(f"\n{dev}; load average at the end {load_average()}")
    table(rows, ["row", "n", "seconds", "rmse_y", "rmse_f", "peak_mb", "load", "note"])


def _keops_cuda_ok(device) -> bool:
    """torchkern's own verdict (a child-process check on CUDA): GPyTorch's KeOps kernel
    would crash the row the same way."""
    import torch
    if torch.device(device).type != "cuda":
        return False
    from torchkern import gram
    return gram.keops_available(device)


if __name__ == "__main__":
    main()
