"""torchkern.distributed on gloo CPU processes: products, solvers, gradients and estimators
on row-sharded data against dense linear algebra, scikit-learn and one process.

Each test forks its processes once and runs all its checks inside them (a few seconds on
two busy cores); every rank asserts, and a failure on any rank fails the test.
"""
import time

import numpy as np
import pytest
import torch
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

import torchkern
from torchkern import distributed as tkd
from torchkern.linalg import NystromPreconditioner, cg, eigsh, logdet, trace
from torchkern.stats import MMDTest

from tests._invariants import assert_close_up_to_sign

from ._spawn import spawn

F64 = torch.float64


def _rbf(A, B, ell):
    """exp(−‖a − b‖² / (2ℓ²)) by brute force: the reference for the sharded products."""
    return torch.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / (2 * ell ** 2))


def _data(n, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    y = X.sin().sum(1) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X.to(dtype), y.to(dtype)


def _sharded_kernel(kernel, **kw):
    """Products on this rank's rows of every vector (direct use; estimators resolve the
    default vectors='auto' themselves)."""
    return tkd.ShardedKernel(kernel, vectors="sharded", **kw)


def _my_rows(X, counts, rank):
    start = sum(counts[:rank])
    return X[start:start + counts[rank]]


# --------------------------------------------------------------------------------------
# float64, 3 ranks of 0, 23 and 37 rows
# --------------------------------------------------------------------------------------

def _products_and_solvers(rank, world):
    counts = [0, 23, 37]
    X, _ = _data(60, 3, F64)
    Z = torch.randn(9, 3, dtype=F64, generator=torch.Generator().manual_seed(1))
    V = torch.randn(60, 2, dtype=F64, generator=torch.Generator().manual_seed(2))
    mine = slice(sum(counts[:rank]), sum(counts[:rank + 1]))
    Xs = tkd.ShardedInput(_my_rows(X, counts, rank))
    assert len(Xs) == 60 and Xs.shape == (60, 3) and Xs.sharding.counts == counts
    D = _rbf(X, X, 0.8)
    for backend in ("dense", "blocked"):
        K = _sharded_kernel(torchkern.RBF(0.8))(Xs, backend=backend)
        assert K.shape == (60, 60) and K.local_rows == counts[rank]
        # sharded vectors: this rank's rows in, this rank's rows of K V out
        torch.testing.assert_close(K @ V[mine], (D @ V)[mine], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(K @ V[mine, 0], (D @ V[:, 0])[mine], rtol=1e-12,
                                   atol=1e-12)
    with pytest.raises(ValueError, match=f"this rank's {counts[rank]} rows"):
        K @ V
    # the default vectors="auto" holds them whole outside KernelRidge: says so
    with pytest.raises(ValueError, match="whole on every rank.*vectors='sharded'"):
        tkd.ShardedKernel(torchkern.RBF(0.8))(Xs) @ V[mine]
    torch.testing.assert_close(tkd.ShardedKernel(torchkern.RBF(0.8))(Xs) @ V, D @ V)
    torch.testing.assert_close(K.diag(), D.diagonal()[mine])
    torch.testing.assert_close(K.cols([3, 59, 0]), D[mine][:, [3, 59, 0]])
    torch.testing.assert_close(K.rows([41, 2]), D[[41, 2]])
    torch.testing.assert_close(K.submatrix([5, 30], [1, 50]), D[[5, 30]][:, [1, 50]])
    torch.testing.assert_close(K.to_dense(), D[mine])
    torch.testing.assert_close(K.add_diag(0.5) @ V[mine], (D @ V + 0.5 * V)[mine])
    torch.testing.assert_close(K.add_diag(0.5).cols([0, 30]),
                               (D + 0.5 * torch.eye(60, dtype=F64))[mine][:, [0, 30]])
    H = torch.eye(60, dtype=F64) - 1 / 60
    torch.testing.assert_close(K.centered() @ V[mine], (H @ D @ H @ V)[mine])
    torch.testing.assert_close(K.centered().diag(), (H @ D @ H).diagonal()[mine])
    # rectangular: sharded rows against replicated centres, and its transpose
    R = _sharded_kernel(torchkern.RBF(0.8))(Xs, Z)
    torch.testing.assert_close(R @ V[:9], (_rbf(X, Z, 0.8) @ V[:9])[mine])
    torch.testing.assert_close(R.T @ V[mine], _rbf(Z, X, 0.8) @ V)
    T = _sharded_kernel(torchkern.RBF(0.8))(Z, Xs)  # replicated rows, sharded columns
    torch.testing.assert_close(T @ V[mine], _rbf(Z, X, 0.8) @ V)
    # rectangular diagonals in one collective, and K.T of a sharded pair under "auto"
    torch.testing.assert_close(R.replicated().diag(), _rbf(X, Z, 0.8).diagonal())
    torch.testing.assert_close(T.diag(), _rbf(Z, X, 0.8).diagonal())
    Xs2 = tkd.ShardedInput(_my_rows(X[:40] + 0.5, [10, 15, 15], rank))  # Linear, "auto":
    # a factored local block
    L = _sharded_kernel(torchkern.Linear())(Xs, Xs2)
    torch.testing.assert_close(L.T.replicated().to_dense(), (X[:40] + 0.5) @ X.T)
    # the replicated mode: whole vectors in and out
    Kr = K.replicated()
    torch.testing.assert_close(Kr @ V, D @ V, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(Kr.diag(), D.diagonal())
    torch.testing.assert_close(Kr.cols([3, 59]), D[:, [3, 59]])
    torch.testing.assert_close(Kr.to_dense(), D)
    # solvers on sharded vectors: dense references
    A = K.add_diag(0.1)
    Ad = D + 0.1 * torch.eye(60, dtype=F64)
    ref_x = torch.linalg.solve(Ad, V)
    x, info = cg(A, V[mine], tol=1e-12, return_info=True)
    torch.testing.assert_close(x, ref_x[mine], rtol=1e-9, atol=1e-9)
    one = cg(Ad, V, tol=1e-12, return_info=True)[1]  # one process, same iterations
    assert info.iterations == one.iterations
    pc = NystromPreconditioner(K, 20, 0.1, random_state=0)
    pc1 = NystromPreconditioner(D, 20, 0.1, random_state=0)
    torch.testing.assert_close(pc(V[mine]), pc1(V)[mine], rtol=1e-9, atol=1e-10)
    xp, infop = cg(A, V[mine], preconditioner=pc, tol=1e-12, return_info=True)
    torch.testing.assert_close(xp, ref_x[mine], rtol=1e-9, atol=1e-9)
    assert infop.iterations < info.iterations
    evals, evecs = eigsh(K, 4, random_state=0, ncv=20)
    e1, v1 = eigsh(_Operator(D), 4, random_state=0, ncv=20)  # one process, Lanczos too
    ref = torch.linalg.eigh(D)
    torch.testing.assert_close(evals, ref.eigenvalues[-4:].flip(0), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(evals, e1, rtol=1e-12, atol=1e-12)
    # the eigenvectors up to sign (simple eigenvalues), one sign per whole vector: this
    # rank's rows summed into the full vectors on every rank
    full = torch.zeros(60, 4, dtype=F64)
    full[mine] = evecs
    torch.distributed.all_reduce(full)
    assert_close_up_to_sign(full, v1, rtol=1e-8, atol=1e-9)
    ld = logdet(A, method="slq", num_probes=200, lanczos_steps=40, random_state=0)
    ld1 = logdet(_Operator(Ad), method="slq", num_probes=200, lanczos_steps=40,
                 random_state=0)
    torch.testing.assert_close(ld, ld1, rtol=1e-10, atol=1e-10)  # same probes, one process
    assert abs(float(ld) - float(torch.logdet(Ad))) < 0.05 * abs(float(torch.logdet(Ad)))
    torch.testing.assert_close(trace(A), Ad.diagonal().sum())
    # identical iterates: every rank holds bit-identical scalars
    every = [torch.empty_like(evals) for _ in range(world)]
    torch.distributed.all_gather(every, evals.contiguous())
    assert all(torch.equal(e, evals) for e in every)
    # gradients of a sharded quadratic form vᵀ(K + λI)⁻¹v and vᵀKv (hyperparameters):
    # each rank's share of the sum, all-reduced, is the loss
    for quad in ("Kv", "solve"):
        ks = torchkern.ScaleKernel(torchkern.RBF(0.8), 1.5)
        k1 = torchkern.ScaleKernel(torchkern.RBF(0.8), 1.5)
        v = V[:, 0]
        Ks, K1 = _sharded_kernel(ks)(Xs, backend="blocked"), k1(X, backend="blocked")
        if quad == "Kv":
            qs, q1 = v[mine] @ (Ks @ v[mine]), v @ (K1 @ v)
        else:
            qs = v[mine] @ cg(Ks.add_diag(0.1), v[mine], tol=1e-12)
            q1 = v @ torch.linalg.solve(K1.to_dense() + 0.1 * torch.eye(60, dtype=F64), v)
        qs = Ks.reduce_sum(qs)
        torch.testing.assert_close(qs, q1, rtol=1e-10, atol=1e-12)
        gs = torch.autograd.grad(qs, list(ks.parameters()))
        g1 = torch.autograd.grad(q1, list(k1.parameters()))
        for a, b in zip(gs, g1):
            torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


class _Operator:
    """A dense matrix known only through @: the one-process run of the iterative path."""

    def __init__(self, D):
        self.D, self.shape, self.dtype, self.device = D, D.shape, D.dtype, D.device

    def __matmul__(self, V):
        return self.D @ V


def _estimators(rank, world):
    counts = [0, 23, 37]
    X, y = _data(60, 2, F64)
    Xt = torch.randn(7, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    Xs = tkd.ShardedInput(_my_rows(X, counts, rank))

    mine = slice(sum(counts[:rank]), sum(counts[:rank + 1]))

    def sharded(vectors="replicated"):
        return tkd.ShardedKernel(torchkern.RBF(1.0), vectors=vectors)

    # KernelRidge on sharded vectors: CG (Nyström-preconditioned) against scikit-learn
    # (exact), its dual coefficients kept sharded; Nyström against one process
    kw = dict(alpha=0.1, random_state=0, tol=1e-11)
    a = torchkern.KernelRidge(sharded("sharded"), solver="cg", n_centers=20, **kw).fit(
        Xs, y[mine])
    sk = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=0.5).fit(X.numpy(), y.numpy())
    np.testing.assert_allclose(a.dual_coef_.numpy(), sk.dual_coef_[mine], rtol=1e-8,
                               atol=1e-9)
    np.testing.assert_allclose(a.predict(Xt).numpy(), sk.predict(Xt.numpy()), rtol=1e-8,
                               atol=1e-9)
    for keep in (None, "blocked"):  # K_nm rows stored, and evaluated at every iteration
        kw["backend"] = keep
        a = torchkern.KernelRidge(sharded("sharded"), solver="nystrom", n_centers=20,
                                  **kw).fit(Xs, y[mine])
        b = torchkern.KernelRidge(torchkern.RBF(1.0), solver="nystrom", n_centers=20,
                                  **kw).fit(X, y)
        torch.testing.assert_close(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(a.predict(Xt), b.predict(Xt), rtol=1e-9, atol=1e-9)
        assert abs(a.n_iter_ - b.n_iter_) <= 1  # rounding at the stopping threshold
    # GP, KernelPCA and MMDTest read whole vectors: the replicated mode
    # GP: predictions, std and log marginal likelihood (SLQ, same probes) = one process;
    # the mean also = the closed form K*(K + σ²I)⁻¹y
    kw = dict(noise=0.1, method="cg", random_state=0, tol=1e-11)
    a = torchkern.GaussianProcessRegressor(sharded(), **kw).fit(Xs, y[mine])
    b = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), **kw).fit(X, y)
    ma, sa = a.predict(Xt, return_std=True)
    mb, sb = b.predict(Xt, return_std=True)
    A = _rbf(X, X, 1.0) + 0.1 * torch.eye(60, dtype=F64)
    closed = _rbf(Xt, X, 1.0) @ torch.linalg.solve(A, y)
    torch.testing.assert_close(ma, closed, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(sa, sb, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(a.log_marginal_likelihood(), b.log_marginal_likelihood(),
                               rtol=1e-9, atol=1e-9)
    # learning the hyperparameters: all-reduced gradients give the one-process path
    kw["tol"] = 1e-9
    a = torchkern.GaussianProcessRegressor(sharded(), **kw).fit(Xs, y[mine], optimize=True,
                                                                n_iter=4)
    b = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), **kw).fit(X, y, optimize=True,
                                                                        n_iter=4)
    assert abs(a.kernel_.base.lengthscale.item() - b.kernel_.lengthscale.item()) < 1e-6
    assert abs(a.noise_ - b.noise_) < 1e-6
    # KernelPCA (Lanczos) = one process; transform of replicated test points
    kw = dict(n_components=3, eigen_solver="lanczos", random_state=0, tol=1e-11)
    a = torchkern.KernelPCA(sharded(), **kw).fit(Xs)
    b = torchkern.KernelPCA(torchkern.RBF(1.0), **kw).fit(X)
    torch.testing.assert_close(a.eigenvalues_, b.eigenvalues_, rtol=1e-9, atol=1e-9)
    # the same signs too: KernelPCA fixes them (the largest entry of each eigenvector
    # positive) on the whole eigenvectors, which "replicated" holds on every rank
    torch.testing.assert_close(a.transform(Xt), b.transform(Xt), rtol=1e-7, atol=1e-8)
    # MMDTest: two sharded samples pooled without moving rows; same statistic and null
    Y = torch.randn(40, 2, dtype=F64, generator=torch.Generator().manual_seed(4)) + 0.3
    Ys = tkd.ShardedInput(tkd.shard_rows(Y))
    ra = MMDTest(sharded(), n_permutations=50, random_state=0).test(Xs, Ys)
    rb = MMDTest(torchkern.RBF(1.0), n_permutations=50, random_state=0).test(X, Y)
    torch.testing.assert_close(ra.statistic, rb.statistic, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ra.null_distribution, rb.null_distribution, rtol=1e-10,
                               atol=1e-12)
    assert ra.p_value == rb.p_value


def test_products_solvers_and_gradients_float64():
    spawn(_products_and_solvers, 3)


def test_estimators_equal_one_process():
    spawn(_estimators, 3)


# --------------------------------------------------------------------------------------
# float32, 2 ranks of 30 and 31 rows
# --------------------------------------------------------------------------------------

def _float32(rank, world):
    X, y = _data(61, 3, torch.float32)
    Xs = tkd.ShardedInput(tkd.shard_rows(X))
    assert Xs.sharding.counts == [30, 31] and Xs.dtype == torch.float32
    K = _sharded_kernel(torchkern.RBF(1.2))(Xs, backend="blocked")
    D = _rbf(X.double(), X.double(), 1.2)
    mine = slice(0, 30) if rank == 0 else slice(30, 61)
    V = torch.randn(61, 3, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close((K @ V[mine]).double(), (D @ V.double())[mine], rtol=1e-5,
                               atol=1e-5)
    x = cg(K.add_diag(0.1), y[mine], tol=1e-5)  # mixed-precision refinement, sharded
    ref = torch.linalg.solve(D + 0.1 * torch.eye(61, dtype=F64), y.double())
    err = K.reduce_sum(((x.double() - ref[mine]) ** 2).sum()).sqrt()
    assert float(err / ref.norm()) < 1e-4
    kw = dict(alpha=0.1, solver="cg", random_state=0, tol=1e-5)
    a = torchkern.KernelRidge(tkd.ShardedKernel(torchkern.RBF(1.2)), **kw).fit(Xs, y[mine])
    b = torchkern.KernelRidge(torchkern.RBF(1.2), **kw).fit(X, y)
    assert a.dual_coef_.dtype == torch.float32
    torch.testing.assert_close(a.predict(X[:5]), b.predict(X[:5]), rtol=1e-4, atol=1e-4)


def test_float32_uneven_shards():
    spawn(_float32, 2)


# --------------------------------------------------------------------------------------
# Failures raise on every rank
# --------------------------------------------------------------------------------------

def _failures(rank, world, timeout):
    X, _ = _data(20, 2, F64)
    # invalid rows on one rank: every rank raises, naming it
    local = tkd.shard_rows(X).clone()
    if rank == 1:
        local[0, 0] = float("nan")
    with pytest.raises(tkd.RankFailedError, match="rank 1 raised ValueError.*NaN"):
        tkd.ShardedInput(local)
    # a rank whose local evaluation raises inside a product
    Xs = tkd.ShardedInput(tkd.shard_rows(X))
    ones = torch.ones(Xs.sharding.n_local, dtype=F64)
    K = _sharded_kernel(torchkern.RBF(1.0))(Xs, backend="blocked")
    if rank == 0:
        def broken(V):
            raise MemoryError("out of memory in the row block")
        K.local._matmul = broken
    with pytest.raises(tkd.RankFailedError, match="rank 0 raised MemoryError"):
        K @ ones
    # the group still works afterwards
    K.local = _sharded_kernel(torchkern.RBF(1.0))(Xs, backend="blocked").local
    torch.testing.assert_close(K @ ones, tkd.shard_rows(_rbf(X, X, 1.0).sum(1)))
    # a rank that stops answering: the others raise within the process-group timeout
    if rank == 1:
        time.sleep(timeout + 3)
        return
    start = time.monotonic()
    with pytest.raises(tkd.RankFailedError, match="timeout"):
        K @ ones
    assert time.monotonic() - start < timeout + 10


def test_failing_rank_raises_on_all_ranks():
    spawn(_failures, 2, 3.0, timeout=3.0)


def test_example_runs_under_torchrun():
    """examples/distributed_krr.py as documented: torchrun, 2 processes; its predictions
    equal the one-process model's."""
    import os
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "examples", "distributed_krr.py")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node=2", script],
                         capture_output=True, text=True, timeout=120, cwd=root)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "2 ranks, rows per rank [1000, 1000]" in res.stdout
    diff = float(re.search(r"one process: (\S+)", res.stdout).group(1))
    assert diff < 1e-8


# --------------------------------------------------------------------------------------
# Targets of each rank, defaults that work on sharded data, failures named in seconds
# --------------------------------------------------------------------------------------

def _strided_targets_and_defaults(rank, world):
    """Rows taken as X[rank::2] (not the contiguous blocks a whole y would be cut into)
    with each rank's own targets: the fits equal one process on (X, y)."""
    X, y = _data(80, 2, F64)
    Xt = torch.randn(6, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    w = torch.rand(80, dtype=F64, generator=torch.Generator().manual_seed(6)) + 0.5
    mine = slice(rank, None, 2)
    Xs = tkd.ShardedInput(X[mine])
    kernel = tkd.ShardedKernel(torchkern.RBF(1.0))  # vectors="auto"
    # KernelRidge, solver "auto": CG on the sharded vectors; dense reference
    A = _rbf(X, X, 1.0) + 0.1 * torch.eye(80, dtype=F64)
    ref = _rbf(Xt, X, 1.0) @ torch.linalg.solve(A, y)
    a = torchkern.KernelRidge(kernel, alpha=0.1, tol=1e-10, random_state=0).fit(Xs, y[mine])
    assert a.solver_ == "cg" and a.dual_coef_.shape == (40,)
    torch.testing.assert_close(a.predict(Xt), ref, rtol=1e-7, atol=1e-7)
    # the one-process fit (its own solver "auto": Cholesky)
    one = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.1).fit(X, y)
    torch.testing.assert_close(a.predict(Xt), one.predict(Xt), rtol=1e-7, atol=1e-7)
    # each rank's own sample weights; Nystrom (same centres only in the same global order:
    # rows= gives it) with whole targets and weights, matched by rows=
    a = torchkern.KernelRidge(kernel, alpha=0.1, tol=1e-10, random_state=0).fit(
        Xs, y[mine], sample_weight=w[mine])
    one = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.1).fit(X, y, sample_weight=w)
    torch.testing.assert_close(a.predict(Xt), one.predict(Xt), rtol=1e-7, atol=1e-7)
    Xr = tkd.ShardedInput(X[mine], rows=slice(rank, None, 2))
    # a reversed order (a negative step) is a permutation too; a bad slice on one rank
    # fails every rank instead of leaving the other waiting in the exchange
    rev = tkd.ShardedInput(X.flip(0)[mine], rows=slice(79 - rank, None, -2))
    assert rev.sharding.positions.tolist() == list(range(79, -1, -2)) + list(range(78, -1, -2))
    with pytest.raises(tkd.RankFailedError, match="rank 1 raised ValueError: rows: slice step"):
        tkd.ShardedInput(X[mine], rows=slice(rank, None, 0 if rank == 1 else 2))
    kw = dict(alpha=0.1, solver="nystrom", n_centers=30, tol=1e-10, random_state=0)
    a = torchkern.KernelRidge(kernel, **kw).fit(Xr, y, sample_weight=w)
    b = torchkern.KernelRidge(torchkern.RBF(1.0), **kw).fit(X, y, sample_weight=w)
    torch.testing.assert_close(a.predict(Xt), b.predict(Xt), rtol=1e-9, atol=1e-9)
    # a whole y without rows=: ambiguous, a ValueError on every rank (the group stays usable)
    with pytest.raises(ValueError, match="whole data set.*rows="):
        torchkern.KernelRidge(kernel, alpha=0.1).fit(Xs, y)
    # one rank's targets of a wrong length: that rank's ValueError, RankFailedError elsewhere
    bad = y[mine][:-1] if rank == 1 else y[mine]
    err = ValueError if rank == 1 else tkd.RankFailedError
    with pytest.raises(err, match="39 rows" if rank == 1 else "rank 1 raised ValueError"):
        torchkern.KernelRidge(kernel, alpha=0.1).fit(Xs, bad)
    # solver="cholesky" cannot run on sharded vectors: says what to use
    with pytest.raises(ValueError, match="solver='cholesky'.*solver='cg'"):
        torchkern.KernelRidge(tkd.ShardedKernel(torchkern.RBF(1.0), vectors="sharded"),
                              solver="cholesky").fit(Xs, y[mine])
    # ... but under vectors="auto" it factors the whole matrix on every rank
    a = torchkern.KernelRidge(kernel, alpha=0.1, solver="cholesky").fit(Xs, y[mine])
    torch.testing.assert_close(a.predict(Xt), ref, rtol=1e-9, atol=1e-9)
    # GaussianProcessRegressor with every default: mean, std, log marginal likelihood
    a = torchkern.GaussianProcessRegressor(kernel).fit(Xs, y[mine])
    b = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0)).fit(X, y)
    for u, v in zip(a.predict(Xt, return_std=True), b.predict(Xt, return_std=True)):
        torch.testing.assert_close(u, v, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(a.log_marginal_likelihood(), b.log_marginal_likelihood(),
                               rtol=1e-9, atol=1e-9)
    # a classifier with each rank's own NumPy string labels (replicated vectors under
    # "auto"): SMO to a tight tolerance, the one-process decision values
    labels = np.where(y.numpy() > 0, "pos", "neg")
    a = torchkern.SVC(kernel, tol=1e-9).fit(Xs, labels[mine])
    b = torchkern.SVC(torchkern.RBF(1.0), tol=1e-9).fit(X, labels)
    assert list(a.classes_) == ["neg", "pos"]
    torch.testing.assert_close(a.decision_function(Xt), b.decision_function(Xt), rtol=1e-6,
                               atol=1e-6)
    # HSIC on paired samples: the other sample as each rank's own rows, or sharded alike
    from torchkern.stats import HSICTest
    Y2 = X.sin() + 0.1 * torch.randn(80, 2, dtype=F64, generator=torch.Generator().manual_seed(7))
    hsic = dict(n_permutations=20, random_state=0)
    ref = HSICTest(torchkern.RBF(1.0), torchkern.RBF(1.0), **hsic).test(X, Y2).statistic
    for other in (Y2[mine], tkd.ShardedInput(Y2[mine])):
        r = HSICTest(kernel, tkd.ShardedKernel(torchkern.RBF(1.0)), **hsic).test(Xs, other)
        torch.testing.assert_close(r.statistic, ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="Y has the length of the whole data set"):
        HSICTest(kernel, torchkern.RBF(1.0), **hsic).test(Xs, Y2)
    # an estimator that reads whole vectors, given vectors="sharded": says what to use
    with pytest.raises(ValueError, match="vectors='sharded'.*vectors='auto'"):
        torchkern.GaussianProcessRegressor(tkd.ShardedKernel(torchkern.RBF(1.0),
                                                             vectors="sharded")).fit(Xs, y[mine])
    # learn_kernel on sharded data: the same learned lengthscale and predictions
    kw = dict(alpha=0.1, tol=1e-10, random_state=0)
    learn = {"objective": "loo", "n_iter": 5}
    a = torchkern.KernelRidge(kernel, **kw).fit(Xs, y[mine], learn_kernel=learn)
    b = torchkern.KernelRidge(torchkern.RBF(1.0), **kw).fit(X, y, learn_kernel=learn)
    assert abs(b.kernel_.lengthscale.item() - 1.0) > 1e-3  # it did learn something
    assert abs(a.kernel_.base.lengthscale.item() - b.kernel_.lengthscale.item()) < 1e-9
    torch.testing.assert_close(a.predict(Xt), b.predict(Xt), rtol=1e-7, atol=1e-7)


def test_strided_shards_local_targets_and_defaults():
    spawn(_strided_targets_and_defaults, 2)


def _unprotected_failure(rank, world, timeout):
    """Rank 1 raises in estimator code between collectives (an invalid alpha, checked
    after the targets are gathered) and stays alive: rank 0, already in the Gram
    matrix's collective, raises naming it within seconds, not after the timeout."""
    X, y = _data(40, 2, F64)
    Xs = tkd.ShardedInput(tkd.shard_rows(X))
    ys = tkd.shard_rows(y)
    kernel = tkd.ShardedKernel(torchkern.RBF(1.0))
    store = torch.distributed.distributed_c10d._get_default_store()
    # an error every rank raises at the same point (a whole y without rows=) leaves the
    # ranks in step: its reports must not fail a later fit in which a rank is slow
    with pytest.raises(ValueError, match="whole data set"):
        torchkern.KernelRidge(kernel, alpha=0.1).fit(Xs, y)
    if rank == 1:
        time.sleep(1.5)  # rank 0 waits in a collective for longer than a wait slice
    a = torchkern.KernelRidge(kernel, alpha=0.1, tol=1e-10, random_state=0).fit(Xs, ys)
    one = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.1).fit(X, y)
    torch.testing.assert_close(a.predict(X[:5]), one.predict(X[:5]), rtol=1e-7, atol=1e-7)
    if rank == 1:
        with pytest.raises(ValueError, match="alpha must be finite"):
            torchkern.KernelRidge(kernel, alpha=-1.0).fit(Xs, ys)
        store.wait(["test/rank0-done"])  # alive until rank 0 has its error
        return
    start = time.monotonic()
    with pytest.raises(tkd.RankFailedError, match="rank 1 failed: ValueError: alpha must"):
        torchkern.KernelRidge(kernel, alpha=0.1).fit(Xs, ys)
    elapsed = time.monotonic() - start
    store.set("test/rank0-done", "1")
    assert elapsed < 4, f"{elapsed:.1f} s (timeout {timeout} s)"


def test_rank_failing_outside_a_collective_is_named_in_seconds():
    spawn(_unprotected_failure, 2, 20.0, timeout=20.0)


class _LateWork:
    """A gloo work whose first timed wait reports a time-out although the collective
    completes (it is waited for in full first): the race in which a work completes
    between a wait slice's time-out and the is_completed() check."""

    def __init__(self, work):
        self.work, self.slices = work, 0

    def wait(self, timeout=None):
        if timeout is not None and self.slices == 0:
            self.slices += 1
            self.work.wait()
            raise RuntimeError("Operation timed out!")
        return self.work.wait()

    def is_completed(self):
        return self.work.is_completed()


def _completed_after_slice(rank, world):
    from torchkern.distributed import _comm

    def late_all_reduce(*args, **kw):
        return _LateWork(torch.distributed.all_reduce(*args, **kw))

    flag = torch.tensor([rank + 1.0])
    _comm._collective(late_all_reduce, flag)
    assert flag.item() == 3.0


def test_collective_completing_as_a_wait_slice_ends_is_not_a_failure():
    spawn(_completed_after_slice, 2)
