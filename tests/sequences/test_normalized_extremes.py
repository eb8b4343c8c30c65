"""Normalized string kernels where the kernel values leave the float64 range: the local
alignment kernel with very negative scores (every weight far below the empty
alignment's 1) or very large ones, against log-domain brute-force sums evaluated with
mpmath; the substring kernel past 1e308, against closed forms in integer arithmetic."""
from decimal import Decimal, localcontext
from math import comb

import mpmath
import pytest
import torch

import torchkern.sequences.substring as substring_module
from torchkern.sequences import LocalAlignment, Substring

from .test_string_kernels import _gram_of_features, _random_strings, _substring_phi
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
        assert torch.equal(K.to_dense(), K.to_dense().T)
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


def test_substring_normalized_beyond_float64_equals_closed_form():
    # λ = 1, k = 260: K(x, x) = C(520, 260)² ≈ 1e310 for x = A^520 overflowed, and the
    # cosine read NaN. With λ = 1, φ_u(A^M C^j) = C(M, a) C(j, k − a) for u = A^a C^(k−a),
    # so cos(A^520, A^M C^j) = C(M, k) / √(Σ_a (C(M, a) C(j, k − a))²).
    k, M, j = 260, 262, 3
    X = ["A" * 520, "A" * M + "C" * j]
    with localcontext() as ctx:
        ctx.prec = 40
        den = sum((comb(M, a) * comb(j, k - a)) ** 2 for a in range(k - j, k + 1))
        cos = float(Decimal(comb(M, k)) / Decimal(den).sqrt())
    ref = torch.tensor([[1.0, cos], [cos, 1.0]], dtype=D64)
    kern = Substring(k, 1.0, normalize=True)
    K = kern(X)
    torch.testing.assert_close(K.to_dense(), ref, rtol=1e-13, atol=0)
    assert torch.equal(K.to_dense(), K.to_dense().T)
    torch.testing.assert_close(kern(X[1:], X).to_dense(), ref[1:], rtol=1e-13, atol=0)
    torch.testing.assert_close(kern.diag(X), ref.diagonal(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="beyond the range"):
        Substring(k, 1.0)(X[:1])            # K itself: e^714


@pytest.mark.parametrize("lam, normalize", [(0.5, False), (1.0, True), (1e-30, False),
                                            (1e-30, True)])
def test_substring_rescaled_levels_equal_brute_force(monkeypatch, lam, normalize):
    # Every level rescaled (bound e^0), in the plain (λ = 0.5, 1) and the segmented
    # (λ = 1e-30) evaluation: the logs of the factors add up to the definition's sum.
    monkeypatch.setattr(substring_module, "_LOG_BOUND", 0.0)
    X = _random_strings(7, "ab", 0, 7, seed=11)
    ref = _gram_of_features([_substring_phi(s, 3, lam) for s in X])
    if normalize:
        d = ref.diagonal().sqrt()
        ref = torch.where(d[:, None] * d > 0, ref / (d[:, None] * d), torch.zeros_like(ref))
    K = Substring(3, lam, normalize=normalize)(X).to_dense()
    torch.testing.assert_close(K, ref, rtol=1e-12, atol=0)
