import pytest
import torch

from torchkern.linalg import NystromPreconditioner, PivotedCholesky, cg

f64 = torch.float64


@pytest.fixture(scope="module")
def gram_5000():
    # RBF Gram, n = 5000 points in R³, ℓ = 1: ‖K‖ ≈ 1.2·10³, so with λ = 0.05 = 10⁻⁵·n
    # (a kernel ridge regression with regularization 10⁻⁵) κ(K + λI) ≈ 2.4·10⁴.
    g = torch.Generator().manual_seed(0)
    X = torch.randn(5000, 3, generator=g, dtype=f64)
    sq = (X * X).sum(1)[:, None] + (X * X).sum(1)[None, :] - 2 * X @ X.T
    K = torch.exp(-sq.clamp(min=0) / 2)
    b = torch.randn(5000, generator=g, dtype=f64)
    return K, b, 0.05


def test_preconditioning_cuts_iterations_fivefold(gram_5000):
    K, b, lam = gram_5000
    A = K + lam * torch.eye(K.shape[0], dtype=f64)
    _, plain = cg(A, b, tol=1e-6, max_iter=2000, return_info=True)
    assert plain.converged
    for P in (PivotedCholesky(K, 200, lam), NystromPreconditioner(K, 300, lam, random_state=0)):
        x, pc = cg(A, b, tol=1e-6, max_iter=2000, preconditioner=P, return_info=True)
        assert pc.converged, P
        assert plain.iterations >= 5 * pc.iterations, (P, plain.iterations, pc.iterations)
        assert float((b - A @ x).norm() / b.norm()) <= 1e-6


def test_pivoted_cholesky_reproduces_pivot_columns_and_woodbury(rbf_gram):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(300, 2, generator=g, dtype=f64)
    K = rbf_gram(X, lengthscale=0.7)
    P = PivotedCholesky(K, 40, 0.1)
    assert P.rank == 40 and P.L.shape == (300, 40) and P.pivots.unique().numel() == 40
    # a partial Cholesky is exact on the chosen columns
    torch.testing.assert_close(P.L @ P.L[P.pivots].T, K[:, P.pivots], rtol=0, atol=1e-10)
    # first pivot is the largest diagonal (all 1 here, so index 0 by argmax)
    R = torch.randn(300, 3, generator=g, dtype=f64)
    ref = torch.linalg.solve(P.L @ P.L.T + 0.1 * torch.eye(300, dtype=f64), R)
    torch.testing.assert_close(P(R), ref, rtol=0, atol=1e-9 * ref.abs().max())
    torch.testing.assert_close(P(R[:, 0]), ref[:, 0], rtol=0, atol=1e-9 * ref.abs().max())


def test_pivoted_cholesky_stops_at_exact_rank():
    g = torch.Generator().manual_seed(2)
    F = torch.randn(100, 5, generator=g, dtype=f64)
    P = PivotedCholesky(F @ F.T, 50, 1.0)
    assert P.rank == 5
    torch.testing.assert_close(P.L @ P.L.T, F @ F.T, rtol=0, atol=1e-10)


def test_nystrom_matches_its_formula(rbf_gram):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(200, 2, generator=g, dtype=f64)
    K = rbf_gram(X, lengthscale=2.0)
    P = NystromPreconditioner(K, 15, 0.01, random_state=4)
    idx = P.centers
    assert idx.numel() == 15 and idx.unique().numel() == 15
    jitter = 15 * torch.finfo(f64).eps  # m·eps·max K_ii, K_ii = 1
    K_nys = K[:, idx] @ torch.linalg.solve(K[idx][:, idx] + jitter * torch.eye(15, dtype=f64), K[idx])
    R = torch.randn(200, 2, generator=g, dtype=f64)
    ref = torch.linalg.solve(K_nys + 0.01 * torch.eye(200, dtype=f64), R)
    torch.testing.assert_close(P(R), ref, rtol=0, atol=1e-7 * ref.abs().max())
    # same seed, same centers
    assert torch.equal(NystromPreconditioner(K, 15, 0.01, random_state=4).centers, idx)


