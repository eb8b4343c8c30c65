"""Sequence kernels on the inputs an outside tester tries: the substring kernel with a
decay λ > 1 on long strings (a level's decayed sums pass float64's range), against exact
sums over subsequences in integer arithmetic."""
import math
import random
from collections import Counter
from fractions import Fraction

import pytest
import torch

from torchkern.sequences import Spectrum, Substring

from .test_string_kernels import _substring_phi


def _exact_phi(s, k, lam):
    """φ_u(s) = Σ λ^(i_k − i_1 + 1) over the index tuples spelling u, exactly (λ an int or
    a Fraction): a sweep over the last index i_k, the partial tuples of each length kept
    with weight λ^(−i_1) (the sum over subsequences, grouped; not Lodhi's pairwise DP)."""
    lam = Fraction(lam)
    partial = [dict() for _ in range(k)]          # partial[j][u]: |u| = j, Σ λ^(−i_1)
    out = {}
    for t, c in enumerate(s):
        for u, v in partial[k - 1].items() if k > 1 else [("", lam ** -t)]:
            out[u + c] = out.get(u + c, 0) + v * lam ** (t + 1)
        for j in range(k - 1, 1, -1):
            for u, v in partial[j - 1].items():
                partial[j][u + c] = partial[j].get(u + c, 0) + v
        if k > 1:
            partial[1][c] = partial[1].get(c, 0) + lam ** -t
    return out


def _exact_k(a, b):
    return sum(v * b.get(u, 0) for u, v in a.items())


def _log(q):
    q = Fraction(q)
    return math.log(q.numerator) - math.log(q.denominator)


@pytest.mark.parametrize("k", [2, 3])
def test_substring_lam_above_one_far_letters_do_not_overflow(k):
    # Every subsequence of x that uses a "d" has no partner in y, so K(x, y) is that of
    # "abcab": 1280 for k = 2. The decayed sums along x's 1,100 d's reach 2^1100 (inf)
    # and the old code returned NaN (0 · inf where y has no d).
    head, ys = "abcab", ["bacba", "ab", "cbbc"]
    x = head + "d" * 1100
    K = Substring(k=k, lam=2.0)([x], ys).to_dense()
    ref = [float(_exact_k(_substring_phi(head, k, 2), _substring_phi(y, k, 2))) for y in ys]
    assert torch.isfinite(K).all()
    torch.testing.assert_close(K[0], torch.tensor(ref, dtype=torch.float64),
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("lam", [2, Fraction(3, 2)])
def test_substring_lam_above_one_normalized_long_strings(lam):
    # Random binary strings of 900 and 880 letters: the decayed sums reach λ^1780, past
    # float64 for both λ (the old code gave NaN); the reference cosine is computed from
    # the logs of exact sums.
    rng = random.Random(17)
    xs = ["".join(rng.choice("ab") for _ in range(n)) for n in (900, 880, 3)]
    k = 3
    phis = [_exact_phi(s, k, lam) for s in xs]
    assert phis[2] == _substring_phi(xs[2], k, Fraction(lam))     # the helper: the definition
    logs = [[_log(_exact_k(a, b)) if _exact_k(a, b) else -math.inf for b in phis]
            for a in phis]
    ref = torch.tensor([[math.exp(logs[i][j] - (logs[i][i] + logs[j][j]) / 2)
                         for j in range(3)] for i in range(3)], dtype=torch.float64)
    G = Substring(k=k, lam=float(lam), normalize=True)(xs).to_dense()
    torch.testing.assert_close(G, ref, rtol=1e-10, atol=1e-300)


def test_encode_refuses_an_unknown_device_by_name():
    # torch's RuntimeError ("Expected one of cpu, cuda, ... device string: gpu0") did not
    # name the argument
    from torchkern.sequences import encode
    with pytest.raises(TypeError, match="device must be"):
        encode(["ACGT"], device="gpu0")
    with pytest.raises(TypeError, match="device must be"):
        encode(["ACGT"]).to("gpu0")


@pytest.mark.parametrize("k", [15, 20])
def test_spectrum_long_kmers_over_a_named_alphabet(k):
    # 20^15 > 2^62: Spectrum(k=15, alphabet="protein") was a ValueError, though
    # alphabet=None counted any k; such k-mers are now coded by rank. Against Counter
    # counts (lower case read as upper case under the named alphabet).
    rng = random.Random(k)
    P = "ARNDCQEGHILKMFPSTWYV"
    X = ["".join(rng.choice(P) for _ in range(40)) for _ in range(3)]
    X.append(X[0][3:35].lower())
    Y = [X[1][5:30], "".join(rng.choice(P) for _ in range(k))]

    def counts(s):
        s = s.upper()
        return Counter(s[i:i + k] for i in range(len(s) - k + 1))

    def gram(A, B):
        return torch.tensor([[float(sum(v * counts(b)[u] for u, v in counts(a).items()))
                              for b in B] for a in A], dtype=torch.float64)

    kern = Spectrum(k, alphabet="protein")
    torch.testing.assert_close(kern(X).to_dense(), gram(X, X), rtol=0, atol=0)
    torch.testing.assert_close(kern(X, Y).to_dense(), gram(X, Y), rtol=0, atol=0)
    assert float(kern(X).to_dense()[0, 3]) == 32 - k + 1    # the k-mers of X[0][3:35]


def test_sequence_set_concat_of_no_parts_is_refused_by_name():
    # torch.cat's "expected a non-empty list of Tensors"
    from torchkern.sequences import SequenceSet
    with pytest.raises(ValueError, match="parts is empty"):
        SequenceSet.concat([])


def test_half_precision_sequence_sets_compute_in_float32():
    # Spectrum on a float16 set raised torch's NotImplementedError ("sparse_matmul" not
    # implemented for 'Half'); half precision is float32 for the Grams
    from torchkern.sequences import encode
    S = encode(["ACGTACGT", "CGTA"], dtype=torch.float16)
    assert S.dtype == torch.float32
    K = Spectrum(2)(S).to_dense()
    assert K.dtype == torch.float32
    assert K.tolist() == [[13.0, 5.0], [5.0, 3.0]]   # AC, CG, GT twice and TA; CG, GT, TA
