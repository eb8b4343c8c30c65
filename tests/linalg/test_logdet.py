import pytest
import torch

from torchkern.linalg import PivotedCholesky, inv_quad_logdet, logdet, trace

f64 = torch.float64


def _data(n, seed=0):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=f64)


def _noisy_gram(X, ell, noise, rbf_gram):
    return rbf_gram(X, lengthscale=ell) + noise * torch.eye(X.shape[0], dtype=f64)


def test_slq_within_one_percent_and_gradient_within_five(rbf_gram):
    X = _data(2000)
    ell = torch.tensor(1.0, dtype=f64, requires_grad=True)
    A = _noisy_gram(X, ell, 0.1, rbf_gram)
    exact = 2 * torch.linalg.cholesky(A).diagonal().log().sum()
    (g_exact,) = torch.autograd.grad(exact, ell, retain_graph=True)

    # the preconditioner whitens A for SLQ (and for the CG solves behind the gradient)
    P = PivotedCholesky(rbf_gram(X.detach(), lengthscale=1.0), 100, 0.1)
    est = logdet(A, method="slq", num_probes=30, lanczos_steps=30, preconditioner=P, random_state=0)
    (g_est,) = torch.autograd.grad(est, ell)
    assert abs(est.item() / exact.item() - 1) < 0.01
    assert abs(g_est.item() / g_exact.item() - 1) < 0.05


def test_whitened_slq_has_far_smaller_error_than_plain_slq(rbf_gram):
    # log det A = log det M + log det(M^{-1/2} A M^{-1/2}): with a good M the second term
    # is small and so is its Hutchinson variance (plain SLQ, 10 probes: errors ~10 here).
    X = _data(2000)
    K = rbf_gram(X, lengthscale=1.0)
    A = K + 0.1 * torch.eye(2000, dtype=f64)
    exact = torch.linalg.slogdet(A)[1].item()
    P = PivotedCholesky(K, 300, 0.1)
    plain, white = [], []
    for seed in range(4):
        kw = dict(method="slq", num_probes=10, lanczos_steps=30, random_state=seed)
        plain.append(abs(logdet(A, **kw).item() - exact))
        white.append(abs(logdet(A, preconditioner=P, **kw).item() - exact))
    assert max(white) < 1.0  # |log det A| ≈ 4100
    assert max(white) < 0.2 * max(plain)


def test_exact_and_auto_match_cholesky(rbf_gram):
    X = _data(300, 1)
    ell = torch.tensor(0.5, dtype=f64, requires_grad=True)
    A = _noisy_gram(X, ell, 0.01, rbf_gram)
    ref = torch.linalg.slogdet(A)[1]
    (g_ref,) = torch.autograd.grad(ref, ell, retain_graph=True)
    for method in ("exact", "auto"):
        val = logdet(A, method=method)
        torch.testing.assert_close(val, ref, rtol=1e-12, atol=0)
        torch.testing.assert_close(torch.autograd.grad(val, ell, retain_graph=True)[0], g_ref, rtol=1e-9, atol=0)


def test_slq_is_exact_when_the_krylov_space_is_everything(matmul_only):
    # n = 40 Lanczos steps span R^40; Hutchinson on a diagonal log A is exact (a tiny
    # lanczos_tol keeps the quadrature from stopping early, at its default 1e-3)
    d = torch.linspace(0.5, 3.0, 40, dtype=f64)
    est = logdet(matmul_only(torch.diag(d)), method="slq", num_probes=4, lanczos_steps=40,
                 lanczos_tol=1e-14, random_state=0)
    torch.testing.assert_close(est, d.log().sum(), rtol=1e-10, atol=0)


def test_slq_rejects_indefinite(matmul_only):
    A = torch.diag(torch.linspace(-1.0, 3.0, 30, dtype=f64))
    with pytest.raises(ValueError, match="not positive definite"):
        logdet(matmul_only(A), method="slq", lanczos_steps=30, random_state=0)
    with pytest.raises(ValueError, match="not positive definite"):
        logdet(A, method="exact")


def test_exact_needs_dense(matmul_only):
    with pytest.raises(TypeError, match="to_dense"):
        logdet(matmul_only(torch.eye(3, dtype=f64)), method="exact")


def test_trace_exact_and_hutchinson(matmul_only):
    g = torch.Generator().manual_seed(2)
    F = torch.randn(500, 500, generator=g, dtype=f64)
    A = F @ F.T / 500 + 5 * torch.eye(500, dtype=f64)
    torch.testing.assert_close(trace(A), A.diagonal().sum())
    est = trace(matmul_only(A), num_probes=200, random_state=0)
    # standard error √(2 Σ_{i≠j} A_ij² / p) ≈ 2.2 here; 5 standard errors
    se = (2 * (A.pow(2).sum() - A.diagonal().pow(2).sum()) / 200).sqrt()
    assert abs(float(est - A.diagonal().sum())) < 5 * float(se)


def test_inv_quad_logdet_matches_dense(rbf_gram, matmul_only):
    X = _data(400, 3)
    ell = torch.tensor(0.8, dtype=f64, requires_grad=True)
    b = torch.sin(X[:, 0]).requires_grad_(True)

    def grads(method, op):
        A = _noisy_gram(X, ell, 0.1, rbf_gram)
        q, ld = inv_quad_logdet(op(A), b, method=method, num_probes=40, lanczos_steps=40, tol=1e-10, random_state=0)
        return (q, ld, *torch.autograd.grad(q + ld, (ell, b)))

    A = _noisy_gram(X, ell, 0.1, rbf_gram)
    q_ref = b @ torch.linalg.solve(A, b)
    ld_ref = torch.linalg.slogdet(A)[1]
    g_ref = torch.autograd.grad(q_ref + ld_ref, (ell, b))

    q, ld, g_ell, g_b = grads("exact", lambda A: A)
    torch.testing.assert_close(q, q_ref, rtol=1e-10, atol=0)
    torch.testing.assert_close(ld, ld_ref, rtol=1e-10, atol=0)
    torch.testing.assert_close(g_ell, g_ref[0], rtol=1e-8, atol=0)

    q, ld, g_ell, g_b = grads("slq", matmul_only)
    torch.testing.assert_close(q, q_ref, rtol=1e-8, atol=0)
    torch.testing.assert_close(g_b, g_ref[1], rtol=0, atol=1e-8 * g_ref[1].abs().max())
    assert abs(ld.item() / ld_ref.item() - 1) < 0.01
    assert abs(g_ell.item() / g_ref[0].item() - 1) < 0.05