def test_nystrom_indefinite_k_uses_its_positive_part():
    g = torch.Generator().manual_seed(6)
    Q, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=f64))
    d = torch.linspace(-1, 2, 30, dtype=f64)
    K = (Q * d) @ Q.T
    P = NystromPreconditioner(K, 30, 0.5, random_state=0)  # every column: Nyström is K itself
    K_plus = (Q * d.clamp(min=0)) @ Q.T
    torch.testing.assert_close(P.L @ P.L.T, K_plus, rtol=0, atol=1e-10)


def test_with_lam_reuses_the_factor(rbf_gram):
    K = rbf_gram(torch.randn(80, 2, generator=torch.Generator().manual_seed(7), dtype=f64))
    P = PivotedCholesky(K, 10, 0.1)
    Q = P.with_lam(0.01)
    assert Q.L is P.L and Q.lam == 0.01 and P.lam == 0.1 and torch.equal(Q.pivots, P.pivots)
    R = torch.ones(80, 1, dtype=f64)
    ref = torch.linalg.solve(P.L @ P.L.T + 0.01 * torch.eye(80, dtype=f64), R)
    torch.testing.assert_close(Q(R), ref, rtol=1e-9, atol=0)


def test_float32_input_gives_float32_output(rbf_gram):
    X = torch.randn(100, 2, generator=torch.Generator().manual_seed(5))
    K = rbf_gram(X)
    for P in (PivotedCholesky(K, 10, 0.1), NystromPreconditioner(K, 10, 0.1, random_state=0)):
        assert P.L.dtype == f64
        assert P(torch.ones(100, 2)).dtype == torch.float32


def test_bad_arguments():
    K = torch.eye(10, dtype=f64)
    with pytest.raises(ValueError, match="lam"):
        PivotedCholesky(K, 3, 0.0)
    with pytest.raises(ValueError, match="rank"):
        PivotedCholesky(K, 0, 1.0)
    with pytest.raises(ValueError, match="n_centers"):
        NystromPreconditioner(K, -1, 1.0)
    with pytest.raises(TypeError, match="diag"):
        PivotedCholesky(_NoColumns(), 3, 1.0)


class _NoColumns:
    shape = (10, 10)
    dtype = f64
    device = torch.device("cpu")

    def __matmul__(self, V):
        return V


@pytest.mark.parametrize("make", [lambda K: PivotedCholesky(K, 40, 0.3),
                                  lambda K: NystromPreconditioner(K, 40, 0.3, random_state=0)])
def test_logdet_and_inverse_square_root_match_dense(rbf_gram, make):
    X = torch.randn(150, 3, generator=torch.Generator().manual_seed(3), dtype=f64)
    P = make(rbf_gram(X))
    M = P.L @ P.L.T + 0.3 * torch.eye(150, dtype=f64)
    torch.testing.assert_close(P.logdet(), torch.linalg.slogdet(M)[1], rtol=1e-12, atol=0)
    S = P.inv_sqrt(torch.eye(150, dtype=f64))
    torch.testing.assert_close(S, S.T, rtol=0, atol=1e-12)
    torch.testing.assert_close(S @ M @ S, torch.eye(150, dtype=f64), rtol=0, atol=1e-10)
    v = torch.randn(150, dtype=f64)
    torch.testing.assert_close(P.inv_sqrt(v), S @ v, rtol=1e-12, atol=1e-12)
    Q = P.with_lam(1.0)  # a new ridge gets its own square root
    M1 = P.L @ P.L.T + torch.eye(150, dtype=f64)
    S1 = Q.inv_sqrt(torch.eye(150, dtype=f64))
    torch.testing.assert_close(S1 @ M1 @ S1, torch.eye(150, dtype=f64), rtol=0, atol=1e-10)
