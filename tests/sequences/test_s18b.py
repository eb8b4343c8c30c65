"""Sweep s18b of the string kernels: k(x_i, y_i) for paired samples costs n evaluations,
not the n × n Gram matrix whose diagonal it used to read."""
import itertools
from collections import Counter

import pytest
import torch

from torchkern.sequences import mismatch
from torchkern.sequences import LocalAlignment, Mismatch, Spectrum, Substring, encode
from torchkern.stats import mmd2_linear

paired_mismatch = getattr(mismatch, "paired_mismatch", None)

# Unequal lengths, one string shorter than every k used (a zero row), one with no letter.
DNA_X = ["ACGTTGCA", "AC", "GGGATTACAT", "TTAGC", "CCGTA", "", "ACGTACGTACGTAA"]
DNA_Y = ["ACGGT", "TTTACGA", "G", "TTAGCTTAG", "CAGTACCA", "ACG", "ACGTAC"]
PROT_X = ["MKTAYIAK", "GAVL", "WYHHK", "MKVLAAGIL", "", "PPGQ"]
PROT_Y = ["MKTAYL", "GAVLIMKT", "WY", "MRVLAG", "AC", "PPPPGQQW"]

KERNELS = [
    (lambda nz: Spectrum(3, normalize=nz), DNA_X, DNA_Y),
    (lambda nz: Mismatch(3, 1, normalize=nz), DNA_X, DNA_Y),
    (lambda nz: Substring(3, lam=0.6, normalize=nz, alphabet="dna"), DNA_X, DNA_Y),
    (lambda nz: LocalAlignment(beta=0.3, normalize=nz), PROT_X, PROT_Y),
    (lambda nz: LocalAlignment(beta=0.3, log=True, normalize=nz), PROT_X, PROT_Y),
    (lambda nz: Mismatch(2, 1, normalize=nz), DNA_X, DNA_Y),           # 2m >= k
    (lambda nz: Mismatch(3, 0, normalize=nz), DNA_X, DNA_Y),           # the spectrum
    (lambda nz: Mismatch(3, 1, alphabet="protein", normalize=nz), PROT_X, PROT_Y),
]


def _no_gram(monkeypatch, kernel):
    def refuse(*args, **kwargs):
        raise AssertionError("pairs evaluated the Gram matrix")
    monkeypatch.setattr(type(kernel), "_gram", refuse)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("make, X, Y", KERNELS)
def test_pairs_are_the_gram_diagonal_without_the_gram(monkeypatch, make, X, Y, normalize):
    k = make(normalize)
    ref = k(X, Y).to_dense().diagonal().clone()
    ref_x = k(X, X).to_dense().diagonal().clone()
    assert ref.abs().max() > 0
    _no_gram(monkeypatch, k)         # the old pairs read the diagonal of k(X, Y)
    torch.testing.assert_close(k.pairs(X, Y), ref, rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(k.pairs(X, X), ref_x, rtol=1e-12, atol=1e-300)
    with pytest.raises(ValueError, match="same number of samples"):
        k.pairs(X, Y[:-1])


@pytest.mark.parametrize("make, X, Y", KERNELS[::2])
def test_pairs_keep_the_dtype_of_x(monkeypatch, make, X, Y):
    k = make(True)
    alphabet = "protein" if X is PROT_X else "dna"
    X32 = encode(X, alphabet, dtype=torch.float32)
    ref = k(X32, Y).to_dense().diagonal().clone()
    _no_gram(monkeypatch, k)
    out = k.pairs(X32, Y)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("make, X, Y", KERNELS[:4])
def test_linear_time_mmd_of_strings_stays_linear(monkeypatch, make, X, Y):
    k = make(False)
    n = len(X) // 2 * 2
    Kxx, Kyy, Kxy = (k(A, B).to_dense() for A, B in [(X, X), (Y, Y), (X, Y)])
    i, j = torch.arange(0, n, 2), torch.arange(1, n, 2)
    ref = (Kxx[i, j] + Kyy[i, j] - Kxy[i, j] - Kxy[j, i]).mean()
    _no_gram(monkeypatch, k)
    torch.testing.assert_close(mmd2_linear(X, Y, k), ref, rtol=1e-12, atol=1e-12)
    # scaled and summed kernels combine their terms' pairs
    torch.testing.assert_close(mmd2_linear(X, Y, 2.0 * k), 2 * ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: Substring(3, lam=0.7, normalize=True, alphabet="dna"),
    lambda: LocalAlignment(substitution=("ACGT", 3 * torch.eye(4) - 1), log=True),
])
def test_pairs_of_many_lengths_batched(monkeypatch, make):
    # 80 pairs of lengths 0..45: several batches of similar lengths (Substring: at most
    # 2^17 / (4 · 45²) = 16 pairs per batch), each trimmed to its own longest strings
    g = torch.Generator().manual_seed(3)

    def strings():
        lengths = torch.randint(0, 46, (80,), generator=g).tolist()
        return ["".join("ACGT"[c] for c in torch.randint(0, 4, (n,), generator=g).tolist())
                for n in lengths]
    X, Y = strings(), strings()
    k = make()
    ref = k(X, Y).to_dense().diagonal().clone()
    _no_gram(monkeypatch, k)
    torch.testing.assert_close(k.pairs(X, Y), ref, rtol=1e-12, atol=1e-300)


def _mismatch_brute_force(x, y, k, m, letters="ACGT"):
    """Σ_u φ_u(x) φ_u(y), φ_u = #k-mers of the string within Hamming distance m of u."""
    def phi(s):
        c = Counter()
        for i in range(len(s) - k + 1):
            for u in itertools.product(letters, repeat=k):
                c[u] += sum(a != b for a, b in zip(s[i:i + k], u)) <= m
        return c
    px, py = phi(x), phi(y)
    return float(sum(px[u] * py[u] for u in px))


@pytest.mark.parametrize("n, length, through_g", [(30, 9, False), (3, 200, True)])
def test_mismatch_pairs_take_the_cheaper_of_the_two_sums(monkeypatch, n, length, through_g):
    # many short strings: G_uv for the k-mer pairs of each pair only; a few long ones,
    # which share most of the 4^3 k-mers: G over the distinct k-mers
    g = torch.Generator().manual_seed(5)

    def strings():
        return ["".join("ACGT"[c] for c in torch.randint(0, 4, (length - i % 3,),
                                                         generator=g).tolist())
                for i in range(n)]
    X, Y = strings(), strings()
    k = Mismatch(3, 1, normalize=True)
    def brute(A, B):
        return torch.tensor([_mismatch_brute_force(a, b, 3, 1) for a, b in zip(A, B)],
                            dtype=torch.float64)
    kxy, kxx, kyy = brute(X, Y), brute(X, X), brute(Y, Y)
    calls = []
    monkeypatch.setattr(mismatch, "paired_mismatch",
                        lambda *a, **kw: calls.append(1) or paired_mismatch(*a, **kw),
                        raising=False)
    _no_gram(monkeypatch, k)
    out = k.pairs(X, Y)
    torch.testing.assert_close(out, kxy / (kxx * kyy).sqrt(), rtol=1e-12, atol=0)
    assert bool(calls) is not through_g
