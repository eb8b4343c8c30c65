"""String kernels on unusual but valid inputs, against brute-force sums over the definitions:
substitution scores far from BLOSUM's range, tiny decays, float32."""
import itertools
import math

import pytest
import torch

from torchkern.sequences import LocalAlignment, Spectrum, Substring, blosum62, encode

D64 = torch.float64


def _la_log_brute(x, y, letters, S, beta, gap_open, gap_extend, empty=True):
    """log Σ_π exp(β s(π)) over all local alignments π of x and y (the empty one adds 1;
    ``empty=False`` leaves it out: −inf when there is no other), with the sum formed at
    the largest term so that neither e^{+800} nor 1 + e^{-200} loses it."""
    def g(n):
        return 0.0 if n == 0 else gap_open + gap_extend * (n - 1)

    logs = []
    for n in range(1, min(len(x), len(y)) + 1):
        for I in itertools.combinations(range(len(x)), n):
            for J in itertools.combinations(range(len(y)), n):
                s = sum(S[letters.index(x[a])][letters.index(y[b])] for a, b in zip(I, J))
                s -= sum(g(I[t + 1] - I[t] - 1) + g(J[t + 1] - J[t] - 1) for t in range(n - 1))
                logs.append(beta * s)
    if not empty:
        if not logs:
            return -math.inf
        top = max(logs)
        return top + math.log(math.fsum(math.exp(t - top) for t in logs))
    top = max([0.0] + logs)
    if top == 0.0:
        return math.log1p(math.fsum(math.exp(t) for t in logs))
    return top + math.log(math.fsum([math.exp(-top)] + [math.exp(t - top) for t in logs]))


@pytest.mark.parametrize("letters, S, beta, gaps, X, Y", [
    # every weight far below the empty alignment's 1: the rows' rescaling sent it to inf
    ("AB", [[-200.0, -210.0], [-210.0, -205.0]], 1.0, (1.0, 1.0), ["ABAB", "BBA", "A"],
     ["AB", "BAAB"]),
    # e^{βS} = e^120 times a row rescaled to e^597 overflowed
    ("AB", [[120.0, 0.0], [0.0, 120.0]], 1.0, (1.0, 1.0), ["AAAA"], ["AAAAAAA", "ABBA"]),
    ("AB", [[800.0, -300.0], [-300.0, 800.0]], 1.0, (1.0, 1.0), ["A", "AB"], ["A"]),
    # BLOSUM62, β = 2, free gap opening: the decayed sum along y overflowed
    (None, None, 2.0, (0.0, 2.0), ["WWW"], ["A" * 22 + "WWW"]),
])
def test_local_alignment_extreme_scores_equal_brute_force(letters, S, beta, gaps, X, Y):
    if letters is None:
        letters, S = blosum62()
        S = S.tolist()
        sub = "blosum62"
    else:
        sub = (letters, S)
    ref = torch.tensor([[_la_log_brute(a, b, letters, S, beta, *gaps) for b in Y] for a in X],
                       dtype=D64)
    K = LocalAlignment(beta, substitution=sub, gap_open=gaps[0], gap_extend=gaps[1], log=True)
    got = K(X, Y).to_dense() * beta                                    # log K_LA
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)


def _substring_gaps(s, k, lam):
    """φ_u(s) / λ^k = Σ over occurrences of u of λ^(gaps it skips), by enumeration."""
    out = {}
    for idx in itertools.combinations(range(len(s)), k):
        u = "".join(s[i] for i in idx)
        out[u] = out.get(u, 0.0) + lam ** (idx[-1] - idx[0] + 1 - k)
    return out


def test_normalized_substring_in_float32_with_small_decay_equals_brute_force():
    # K ~ λ^{2k} = 1e-40 is a float32 subnormal: the cosine of those read 0.026 on the
    # diagonal; normalizing K / λ^{2k} (in float64) gives the exact cosine
    X = ["ACGTACGTACGT", "ACGTACGTACGA", "TTGTACGTACGT", "ACG"]
    k, lam = 10, 0.01
    F = [_substring_gaps(s, k, lam) for s in X]
    G = torch.tensor([[sum(v * g.get(u, 0.0) for u, v in f.items()) for g in F] for f in F],
                     dtype=D64)
    d = G.diag()
    ref = torch.where(d[:, None] * d[None] > 0, G / (d[:, None] * d[None]).sqrt(),
                      torch.zeros_like(G))
    K = Substring(k, lam, normalize=True)
    got32 = K(encode(X, "dna", dtype=torch.float32)).to_dense()
    assert got32.dtype == torch.float32
    torch.testing.assert_close(got32, ref.float(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(K(X).to_dense(), ref, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(K(X[:2], X).to_dense(), ref[:2], rtol=1e-13, atol=1e-15)
    assert K.diag(X).tolist() == [1.0, 1.0, 1.0, 0.0]


def test_normalized_substring_with_vanishing_decay_is_the_spectrum_cosine():
    # λ = 1e-100: K = λ^{2k}(contiguous matches + O(λ)) underflows even in float64 and the
    # normalized Gram was all zeros; its limit is the normalized spectrum kernel
    X = ["ACGTAC", "ACGGTA", "TTTACG", "AAAAAA", "AC"]
    ref = Spectrum(3, alphabet=None, normalize=True)(X).to_dense()
    torch.testing.assert_close(Substring(3, 1e-100, normalize=True)(X).to_dense(), ref,
                               rtol=1e-15, atol=1e-15)
