"""nystrom_complexity_reg against its dense formula (numpy, explicit Q and inverses)."""
import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern.learning import nystrom_complexity_reg

F64 = torch.float64


def _dense(X, Y, Z, ls, lam):
    g = 1 / (2 * ls * ls)
    Knm, Kmm = rbf_kernel(X, Z, gamma=g), rbf_kernel(Z, Z, gamma=g)
    Q = Knm @ np.linalg.solve(Kmm, Knm.T)
    n = len(X)
    v = n * lam
    Ainv = np.linalg.inv(Q + v * np.eye(n))
    d_eff = np.trace(Q @ Ainv)
    fit = v * np.trace(Y.T @ Ainv @ Y)
    return d_eff + fit * (1 + (n - np.trace(Q)) / (v * n))  # tr K = n for the RBF


def test_complexity_reg_equals_the_dense_formula_and_has_gradients():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(80, 3, generator=g, dtype=F64)
    Y = torch.stack([torch.sin(X[:, 0]), X[:, 1] ** 2], 1)
    Z = X[:15].clone().requires_grad_()
    k = torchkern.RBF(1.3)
    lam = torch.tensor(1e-3, dtype=F64, requires_grad=True)
    val = nystrom_complexity_reg(k, X, Y, Z, lam, jitter=0.0)
    ref = _dense(X.numpy(), Y.numpy(), Z.detach().numpy(), 1.3, 1e-3)
    assert float(val.detach()) == pytest.approx(ref, rel=1e-8)
    # gradients against central differences of the dense formula
    val.backward()
    h = 1e-5
    hl = 1e-8  # λ = 1e-3: a step of 1e-5 would be 1 % of it
    d_lam = (_dense(X.numpy(), Y.numpy(), Z.detach().numpy(), 1.3, 1e-3 + hl)
             - _dense(X.numpy(), Y.numpy(), Z.detach().numpy(), 1.3, 1e-3 - hl)) / (2 * hl)
    assert float(lam.grad) == pytest.approx(d_lam, rel=1e-5)
    Zp, Zm = Z.detach().numpy().copy(), Z.detach().numpy().copy()
    Zp[2, 1] += h
    Zm[2, 1] -= h
    Xn, Yn = X.numpy(), Y.numpy()
    d_z = (_dense(Xn, Yn, Zp, 1.3, 1e-3) - _dense(Xn, Yn, Zm, 1.3, 1e-3)) / (2 * h)
    assert float(Z.grad[2, 1]) == pytest.approx(d_z, rel=1e-4)


def test_complexity_reg_rejects_bad_penalty():
    X = torch.randn(10, 2, dtype=F64)
    with pytest.raises(ValueError, match="penalty"):
        nystrom_complexity_reg(torchkern.RBF(), X, X[:, 0], X[:3], 0.0)
