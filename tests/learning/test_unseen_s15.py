"""Kernel learning on unusual-but-valid data, against dense references in numpy/SciPy."""
import itertools
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.spatial.distance import cdist

import torchkern
from torchkern.learning import learn_kernel
from torchkern.linalg import ConvergenceWarning

ALPHA = 0.05


def _loo_numpy(X, y, ls, alpha=ALPHA):
    """Mean squared leave-one-out residual of KRR, c_i / [(K + αI)⁻¹]_ii, dense numpy."""
    A = np.linalg.inv(np.exp(-0.5 * cdist(X / ls, X / ls) ** 2) + alpha * np.eye(len(y)))
    return np.mean((A @ y / np.diag(A)) ** 2)


@pytest.mark.parametrize("objective,scale", [("loo", 1e-2), ("gcv", 1e-3)])
def test_error_objectives_learn_the_same_kernel_whatever_the_units_of_y(objective, scale):
    # The LOO / GCV errors are in y's units squared: with y scaled by 0.01 the LOO was
    # 1.8e-5 at the start ℓ = 3, below SciPy's absolute tests, and L-BFGS-B stopped there
    # "converged" (15 times the optimum 1.2e-6 at ℓ = 0.75), silently.
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 1))
    y = (np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=40)) * scale

    def gcv_numpy(ls):
        A = np.linalg.inv(np.exp(-0.5 * cdist(X / ls, X / ls) ** 2) + ALPHA * np.eye(40))
        return 40 * np.sum((A @ y) ** 2) / np.trace(A) ** 2

    f = {"loo": lambda ls: _loo_numpy(X, y, ls), "gcv": gcv_numpy}[objective]
    ref = minimize_scalar(lambda t: f(np.exp(t)), bounds=(-3, 3), method="bounded",
                          options={"xatol": 1e-9})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = learn_kernel(torchkern.KernelRidge(torchkern.RBF(3.0), alpha=ALPHA),
                             torch.tensor(X), torch.tensor(y), objective)
    ls = float(model.kernel.lengthscale.detach())
    res = model.learn_kernel_result_
    assert res.converged
    assert ls == pytest.approx(np.exp(ref.x), rel=1e-4)
    # the result is in the objective's own units
    assert res.loss == pytest.approx(f(ls), rel=1e-9)
    assert res.history[0] == pytest.approx(f(3.0), rel=1e-9)
    assert res.loss <= ref.fun * (1 + 1e-9)


def test_alignf_weights_solve_the_alignment_qp():
    # alignf: v = argmin_{v >= 0} vᵀMv − 2vᵀa (Cortes, Mohri and Rostamizadeh 2012, Prop.
    # 10), η = v / Σv. A jitter 1e-10·tr M added to M always moved η by 4e-7 on kernels
    # this collinear (cond M = 2e4). Reference: the QP solved exactly by its active set — of
    # the 15 supports S, the one whose solution of M_SS v_S = a_S is ≥ 0 and whose gradient
    # 2(Mv − a) is ≥ 0 off S (KKT). (SciPy's L-BFGS-B, the reference before, stops ~1e-9
    # away, by an amount that differs between machines.)
    from torchkern.learning import alignf_weights
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=40) > 0, 1.0, -1.0)
    grams = [np.exp(-0.5 * cdist(X / ls, X / ls) ** 2) for ls in (0.3, 1.0, 3.0)] + [X @ X.T]
    H = np.eye(40) - 1 / 40
    Kc = [H @ K @ H for K in grams]
    M = np.array([[np.sum(A * B) for B in Kc] for A in Kc])
    a = np.array([y @ K @ y for K in Kc])
    kkt = []
    for S in (list(c) for r in range(1, 5) for c in itertools.combinations(range(4), r)):
        v = np.zeros(4)
        v[S] = np.linalg.solve(M[np.ix_(S, S)], a[S])
        off = np.setdiff1d(np.arange(4), S)
        if (v[S] > 0).all() and (M[off] @ v - a[off] >= -1e-12 * np.abs(a).max()).all():
            kkt.append(v)
    assert len(kkt) == 1 and np.count_nonzero(kkt[0]) == 3  # one solution, one weight at 0
    got = alignf_weights([torch.tensor(K) for K in grams], torch.tensor(y)).numpy()
    np.testing.assert_allclose(got, kkt[0] / kkt[0].sum(), rtol=0, atol=1e-12)
