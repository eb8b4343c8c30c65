"""Normalized string kernels where the kernel values leave the float64 range: the local
alignment kernel with very negative scores (every weight far below the empty
alignment's 1) or very large ones, against log-domain brute-force sums evaluated with
mpmath."""
import mpmath
import pytest
import torch

from torchkern.sequences import LocalAlignment

from .test_unseen_s15 import _la_log_brute

D64 = torch.float64
LETTERS = "ACGT"
GAPS = dict(gap_open=2.0, gap_extend=1.0)
X = ["ACGTAC", "GGTA", "TTTT", "CA", ""]
Y = ["TACG", "AAGT", "C"]


def _log_k(x, y, S, beta):
    """log K_LA with 50 digits, from log(K_LA − 1) of the brute-force sum (−inf: K = 1)."""
    t = _la_log_brute(x, y, LETTERS, S, beta, GAPS["gap_open"], GAPS["gap_extend"],
                      empty=False)
    return mpmath.mpf(0) if t == -float("inf") else mpmath.log1p(mpmath.exp(t))


def _references(A, B, S, beta):
    """log K_LA(a, b)/√(log K(a, a) log K(b, b)) (0 with an empty string) and
    K(a, b)/√(K(a, a) K(b, b))."""
    mpmath.mp.dps = 50
    L = [[_log_k(a, b, S, beta) for b in B] for a in A]
    da, db = [_log_k(a, a, S, beta) for a in A], [_log_k(b, b, S, beta) for b in B]
    log_norm = [[float(L[i][j] / mpmath.sqrt(da[i] * db[j])) if da[i] * db[j] > 0 else 0.0
                 for j in range(len(B))] for i in range(len(A))]
    norm = [[float(mpmath.exp(L[i][j] - (da[i] + db[j]) / 2)) for j in range(len(B))]
            for i in range(len(A))]
    return torch.tensor(log_norm, dtype=D64), torch.tensor(norm, dtype=D64)


def _scores(match, mismatch):
    return (torch.full((4, 4), mismatch, dtype=D64)
            + (match - mismatch) * torch.eye(4, dtype=D64)).tolist()


@pytest.mark.parametrize("match, mismatch, beta", [
    (-5.0, -10.0, 1.0),
    # log K_LA ≈ e^{-5β}: subnormal (β = 145, only a few digits left), then 0 (β = 200,
    # 1000): the quotient of the logs lost its digits, then read 0 (rows of zeros
    # while diag() said 1); its true value stays of order 1.
    (-5.0, -10.0, 145.0),
    (-5.0, -10.0, 200.0),
    (-5.0, -10.0, 1000.0),
    # K_LA up to e^{3000}, beyond float64: both normalizations in log space
    (100.0, -20.0, 5.0),
])
def test_local_alignment_normalized_equals_brute_force(match, mismatch, beta):
    S = _scores(match, mismatch)
    ref_log, ref = _references(X, X + Y, S, beta)
    for log, expected in ((True, ref_log), (False, ref)):
        k = LocalAlignment(beta, substitution=(LETTERS, S), log=log, normalize=True, **GAPS)
        K = k(X)
        torch.testing.assert_close(K.to_dense(), expected[:, :len(X)], rtol=1e-12,
                                   atol=1e-300)
        torch.testing.assert_close(k(X, Y).to_dense(), expected[:, len(X):], rtol=1e-12,
                                   atol=1e-300)
        # rows, products and the diagonal say the same as the matrix
        idx = torch.tensor([0, 3])
        torch.testing.assert_close(K.rows(idx), expected[idx, :len(X)], rtol=1e-12,
                                   atol=1e-300)
        v = torch.linspace(0.5, 2.0, len(X), dtype=D64)
        torch.testing.assert_close(K @ v, expected[:, :len(X)] @ v, rtol=1e-12, atol=1e-300)
        torch.testing.assert_close(k.diag(X), expected.diagonal(), rtol=0, atol=0)
        torch.testing.assert_close(K.diag(), expected.diagonal(), rtol=0, atol=0)
