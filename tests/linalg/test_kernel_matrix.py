"""linalg on torchkern's lazy KernelMatrix (blocked and KeOps backends) against dense."""

import torch

from torchkern.kernels import RBF
from torchkern.linalg import NystromPreconditioner, PivotedCholesky, cg, eigsh, inv_quad_logdet, logdet, trace

f64 = torch.float64


def _data(n, seed=0):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=f64)


def _kernel(ell):
    k = RBF(lengthscale=ell).double()
    return k


def test_preconditioners_read_the_lazy_matrix_like_a_tensor(rbf_gram):
    X = _data(400)
    K = _kernel(0.9)(X, backend="blocked")
    dense = rbf_gram(X, lengthscale=0.9)
    R = torch.randn(400, 2, generator=torch.Generator().manual_seed(1), dtype=f64)
    P_lazy, P_dense = PivotedCholesky(K, 30, 0.01), PivotedCholesky(dense, 30, 0.01)
    assert torch.equal(P_lazy.pivots, P_dense.pivots)
    torch.testing.assert_close(P_lazy(R), P_dense(R), rtol=1e-9, atol=0)
    N_lazy = NystromPreconditioner(K, 40, 0.01, random_state=3)
    N_dense = NystromPreconditioner(dense, 40, 0.01, random_state=3)
    torch.testing.assert_close(N_lazy(R), N_dense(R), rtol=1e-9, atol=0)


def test_cg_and_its_gradients_on_blocked_matrix(rbf_gram):
    n, lam = 400, 0.01
    X = _data(n, 2)
    B0 = torch.randn(n, 2, generator=torch.Generator().manual_seed(3), dtype=f64)

    k = _kernel(0.9)
    K = k(X, backend="blocked")
    P = PivotedCholesky(K, 100, lam)
    B = B0.clone().requires_grad_(True)
    sol, info = cg(K.add_diag(lam), B, preconditioner=P, tol=1e-10, return_info=True)
    assert info.converged and info.iterations < 60
    g_ell, g_B = torch.autograd.grad(sol.sum(), (k.raw_lengthscale, B))

    k_ref = _kernel(0.9)
    B_ref = B0.clone().requires_grad_(True)
    A_ref = rbf_gram(X, lengthscale=k_ref.lengthscale) + lam * torch.eye(n, dtype=f64)
    ref = torch.linalg.solve(A_ref, B_ref)
    r_ell, r_B = torch.autograd.grad(ref.sum(), (k_ref.raw_lengthscale, B_ref))

    torch.testing.assert_close(sol, ref, rtol=0, atol=1e-8 * ref.abs().max().item())
    torch.testing.assert_close(g_ell, r_ell, rtol=1e-6, atol=0)
    torch.testing.assert_close(g_B, r_B, rtol=0, atol=1e-7 * r_B.abs().max().item())


def test_eigsh_logdet_trace_on_blocked_matrix(rbf_gram):
    X = _data(600, 4) * torch.tensor([1.0, 0.7, 0.4], dtype=f64)
    k = _kernel(1.0)
    K = k(X, backend="blocked")
    dense = rbf_gram(X, lengthscale=1.0)

    ref_vals, ref_vecs = torch.linalg.eigh(dense)
    vals, vecs = eigsh(K, 5, random_state=0)  # n > 500: Lanczos on the lazy matrix
    torch.testing.assert_close(vals, ref_vals[-5:].flip(0), rtol=1e-8, atol=0)
    assert float((ref_vecs[:, -5:].flip(1) * vecs).sum(0).abs().min()) > 1 - 1e-8

    A = K.add_diag(0.1)
    torch.testing.assert_close(trace(A), dense.diagonal().sum() + 60.0)
    exact = torch.linalg.slogdet(dense + 0.1 * torch.eye(600, dtype=f64))[1]
    torch.testing.assert_close(logdet(A, method="exact"), exact, rtol=1e-10, atol=0)
    with torch.no_grad():
        est = logdet(A, method="slq", num_probes=20, lanczos_steps=30, random_state=0)
    assert abs(est.item() / exact.item() - 1) < 0.01


def test_inv_quad_logdet_gradient_on_blocked_matrix(rbf_gram):
    # the Gaussian-process marginal-likelihood use: d/dℓ [yᵀA⁻¹y + log det A]
    X = _data(300, 5)
    y = torch.sin(2 * X[:, 0])
    k = _kernel(0.7)
    q, ld = inv_quad_logdet(k(X, backend="blocked").add_diag(0.1), y, method="slq",
                            num_probes=30, lanczos_steps=40, tol=1e-10, random_state=1)
    (g,) = torch.autograd.grad(q + ld, k.raw_lengthscale)

    k_ref = _kernel(0.7)
    A = rbf_gram(X, lengthscale=k_ref.lengthscale) + 0.1 * torch.eye(300, dtype=f64)
    ref = y @ torch.linalg.solve(A, y) + torch.linalg.slogdet(A)[1]
    (g_ref,) = torch.autograd.grad(ref, k_ref.raw_lengthscale)
    assert abs((q + ld).item() / ref.item() - 1) < 0.01
    assert abs(g.item() / g_ref.item() - 1) < 0.05


def test_keops_backend_cg_and_eigsh(rbf_gram):
    # two KeOps formulas (each compiles for ~10 s on CPU): the width-1 product, shared by
    # cg and Lanczos, and its gradient with respect to the lengthscale. SLQ only
    # multiplies, as cg does; it is tested on the blocked backend.
    n, lam = 600, 0.05
    X = _data(n, 6) * torch.tensor([1.0, 0.7, 0.4], dtype=f64)
    b = torch.cos(X[:, 1])
    k = _kernel(1.0)
    K = k(X, backend="keops")
    dense = rbf_gram(X, lengthscale=1.0)

    x = cg(K.add_diag(lam), b, preconditioner=NystromPreconditioner(K, 100, lam, random_state=0), tol=1e-10)
    A_ref = dense + lam * torch.eye(n, dtype=f64)
    torch.testing.assert_close(x, torch.linalg.solve(A_ref, b), rtol=0, atol=1e-7)
    (g,) = torch.autograd.grad((x * b).sum(), k.raw_lengthscale)
    k_ref = _kernel(1.0)
    ref = b @ torch.linalg.solve(rbf_gram(X, lengthscale=k_ref.lengthscale) + lam * torch.eye(n, dtype=f64), b)
    (g_ref,) = torch.autograd.grad(ref, k_ref.raw_lengthscale)
    torch.testing.assert_close(g, g_ref, rtol=1e-6, atol=0)

    vals, _ = eigsh(K, 3, random_state=0)
    torch.testing.assert_close(vals, torch.linalg.eigvalsh(dense)[-3:].flip(0), rtol=1e-8, atol=0)
