"""Randomized block Krylov eigensolver against dense torch.linalg.eigh."""
import pytest
import torch

from torchkern.linalg.eig import block_krylov_eigsh

from .conftest import MatmulOnly


def _top(A, k):
    w, V = torch.linalg.eigh(A)
    return w.flip(0)[:k], V.flip(1)[:, :k]


def _check(A, k, evals, evecs, rtol):
    w, V = _top(A, k)
    torch.testing.assert_close(evals, w, rtol=rtol, atol=rtol * float(w[0]))
    # each Ritz vector lies in the matching eigenvector's direction (distinct eigenvalues)
    assert torch.allclose((evecs * V).sum(0).abs(), torch.ones(k, dtype=A.dtype), atol=1e-6)


@pytest.mark.parametrize("n, rank", [(200, 20), (60, 47), (60, 60), (100, 7)])
def test_low_rank_and_small_operators(n, rank):
    # rank < block width, or a basis that fills all of R^n: the new Krylov blocks are
    # rank-deficient and must still be orthogonal to the basis.
    g = torch.Generator().manual_seed(rank)
    F = torch.randn(n, rank, generator=g, dtype=torch.float64)
    A = F @ F.T
    evals, evecs, ok, _ = block_krylov_eigsh(MatmulOnly(A), 3, random_state=0)
    assert ok
    _check(A, 3, evals, evecs, 1e-10)


def test_thick_restarts_converge():
    # A slowly decaying spectrum and a basis of at most two blocks: the solver restarts
    # from its Ritz vectors many times.
    g = torch.Generator().manual_seed(1)
    n = 400
    Q = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64)).Q
    lam = 1.0 / (1.0 + torch.arange(n, dtype=torch.float64)) ** 0.5
    A = (Q * lam) @ Q.T
    evals, evecs, ok, steps = block_krylov_eigsh(A, 4, max_depth=2, random_state=0,
                                                 max_iter=2000)
    assert ok and steps > 2
    _check(A, 4, evals, evecs, 1e-8)


def test_float32_operator_and_seed():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(300, 5, generator=g, dtype=torch.float64)
    A = torch.exp(-torch.cdist(X, X) ** 2 / 2)
    e32, _, ok, _ = block_krylov_eigsh(A.float(), 5, random_state=3)
    assert ok
    torch.testing.assert_close(e32, _top(A, 5)[0], rtol=1e-5, atol=1e-5)
    a = block_krylov_eigsh(A, 5, random_state=3)[0]
    torch.testing.assert_close(a, block_krylov_eigsh(A, 5, random_state=3)[0], rtol=0, atol=0)


def test_orthogonalization_against_a_basis():
    # A new Krylov block: orthonormal, orthogonal to the basis, and spanning what W adds
    # to it — by Cholesky QR where W is well conditioned, by the SVD fill-up where it is
    # rank-deficient outside the basis (then Cholesky QR must decline).
    from torchkern.linalg.eig import _cholesky_qr2, _orth_against
    g = torch.Generator().manual_seed(4)
    n, b = 500, 12
    B = torch.linalg.qr(torch.randn(n, 30, generator=g, dtype=torch.float64)).Q
    W = torch.randn(n, b, generator=g, dtype=torch.float64) @ torch.diag(
        torch.logspace(0, -5, b, dtype=torch.float64))  # condition number 1e5
    Q = _orth_against(W, B)
    I = torch.eye(b, dtype=torch.float64)
    assert torch.dist(Q.T @ Q, I) < 1e-13 and (B.T @ Q).abs().max() < 1e-13
    P = W - B @ (B.T @ W)
    assert torch.dist(Q @ (Q.T @ P), P) < 1e-12 * P.norm()  # span(Q) ⊇ the new part of W
    assert _cholesky_qr2(P, 1e-6 * float(W.norm(dim=0).max())) is not None
    W2 = torch.cat([W[:, :6], B[:, :6] + 1e-14 * W[:, 6:]], 1)  # half of it inside span(B)
    assert _cholesky_qr2(W2 - B @ (B.T @ W2), 1e-6 * float(W2.norm(dim=0).max())) is None
    Q2 = _orth_against(W2, B)
    assert torch.dist(Q2.T @ Q2, I) < 1e-13 and (B.T @ Q2).abs().max() < 1e-12


def test_one_thread_eigh_restores_the_thread_count():
    from torchkern.linalg._common import _eigh, one_thread
    prev = torch.get_num_threads()
    A = torch.randn(50, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    A = A + A.T
    w, V = _eigh(A)
    torch.testing.assert_close(V @ torch.diag(w) @ V.T, A, rtol=0, atol=1e-12)
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == prev
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("restored on errors too")
    assert torch.get_num_threads() == prev
